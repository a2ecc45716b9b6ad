// Properties of the decoder over generated input: valid batches in every layout round-trip; random bytes and
// mutated valid payloads either decode to well-typed events or throw KvDecodeError, never anything else.
// Then the path a subscriber takes (issue 13 item 4): random and mutated multipart frames through the frame
// parsers and the decoder, and whatever decodes through the event applier, which counts what it cannot use
// and never throws or leaves another backend's entries (or its own after a clear) damaged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { encode as msgpackEncode } from '@msgpack/msgpack';
import { decodeBatch, encodeBatch, digestToU64, KvDecodeError, type DecodedBatch, type EncodeOptions } from '../../src/kvevents/codec.js';
import type { BlockStored, KvEvent, KvEventBatch, KvWireFormat, WireHash } from '../../src/kvevents/types.js';
import { buildPubMessage, buildReplayReply, parsePubMessage, parseReplayReply } from '../../src/kvevents/frames.js';
import { createRegion, Region } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { EventApplier } from '../../src/kvevents/event-applier.js';

const U64 = (1n << 64n) - 1n;
const hashArb: fc.Arbitrary<WireHash> = fc.oneof(
  fc.bigInt({ min: 0n, max: U64 }),
  fc.bigInt({ min: -(1n << 63n), max: -1n }),
  fc.constantFrom(0n, 1n, 127n, 128n, (1n << 32n) - 1n, 1n << 32n, (1n << 63n) - 1n, 1n << 63n, U64),
  fc.uint8Array({ minLength: 8, maxLength: 32 }),
);
const optStr = fc.option(fc.string({ maxLength: 40 }), { nil: null });
const optInt = fc.option(fc.integer({ min: 0, max: 1 << 20 }), { nil: null });
const extraKeyArb = fc.option(fc.array(fc.oneof(fc.string({ maxLength: 12 }), fc.integer({ min: -1000, max: 1 << 30 }), fc.constant(null)), { maxLength: 3 }), { nil: null });

const eventArb: fc.Arbitrary<KvEvent<WireHash>> = fc.oneof(
  fc.record({
    type: fc.constant('BlockStored' as const),
    blockHashes: fc.array(hashArb, { maxLength: 6 }),
    parentBlockHash: fc.option(hashArb, { nil: null }),
    tokenIds: fc.array(fc.integer({ min: 0, max: 0xffffffff }), { maxLength: 96 }),
    blockSize: fc.integer({ min: 1, max: 256 }),
    loraId: optInt,
    medium: optStr,
    loraName: optStr,
    extraKeys: fc.option(fc.array(extraKeyArb, { maxLength: 4 }), { nil: null }),
    groupIdx: optInt,
    kvCacheSpecKind: optStr,
    kvCacheSpecSlidingWindow: optInt,
  }),
  fc.record({ type: fc.constant('BlockRemoved' as const), blockHashes: fc.array(hashArb, { maxLength: 6 }), medium: optStr, groupIdx: optInt }),
  fc.constant({ type: 'AllBlocksCleared' as const }),
);

const batchArb: fc.Arbitrary<KvEventBatch<WireHash>> = fc.record({
  ts: fc.double({ min: 0, max: 4e9, noNaN: true }),
  events: fc.array(eventArb, { maxLength: 6 }),
  dataParallelRank: optInt,
});

const formatArb: fc.Arbitrary<KvWireFormat> = fc.record({
  batchLayout: fc.constantFrom('array' as const, 'map' as const),
  eventLayout: fc.constantFrom('array' as const, 'map' as const),
  hashFormat: fc.constantFrom('int' as const, 'bytes' as const),
});
const optsArb: fc.Arbitrary<EncodeOptions> = fc.record({
  blockStoredLength: fc.integer({ min: 5, max: 12 }),
  blockRemovedLength: fc.integer({ min: 2, max: 4 }),
  batchLength: fc.integer({ min: 2, max: 3 }),
  dpRankKey: fc.constantFrom('data_parallel_rank' as const, 'attn_dp_rank' as const),
});

const norm = (h: WireHash): bigint => (typeof h === 'bigint' ? BigInt.asUintN(64, h) : digestToU64(h));

