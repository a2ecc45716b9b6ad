// Encodes a KV event batch exactly as vLLM's msgspec encoder writes it (vllm-wire.md §1.2-1.4), in any of the
// layouts engines put on the wire, so that the simulator can speak every version and tests can exercise skew.
import { digestToU64 } from './hash.js';
import { MsgpackWriter } from './msgpack-writer.js';
import type { BlockRemoved, BlockStored, KvEvent, KvEventBatch, KvWireFormat, WireHash } from './types.js';

export interface EncodeOptions {
  /**
   * Array layouts only: the length of each tagged array (tag included) or of the outer batch, to emit an
   * older schema. BlockStored: 12 now; 6 (v0.9, also SGLang's 5-field form), 7 +medium, 8 +lora_name,
   * 9 +extra_keys, 10 +group_idx. BlockRemoved: 4 now; 2 (v0.9), 3 +medium. Batch: 3 now; 2 before dp rank.
   */
  blockStoredLength?: number;
  blockRemovedLength?: number;
  batchLength?: number;
  /** Map batch layout only: the key of the dp rank ('attn_dp_rank' for SGLang). */
  dpRankKey?: 'data_parallel_rank' | 'attn_dp_rank';
}

/** BlockStored fields in declaration order (after the tag); the array layout emits a prefix of these. */
const STORED_FIELDS = 11;
const REMOVED_FIELDS = 3;

function checkLength (name: string, value: number | undefined, min: number, max: number): number {
  const n = value ?? max;
  if (!Number.isInteger(n) || n < min || n > max) throw new RangeError(`${name} must be an integer in [${min}, ${max}], got ${value}`);
  return n;
}

function writeHash (w: MsgpackWriter, h: WireHash, format: KvWireFormat['hashFormat']): void {
  if (format === 'int') {
    w.int(typeof h === 'bigint' ? h : digestToU64(h));
  } else if (h instanceof Uint8Array) {
    w.bin(h);
  } else {
    // A hash known only as a number goes out as its 8 bytes; decoders read bin as the last 8 bytes BE.
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt.asUintN(64, h));
    w.bin(b);
  }
}

function writeHashes (w: MsgpackWriter, hs: WireHash[], format: KvWireFormat['hashFormat']): void {
  w.arrayHeader(hs.length);
  for (const h of hs) writeHash(w, h, format);
}

function writeInts (w: MsgpackWriter, xs: number[]): void {
  w.arrayHeader(xs.length);
  for (const x of xs) w.int(x);
}

/** Writes BlockStored field i (declaration order, after the tag). */
function writeStoredField (w: MsgpackWriter, e: BlockStored<WireHash>, i: number, f: KvWireFormat['hashFormat']): void {
  switch (i) {
    case 0: return writeHashes(w, e.blockHashes, f);
    case 1: return e.parentBlockHash === null ? w.nil() : writeHash(w, e.parentBlockHash, f);
    case 2: return writeInts(w, e.tokenIds);
    case 3: return w.int(e.blockSize);
    case 4: return w.value(e.loraId);
    case 5: return w.value(e.medium);
    case 6: return w.value(e.loraName);
    case 7: return w.value(e.extraKeys);
    case 8: return w.value(e.groupIdx);
    case 9: return w.value(e.kvCacheSpecKind ?? null);
    default: return w.value(e.kvCacheSpecSlidingWindow ?? null);
  }
}

const STORED_KEYS = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name',
  'extra_keys', 'group_idx', 'kv_cache_spec_kind', 'kv_cache_spec_sliding_window'] as const;
/** Map layout: fields from extra_keys on have a None default, so omit_defaults drops them when null. */
const STORED_FIRST_DEFAULTED = 7;

function writeStored (w: MsgpackWriter, e: BlockStored<WireHash>, fmt: KvWireFormat, arrayLength: number): void {
  if (fmt.eventLayout === 'array') {
    w.arrayHeader(arrayLength);
    w.str('BlockStored');
    for (let i = 0; i < arrayLength - 1; i++) writeStoredField(w, e, i, fmt.hashFormat);
    return;
  }
  const raw: unknown[] = [e.extraKeys, e.groupIdx, e.kvCacheSpecKind, e.kvCacheSpecSlidingWindow];
  const present = STORED_KEYS.map((_, i) => i < STORED_FIRST_DEFAULTED || (raw[i - STORED_FIRST_DEFAULTED] ?? null) !== null);
  w.mapHeader(1 + present.filter(Boolean).length);
  w.str('type');
  w.str('BlockStored');
  for (let i = 0; i < STORED_KEYS.length; i++) {
    if (!present[i]) continue;
    w.str(STORED_KEYS[i]);
    writeStoredField(w, e, i, fmt.hashFormat);
  }
}

function writeRemoved (w: MsgpackWriter, e: BlockRemoved<WireHash>, fmt: KvWireFormat, arrayLength: number): void {
  if (fmt.eventLayout === 'array') {
    w.arrayHeader(arrayLength);
    w.str('BlockRemoved');
    writeHashes(w, e.blockHashes, fmt.hashFormat);
    if (arrayLength > 2) w.value(e.medium);
    if (arrayLength > 3) w.value(e.groupIdx);
    return;
  }
  const withGroup = e.groupIdx !== null;
  w.mapHeader(withGroup ? 4 : 3);
  w.str('type');
  w.str('BlockRemoved');
  w.str('block_hashes');
  writeHashes(w, e.blockHashes, fmt.hashFormat);
  w.str('medium');
  w.value(e.medium);
  if (withGroup) {
    w.str('group_idx');
    w.value(e.groupIdx);
  }
}

function writeEvent (w: MsgpackWriter, e: KvEvent<WireHash>, fmt: KvWireFormat, lengths: { stored: number; removed: number }): void {
  switch (e.type) {
    case 'BlockStored': return writeStored(w, e, fmt, lengths.stored);
    case 'BlockRemoved': return writeRemoved(w, e, fmt, lengths.removed);
    case 'AllBlocksCleared':
      if (fmt.eventLayout === 'array') w.arrayHeader(1);
      else { w.mapHeader(1); w.str('type'); }
      w.str('AllBlocksCleared');
      return;
    default: throw new TypeError(`unknown event type ${(e as { type: unknown }).type}`);
  }
}

/** The msgpack payload of one PUB message (the third frame), byte for byte what vLLM would send. */
export function encodeBatch (batch: KvEventBatch<WireHash>, format: KvWireFormat, opts: EncodeOptions = {}): Uint8Array {
  const lengths = {
    stored: checkLength('blockStoredLength', opts.blockStoredLength, 5, STORED_FIELDS + 1),
    removed: checkLength('blockRemovedLength', opts.blockRemovedLength, 2, REMOVED_FIELDS + 1),
  };
  const batchLength = checkLength('batchLength', opts.batchLength, 2, 3);
  const w = new MsgpackWriter();
  if (format.batchLayout === 'array') {
    w.arrayHeader(batchLength);
  } else {
    // omit_defaults: data_parallel_rank (default None) is dropped when null.
    w.mapHeader(batch.dataParallelRank === null ? 2 : 3);
    w.str('ts');
  }
  w.float64(batch.ts);
  if (format.batchLayout === 'map') w.str('events');
  w.arrayHeader(batch.events.length);
  for (const e of batch.events) writeEvent(w, e, format, lengths);
  if (format.batchLayout === 'array') {
    if (batchLength === 3) w.value(batch.dataParallelRank);
  } else if (batch.dataParallelRank !== null) {
    w.str(opts.dpRankKey ?? 'data_parallel_rank');
    w.int(batch.dataParallelRank);
  }
  return w.bytes();
}
