// Decodes a KV event batch from any engine layout EAR has seen (vllm-wire.md §1.3, §4, §6): outer array or
// map, events as tagged arrays of any known length or maps with "type", hashes as ints or bin. Unknown fields
// are ignored, missing trailing fields read as null, unknown event tags are skipped and counted. Anything else
// wrong with the bytes throws KvDecodeError, and nothing else.
import { Decoder } from '@msgpack/msgpack';
import { KvDecodeError } from './errors.js';
import { digestToU64 } from './hash.js';
import type { AllBlocksCleared, BlockRemoved, BlockStored, KvEvent, KvEventBatch } from './types.js';

export interface DecodedBatch extends KvEventBatch {
  /** Events with a tag this decoder does not know (a newer engine), left out of `events`. */
  skippedEvents: number;
}

/** Larger payloads are refused: a real batch (one engine step) is far below this. */
export const MAX_PAYLOAD_BYTES = 64 << 20;

const decoder = new Decoder({ useBigInt64: true });
const ALL_CLEARED: AllBlocksCleared = Object.freeze({ type: 'AllBlocksCleared' }) as AllBlocksCleared;

type Obj = Record<string, unknown>;

function fail (what: string): never {
  throw new KvDecodeError(`malformed KV event batch: ${what}`);
}

function isMap (v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array);
}

/** One block hash as an unsigned 64-bit BigInt (negative int64 → two's complement; bin → last 8 bytes BE). */
function toHash (v: unknown, what: string): bigint {
  if (typeof v === 'bigint') return BigInt.asUintN(64, v);
  if (typeof v === 'number') {
    if (!Number.isSafeInteger(v)) fail(`${what} is not an integer`);
    return BigInt.asUintN(64, BigInt(v));
  }
  if (v instanceof Uint8Array) return digestToU64(v);
  return fail(`${what} is a ${typeof v}, not an int or bytes`);
}

function toHashes (v: unknown, what: string): bigint[] {
  if (!Array.isArray(v)) fail(`${what} is not an array`);
  const out = new Array<bigint>(v.length);
  for (let i = 0; i < v.length; i++) out[i] = toHash(v[i], what);
  return out;
}

function toInt (v: unknown, what: string): number {
  if (typeof v === 'number' && Number.isSafeInteger(v)) return v;
  if (typeof v === 'bigint' && v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)) return Number(v);
  return fail(`${what} is not an integer`);
}

function optInt (v: unknown, what: string): number | null {
  return v === null || v === undefined ? null : toInt(v, what);
}

function optStr (v: unknown, what: string): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== 'string') fail(`${what} is not a string`);
  return v;
}

function toTokens (v: unknown): number[] {
  if (v === null || v === undefined) return [];
  if (!Array.isArray(v)) fail('token_ids is not an array');
  // msgpack ints up to 32 bits arrive as numbers; a float or a 64-bit token id is not a token.
  for (let i = 0; i < v.length; i++) if (typeof v[i] !== 'number' || !Number.isInteger(v[i])) fail('token_ids holds a non-integer');
  return v as number[];
}

function toExtraKeys (v: unknown): Array<unknown[] | null> | null {
  if (v === null || v === undefined) return null;
  if (!Array.isArray(v)) fail('extra_keys is not an array');
  for (const k of v) if (k !== null && !Array.isArray(k)) fail('an extra_keys entry is neither an array nor null');
  return v as Array<unknown[] | null>;
}

/** BlockStored from its fields, in declaration order. */
function stored (hashes: unknown, parent: unknown, tokens: unknown, blockSize: unknown, loraId: unknown, medium: unknown, loraName: unknown,
  extraKeys: unknown, groupIdx: unknown, specKind: unknown, slidingWindow: unknown): BlockStored {
  return {
    type: 'BlockStored',
    blockHashes: toHashes(hashes, 'block_hashes'),
    parentBlockHash: parent === null || parent === undefined ? null : toHash(parent, 'parent_block_hash'),
    tokenIds: toTokens(tokens),
    blockSize: toInt(blockSize, 'block_size'),
    loraId: optInt(loraId, 'lora_id'),
    medium: optStr(medium, 'medium'),
    loraName: optStr(loraName, 'lora_name'),
    extraKeys: toExtraKeys(extraKeys),
    groupIdx: optInt(groupIdx, 'group_idx'),
    kvCacheSpecKind: optStr(specKind, 'kv_cache_spec_kind'),
    kvCacheSpecSlidingWindow: optInt(slidingWindow, 'kv_cache_spec_sliding_window'),
  };
}

