// KV-cache events as EAR sees them after decoding (../shared/specs/vllm-wire.md §1), whatever the layout,
// version or engine that produced them. Engine hashes are normalised to an unsigned 64-bit BigInt:
// ints as they are (a negative int64 as its two's complement), bytes as their last 8 bytes big-endian.

/**
 * H is the hash type: bigint after decoding; the encoder also takes raw digests (Uint8Array), sent whole in
 * bytes mode and as their last 8 bytes big-endian in int mode, as vLLM does.
 */
export interface BlockStored<H = bigint> {
  type: 'BlockStored';
  blockHashes: H[];
  parentBlockHash: H | null;
  /** Concatenated token ids of every block in blockHashes (may be empty: a tier-only store, e.g. CPU offload). */
  tokenIds: number[];
  blockSize: number;
  loraId: number | null;
  /** 'GPU', 'CPU', ... as the engine sent it; null when absent. */
  medium: string | null;
  loraName: string | null;
  /** One entry per block; null when absent. */
  extraKeys: Array<unknown[] | null> | null;
  groupIdx: number | null;
  /** vLLM ≥ #40984: the group's attention kind, e.g. 'full_attention', 'sliding_window'; null or absent when not sent. */
  kvCacheSpecKind?: string | null;
  /** vLLM ≥ #40984: the sliding window in tokens for a sliding-window group; null or absent when not sent. */
  kvCacheSpecSlidingWindow?: number | null;
}

export interface BlockRemoved<H = bigint> {
  type: 'BlockRemoved';
  blockHashes: H[];
  medium: string | null;
  groupIdx: number | null;
}

export interface AllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type KvEvent<H = bigint> = BlockStored<H> | BlockRemoved<H> | AllBlocksCleared;

/** What the encoder accepts as a hash. */
export type WireHash = bigint | Uint8Array;

export interface KvEventBatch<H = bigint> {
  /** Epoch seconds (float) when the engine step that produced the events ended. */
  ts: number;
  events: Array<KvEvent<H>>;
  /** vLLM's data_parallel_rank, SGLang's attn_dp_rank; null when absent. */
  dataParallelRank: number | null;
}

/** How an engine lays its events out on the wire. */
export interface KvWireFormat {
  /** Outer batch: array [ts, events, dp] (every vLLM release so far) or map {ts, events, data_parallel_rank}. */
  batchLayout: 'array' | 'map';
  /** Inner events: tagged arrays (vLLM before PR #42892) or maps with a "type" key (after). */
  eventLayout: 'array' | 'map';
  /** Block hashes as msgpack ints (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1, the default) or bin (=0). */
  hashFormat: 'int' | 'bytes';
}