/** What decode(encode(b)) must give: hashes as u64, fields an older array length lacks as null. */
function expected (b: KvEventBatch<WireHash>, f: KvWireFormat, o: EncodeOptions): KvEventBatch {
  const arr = f.eventLayout === 'array';
  const sLen = arr ? o.blockStoredLength! : 12;
  const rLen = arr ? o.blockRemovedLength! : 4;
  const keep = <T>(v: T, pos: number, len: number): T | null => (pos < len ? v : null);
  return {
    ts: b.ts,
    dataParallelRank: f.batchLayout === 'array' && o.batchLength === 2 ? null : b.dataParallelRank,
    events: b.events.map((e): KvEvent => {
      if (e.type === 'BlockStored') {
        return {
          type: 'BlockStored', blockHashes: e.blockHashes.map(norm), parentBlockHash: e.parentBlockHash === null ? null : norm(e.parentBlockHash),
          tokenIds: e.tokenIds, blockSize: e.blockSize, loraId: keep(e.loraId, 5, sLen), medium: keep(e.medium, 6, sLen), loraName: keep(e.loraName, 7, sLen),
          extraKeys: keep(e.extraKeys, 8, sLen), groupIdx: keep(e.groupIdx, 9, sLen), kvCacheSpecKind: keep(e.kvCacheSpecKind ?? null, 10, sLen),
          kvCacheSpecSlidingWindow: keep(e.kvCacheSpecSlidingWindow ?? null, 11, sLen),
        };
      }
      if (e.type === 'BlockRemoved') return { type: 'BlockRemoved', blockHashes: e.blockHashes.map(norm), medium: keep(e.medium, 2, rLen), groupIdx: keep(e.groupIdx, 3, rLen) };
      return e;
    }),
  };
}

/** Decodes; a result must be well typed, a failure must be a KvDecodeError. */
function decodeChecked (p: Uint8Array): DecodedBatch | null {
  let d: DecodedBatch;
  try {
    d = decodeBatch(p);
  } catch (err) {
    if (!(err instanceof KvDecodeError) || err.code !== 'EAR_ERR_KV_DECODE') throw new Error(`threw a non-KvDecodeError: ${String(err)}`);
    return null;
  }
  assert.equal(typeof d.ts, 'number');
  assert.ok(Number.isInteger(d.skippedEvents) && d.skippedEvents >= 0);
  const isHash = (h: unknown): boolean => typeof h === 'bigint' && h >= 0n && h <= U64;
  for (const e of d.events) {
    if (e.type === 'AllBlocksCleared') continue;
    assert.ok(e.blockHashes.every(isHash));
    if (e.type === 'BlockStored') {
      assert.ok(e.parentBlockHash === null || isHash(e.parentBlockHash));
      assert.ok(Number.isSafeInteger(e.blockSize));
      assert.ok(e.tokenIds.every((t) => Number.isInteger(t)));
      assert.ok(e.medium === null || typeof e.medium === 'string');
    }
  }
  return d;
}

test('every generated batch round-trips through every layout, hash format and array length', () => {
  fc.assert(fc.property(batchArb, formatArb, optsArb, (b, f, o) => {
    assert.deepEqual(decodeBatch(encodeBatch(b, f, o)), { ...expected(b, f, o), skippedEvents: 0 });
  }), { numRuns: 400 });
});

test('random bytes never make the decoder throw anything but KvDecodeError', () => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 256 }), (p) => { decodeChecked(p); }), { numRuns: 3000 });
  // Bytes that start like a batch (array or map header) get past the first check more often.
  fc.assert(fc.property(fc.constantFrom(0x92, 0x93, 0x83, 0xdc), fc.uint8Array({ maxLength: 128 }), (h, rest) => { decodeChecked(new Uint8Array([h, ...rest])); }), { numRuns: 3000 });
});

test('random msgpack values shaped like batches never throw anything but KvDecodeError', () => {
  const leaf = fc.oneof(fc.integer(), fc.bigInt({ min: -(1n << 63n), max: U64 }), fc.double(), fc.string({ maxLength: 8 }),
    fc.constantFrom('BlockStored', 'BlockRemoved', 'AllBlocksCleared', 'type', null), fc.uint8Array({ maxLength: 10 }), fc.boolean());
  const { value } = fc.letrec((tie) => ({
    value: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, fc.array(tie('value'), { maxLength: 6 }),
      fc.dictionary(fc.constantFrom('type', 'block_hashes', 'block_size', 'token_ids', 'medium', 'ts', 'events', 'x'), tie('value'), { maxKeys: 5 })),
  }));
  const shaped = fc.oneof(
    fc.tuple(fc.oneof(fc.double(), leaf), fc.array(fc.oneof(value, fc.tuple(fc.constantFrom('BlockStored', 'BlockRemoved', 'AllBlocksCleared'), value, value, value, value, value)), { maxLength: 4 }), value),
    fc.record({ ts: leaf, events: fc.array(value, { maxLength: 4 }), attn_dp_rank: leaf }),
    value,
  );
  fc.assert(fc.property(shaped, (v) => { decodeChecked(msgpackEncode(v, { useBigInt64: true })); }), { numRuns: 2000 });
});