function removed (hashes: unknown, medium: unknown, groupIdx: unknown): BlockRemoved {
  return {
    type: 'BlockRemoved',
    blockHashes: toHashes(hashes, 'block_hashes'),
    medium: optStr(medium, 'medium'),
    groupIdx: optInt(groupIdx, 'group_idx'),
  };
}

/** Fields a tagged array must carry (after the tag): block_hashes..block_size for BlockStored, block_hashes for BlockRemoved. */
const STORED_REQUIRED = 4;
const REMOVED_REQUIRED = 1;

/** The event, or null when its tag is unknown (skipped and counted by the caller). */
function decodeEvent (raw: unknown): KvEvent | null {
  if (Array.isArray(raw)) {
    const tag = raw[0];
    if (typeof tag !== 'string') return fail('an event array does not start with a string tag');
    switch (tag) {
      case 'BlockStored':
        if (raw.length < 1 + STORED_REQUIRED) fail(`BlockStored array has ${raw.length} elements`);
        // Elements past the end of an older, shorter array read as undefined, i.e. null.
        return stored(raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7], raw[8], raw[9], raw[10], raw[11]);
      case 'BlockRemoved':
        if (raw.length < 1 + REMOVED_REQUIRED) fail(`BlockRemoved array has ${raw.length} elements`);
        return removed(raw[1], raw[2], raw[3]);
      case 'AllBlocksCleared': return ALL_CLEARED;
      default: return null;
    }
  }
  if (isMap(raw)) {
    const tag = raw.type;
    if (typeof tag !== 'string') return fail('an event map has no string "type"');
    switch (tag) {
      case 'BlockStored':
        if (raw.block_hashes === undefined || raw.block_size === undefined) fail('BlockStored map lacks block_hashes or block_size');
        return stored(raw.block_hashes, raw.parent_block_hash, raw.token_ids, raw.block_size, raw.lora_id, raw.medium, raw.lora_name,
          raw.extra_keys, raw.group_idx, raw.kv_cache_spec_kind, raw.kv_cache_spec_sliding_window);
      case 'BlockRemoved':
        if (raw.block_hashes === undefined) fail('BlockRemoved map lacks block_hashes');
        return removed(raw.block_hashes, raw.medium, raw.group_idx);
      case 'AllBlocksCleared': return ALL_CLEARED;
      default: return null;
    }
  }
  return fail('an event is neither an array nor a map');
}

function toTs (v: unknown): number {
  if (typeof v === 'number' && Number.isFinite(v)) return v;
  if (typeof v === 'bigint') return Number(v);
  return fail('ts is not a number');
}

/** Decodes one PUB payload (the third frame). Throws KvDecodeError, and only that, on bad bytes. */
export function decodeBatch (payload: Uint8Array): DecodedBatch {
  if (!(payload instanceof Uint8Array)) fail('payload is not bytes');
  if (payload.length > MAX_PAYLOAD_BYTES) fail(`payload of ${payload.length} bytes exceeds ${MAX_PAYLOAD_BYTES}`);
  let root: unknown;
  try {
    root = decoder.decode(payload);
  } catch (err) {
    throw new KvDecodeError(`malformed KV event batch: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
  let ts: unknown, rawEvents: unknown, dp: unknown;
  if (Array.isArray(root)) {
    if (root.length < 2) fail(`the batch array has ${root.length} elements`);
    [ts, rawEvents, dp] = root;
  } else if (isMap(root)) {
    ts = root.ts;
    rawEvents = root.events;
    dp = root.data_parallel_rank !== undefined ? root.data_parallel_rank : root.attn_dp_rank;
  } else {
    fail('the batch is neither an array nor a map');
  }
  if (!Array.isArray(rawEvents)) fail('events is not an array');
  const events: KvEvent[] = [];
  let skippedEvents = 0;
  for (const raw of rawEvents) {
    const e = decodeEvent(raw);
    if (e === null) skippedEvents++;
    else events.push(e);
  }
  return { ts: toTs(ts), events, dataParallelRank: optInt(dp, 'data_parallel_rank'), skippedEvents };
}
