// KV-cache events as EAR sees them after decoding (../shared/specs/vllm-wire.md §1), whatever the layout,
// version or engine that produced them. Engine hashes are normalised to an unsigned 64-bit BigInt:
// ints as they are (a negative int64 as its two's complement), bytes as their last 8 bytes big-endian.

export interface BlockStored {
  type: 'BlockStored';
  blockHashes: bigint[];
  parentBlockHash: bigint | null;
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
}

export interface BlockRemoved {
  type: 'BlockRemoved';
  blockHashes: bigint[];
  medium: string | null;
  groupIdx: number | null;
}

export interface AllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type KvEvent = BlockStored | BlockRemoved | AllBlocksCleared;

export interface KvEventBatch {
  /** Epoch seconds (float) when the engine step that produced the events ended. */
  ts: number;
  events: KvEvent[];
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