test('mutations of valid payloads never throw anything but KvDecodeError', () => {
  const mutation = fc.oneof(
    fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
    fc.record({ kind: fc.constant('set' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
    fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
    fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
    fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
  );
  fc.assert(fc.property(batchArb, formatArb, optsArb, fc.array(mutation, { minLength: 1, maxLength: 4 }), (b, f, o, ms) => {
    let p = Array.from(encodeBatch(b, f, o));
    for (const m of ms) {
      const at = p.length === 0 ? 0 : m.at % p.length;
      if (m.kind === 'flip') p[at] ^= 1 << m.bit;
      else if (m.kind === 'set') p[at] = m.byte;
      else if (m.kind === 'insert') p.splice(at, 0, m.byte);
      else if (m.kind === 'delete') p.splice(at, 1);
      else p = p.slice(0, at);
    }
    decodeChecked(new Uint8Array(p));
  }), { numRuns: 3000 });
});

/** A byte-level mutation of a payload or frame. */
const mutationArb = fc.oneof(
  fc.record({ kind: fc.constant('flip' as const), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
  fc.record({ kind: fc.constant('insert' as const), at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }) }),
  fc.record({ kind: fc.constant('delete' as const), at: fc.nat() }),
  fc.record({ kind: fc.constant('truncate' as const), at: fc.nat() }),
);
function mutate (bytes: Uint8Array, ms: Array<{ kind: string; at: number; bit?: number; byte?: number }>): Uint8Array {
  let p = Array.from(bytes);
  for (const m of ms) {
    const at = p.length === 0 ? 0 : m.at % p.length;
    if (m.kind === 'flip' && p.length > 0) p[at] ^= 1 << m.bit!;
    else if (m.kind === 'insert') p.splice(at, 0, m.byte!);
    else if (m.kind === 'delete') p.splice(at, 1);
    else if (m.kind === 'truncate') p = p.slice(0, at);
  }
  return new Uint8Array(p);
}

/** What the subscriber does with a PUB message's frames: parse, then decode; a failure must be a KvDecodeError. */
function receiveChecked (frames: Uint8Array[], replay: boolean): DecodedBatch | null {
  let payload: Uint8Array;
  try {
    payload = replay ? parseReplayReply(frames).payload : parsePubMessage(frames).payload;
  } catch (err) {
    if (!(err instanceof KvDecodeError)) throw new Error(`frame parsing threw a non-KvDecodeError: ${String(err)}`);
    return null;
  }
  return decodeChecked(payload);
}

test('random and mutated multipart frames (PUB and replay) never throw anything but KvDecodeError', () => {
  const frameArb = fc.uint8Array({ maxLength: 64 });
  fc.assert(fc.property(fc.array(frameArb, { maxLength: 6 }), fc.boolean(), (frames, replay) => { receiveChecked(frames, replay); }), { numRuns: 3000 });
  // Valid messages with one frame mutated, dropped, duplicated or added.
  fc.assert(fc.property(batchArb, formatArb, optsArb, fc.bigInt({ min: 0n, max: U64 }), fc.string({ maxLength: 24 }), fc.nat(), fc.array(mutationArb, { minLength: 1, maxLength: 3 }),
    fc.constantFrom('mutate', 'drop', 'dup', 'add', 'empty'), fc.boolean(), (b, f, o, seq, topic, which, ms, op, replay) => {
      const payload = encodeBatch(b, f, o);
      let frames: Uint8Array[] = replay ? buildReplayReply(new Uint8Array([1, 2]), seq, payload).slice(1) : [...buildPubMessage(topic, seq, payload)];
      const i = which % frames.length;
      if (op === 'mutate') frames[i] = mutate(frames[i], ms);
      else if (op === 'drop') frames.splice(i, 1);
      else if (op === 'dup') frames.splice(i, 0, frames[i]);
      else if (op === 'add') frames.push(mutate(payload, ms));
      else frames = frames.map((x, j) => (j === i ? new Uint8Array(0) : x));
      receiveChecked(frames, replay);
    }), { numRuns: 3000 });
});

const BS = 4;
const small = { prefixIndexKeys: 1 << 12, sessions: 64, heapJobs: 16, recordRingOps: 1 << 8, pods: 8, scratchSlots: 8, scratchBytes: 1 << 16 };
const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);
const storedChain = (hashes: bigint[], tokens: number[]): KvEventBatch => ({
  ts: 1, dataParallelRank: 0,
  events: [{ type: 'BlockStored', blockHashes: hashes, parentBlockHash: null, tokenIds: tokens, blockSize: BS, loraId: null, medium: 'GPU', loraName: null, extraKeys: null, groupIdx: 0 } satisfies BlockStored]
});

test('whatever decodes, the event applier takes: counted, never thrown; another backend\'s entries and a clear stay exact', () => {
  // Events near what an engine sends (block size 4 or another, token counts right or wrong, parents known or not), and mutated payloads.
  const nearHash = fc.oneof(fc.constantFrom(1n, 2n, 3n, 4n, 900n, 901n), hashArb);
  const nearEvent: fc.Arbitrary<KvEvent<WireHash>> = fc.oneof(
    fc.record({
      type: fc.constant('BlockStored' as const), blockHashes: fc.array(nearHash, { maxLength: 4 }), parentBlockHash: fc.option(nearHash, { nil: null }),
      tokenIds: fc.oneof(fc.array(fc.integer({ min: 0, max: 300 }), { maxLength: 20 }), fc.array(fc.integer({ min: -5, max: 2 ** 33 }), { maxLength: 20 })),
      blockSize: fc.constantFrom(BS, BS, 1, 16, 0), loraId: fc.constant(null), medium: fc.constantFrom(null, 'GPU', 'cpu', 'DISK', ''), loraName: fc.option(fc.constantFrom('ad', ''), { nil: null }),
      extraKeys: fc.option(fc.array(extraKeyArb, { maxLength: 4 }), { nil: null }), groupIdx: fc.option(fc.integer({ min: 0, max: 2 }), { nil: null }),
      kvCacheSpecKind: fc.constant(null), kvCacheSpecSlidingWindow: fc.constant(null),
    }),
    fc.record({ type: fc.constant('BlockRemoved' as const), blockHashes: fc.array(nearHash, { maxLength: 4 }), medium: fc.constantFrom(null, 'GPU', 'CPU'), groupIdx: fc.option(fc.integer({ min: 0, max: 1 }), { nil: null }) }),
    fc.constant({ type: 'AllBlocksCleared' as const }),
  );
  const payloadArb = fc.oneof(
    fc.tuple(fc.array(nearEvent, { maxLength: 5 }), formatArb, optsArb).map(([events, f, o]) => encodeBatch({ ts: 1, events, dataParallelRank: 0 }, f, o)),
    fc.tuple(batchArb, formatArb, optsArb, fc.array(mutationArb, { minLength: 1, maxLength: 3 })).map(([b, f, o, ms]) => mutate(encodeBatch(b, f, o), ms)),
  );
  fc.assert(fc.property(fc.array(payloadArb, { minLength: 1, maxLength: 8 }), (payloads) => {
    const region = new Region(createRegion(small));
    const w = new PrefixIndexWriter(region);
    const hasher = new BlockHasher(region);
    const fuzzed = new EventApplier(w, hasher, 2, 'm', { blockSize: BS, maxMappedBlocks: 64 });
    const other = new EventApplier(w, hasher, 3, 'm', { blockSize: BS, maxMappedBlocks: 64 });
    const gw = new BlockHasher(region);
    const keysOf = (tokens: number[]) => gw.hash(tokens, BS, gw.rootSeed('m', null, null));
    // Another backend holds a chain of its own; the fuzzed one starts with one too.
    const otherTokens = range(1000, 3 * BS);
    other.apply(storedChain([7001n, 7002n, 7003n], otherTokens), 1);
    fuzzed.apply(storedChain([1n, 2n], range(10, 2 * BS)), 1);
    let applied = 1; // the chain above
    for (const p of payloads) {
      const d = decodeChecked(p);
      if (d === null) continue;
      fuzzed.apply(d, 2); // must not throw
      applied += d.events.length;
    }
    assert.equal(fuzzed.stats.events, applied, 'every event is counted once');
    for (const [k, v] of Object.entries(fuzzed.stats)) assert.ok(Number.isInteger(v) && v >= 0, `stat ${k} = ${v}`);
    assert.ok(fuzzed.mapped().blocks <= 64, 'the map keeps its bound');
    // The other backend's chain is whole; a clear leaves nothing of the fuzzed backend; a fresh chain is found again.
    w.longestPrefix(keysOf(otherTokens));
    assert.equal(w.counts[3], 3, 'the other backend keeps its 3 blocks');
    fuzzed.clear();
    assert.equal(fuzzed.mapped().blocks, 0);
    const again = range(500, 3 * BS);
    w.longestPrefix(keysOf(range(10, 2 * BS)));
    assert.equal(w.counts[2], 0, 'nothing of the fuzzed backend is left after a clear');
    fuzzed.apply(storedChain([801n, 802n, 803n], again), 3);
    w.longestPrefix(keysOf(again));
    assert.equal(w.counts[2], 3, 'a chain stored after the clear is found whole');
  }), { numRuns: 400 });
});
