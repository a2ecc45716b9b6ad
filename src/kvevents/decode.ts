// Decodes a KV event batch from any engine layout EAR has seen (vllm-wire.md §1.3, §4, §6): outer array or
// map, events as tagged arrays of any known length or maps with "type", hashes as ints or bin. Unknown fields
// are ignored, missing trailing fields read as null, unknown event tags are skipped and counted. Anything else
// wrong with the bytes throws KvDecodeError, and nothing else.
import { Decoder } from '@msgpack/msgpack';
import { KvDecodeError } from './errors.js';
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
  if (v instanceof Uint8Array) {
    let x = 0n;
    for (let i = Math.max(0, v.length - 8); i < v.length; i++) x = (x << 8n) | BigInt(v[i]);
    return x;
  }
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

/** BlockStored from its fields in declaration order (f[0] = block_hashes). */
function stored (f: (i: number) => unknown): BlockStored {
  const blockHashes = toHashes(f(0), 'block_hashes');
  const parent = f(1);
  return {
    type: 'BlockStored',
    blockHashes,
    parentBlockHash: parent === null || parent === undefined ? null : toHash(parent, 'parent_block_hash'),
    tokenIds: toTokens(f(2)),
    blockSize: toInt(f(3), 'block_size'),
    loraId: optInt(f(4), 'lora_id'),
    medium: optStr(f(5), 'medium'),
    loraName: optStr(f(6), 'lora_name'),
    extraKeys: toExtraKeys(f(7)),
    groupIdx: optInt(f(8), 'group_idx'),
    kvCacheSpecKind: optStr(f(9), 'kv_cache_spec_kind'),
    kvCacheSpecSlidingWindow: optInt(f(10), 'kv_cache_spec_sliding_window'),
  };
}

function removed (f: (i: number) => unknown): BlockRemoved {
  return {
    type: 'BlockRemoved',
    blockHashes: toHashes(f(0), 'block_hashes'),
    medium: optStr(f(1), 'medium'),
    groupIdx: optInt(f(2), 'group_idx'),
  };
}

const STORED_KEYS = ['block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name',
  'extra_keys', 'group_idx', 'kv_cache_spec_kind', 'kv_cache_spec_sliding_window'];
const REMOVED_KEYS = ['block_hashes', 'medium', 'group_idx'];
/** Fields a tagged array must carry (after the tag): block_hashes..block_size for BlockStored, block_hashes for BlockRemoved. */
const STORED_REQUIRED = 4;
const REMOVED_REQUIRED = 1;

/** The event, or null when its tag is unknown (skipped and counted by the caller). */
function decodeEvent (raw: unknown): KvEvent | null {
  if (Array.isArray(raw)) {
    const tag = raw[0];
    if (typeof tag !== 'string') return fail('an event array does not start with a string tag');
    const at = (i: number): unknown => raw[i + 1];
    switch (tag) {
      case 'BlockStored':
        if (raw.length < 1 + STORED_REQUIRED) fail(`BlockStored array has ${raw.length} elements`);
        return stored(at);
      case 'BlockRemoved':
        if (raw.length < 1 + REMOVED_REQUIRED) fail(`BlockRemoved array has ${raw.length} elements`);
        return removed(at);
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
        return stored((i) => raw[STORED_KEYS[i]]);
      case 'BlockRemoved':
        if (raw.block_hashes === undefined) fail('BlockRemoved map lacks block_hashes');
        return removed((i) => raw[REMOVED_KEYS[i]]);
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
