// Properties of the decoder over generated input: valid batches in every layout round-trip; random bytes and
// mutated valid payloads either decode to well-typed events or throw KvDecodeError, never anything else.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { encode as msgpackEncode } from '@msgpack/msgpack';
import { decodeBatch, encodeBatch, digestToU64, KvDecodeError, type DecodedBatch, type EncodeOptions } from '../../src/kvevents/codec.js';
import type { KvEvent, KvEventBatch, KvWireFormat, WireHash } from '../../src/kvevents/types.js';

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
