import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encode as msgpackEncode } from '@msgpack/msgpack';
import { decodeBatch, encodeBatch, digestToU64, KvDecodeError, type EncodeOptions } from '../../src/kvevents/codec.js';
import type { BlockStored, KvEvent, KvEventBatch, KvWireFormat, WireHash } from '../../src/kvevents/types.js';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const unhex = (s: string): Uint8Array => new Uint8Array(Buffer.from(s, 'hex'));
const range = (a: number, b: number): number[] => Array.from({ length: b - a + 1 }, (_, i) => a + i);

function storedEvent (over: Partial<BlockStored<WireHash>>): BlockStored<WireHash> {
  return {
    type: 'BlockStored', blockHashes: [], parentBlockHash: null, tokenIds: [], blockSize: 16, loraId: null,
    medium: 'GPU', loraName: null, extraKeys: null, groupIdx: null, ...over,
  };
}

const exampleA: KvEventBatch<WireHash> = {
  ts: 1700000000.5,
  events: [
    storedEvent({ blockHashes: [1736447835066146335n, 42n], tokenIds: range(1, 8), blockSize: 4, extraKeys: [null, null], groupIdx: 0, kvCacheSpecKind: 'full_attention' }),
    { type: 'BlockRemoved', blockHashes: [42n], medium: 'GPU', groupIdx: null },
    { type: 'AllBlocksCleared' },
  ],
  dataParallelRank: 0,
};
const EXAMPLE_A_HEX = '93cb41d954fc40200000939cab426c6f636b53746f72656492cf18191a1b1c1d1e1f2ac098010203040506070804c0a3475055c092c0c000ae66756c6c5f617474656e74696f6ec094ac426c6f636b52656d6f766564912aa3475055c091b0416c6c426c6f636b73436c656172656400';
const LEGACY: KvWireFormat = { batchLayout: 'array', eventLayout: 'array', hashFormat: 'int' };
const CURRENT: KvWireFormat = { batchLayout: 'array', eventLayout: 'map', hashFormat: 'int' };

test('Example A (legacy arrays, 12-element BlockStored) encodes to the spec hex byte for byte and decodes back', () => {
  assert.equal(hex(encodeBatch(exampleA, LEGACY)), EXAMPLE_A_HEX);
  const d = decodeBatch(unhex(EXAMPLE_A_HEX));
  assert.equal(d.ts, 1700000000.5);
  assert.equal(d.dataParallelRank, 0);
  assert.equal(d.skippedEvents, 0);
  assert.deepEqual(d.events[0], { ...exampleA.events[0], kvCacheSpecSlidingWindow: null });
  assert.deepEqual(d.events[1], exampleA.events[1]);
  assert.deepEqual(d.events[2], { type: 'AllBlocksCleared' });
});

test('Example B (outer array, inner maps): omit_defaults drops only None-defaulted fields, keys in declaration order', () => {
  const b: KvEventBatch<WireHash> = {
    ts: 1700000000.5,
    events: [
      storedEvent({ blockHashes: [3236607068019569386n, 2758186210834249151n], tokenIds: range(1, 32), extraKeys: [null, null], groupIdx: 0, kvCacheSpecKind: 'full_attention' }),
      { type: 'BlockRemoved', blockHashes: [2758186210834249151n], medium: 'GPU', groupIdx: 0 },
    ],
    dataParallelRank: 0,
  };
  const bytes = encodeBatch(b, CURRENT);
  // The same value through a generic encoder, keys in msgspec's order: ts is fractional and every int fits the
  // same smallest form, so the bytes must be identical.
  const reference = msgpackEncode([1700000000.5, [
    { type: 'BlockStored', block_hashes: [3236607068019569386n, 2758186210834249151n], parent_block_hash: null, token_ids: range(1, 32), block_size: 16, lora_id: null, medium: 'GPU', lora_name: null, extra_keys: [null, null], group_idx: 0, kv_cache_spec_kind: 'full_attention' },
    { type: 'BlockRemoved', block_hashes: [2758186210834249151n], medium: 'GPU', group_idx: 0 },
  ], 0], { useBigInt64: true, forceFloat32: false });
  assert.equal(hex(bytes), hex(reference));
  const d = decodeBatch(bytes);
  assert.deepEqual(d.events[0], { ...b.events[0], kvCacheSpecSlidingWindow: null });
  assert.deepEqual(d.events[1], b.events[1]);
  // kv_cache_spec_sliding_window is None with a default: absent from the map.
  assert.ok(!Buffer.from(bytes).includes('kv_cache_spec_sliding_window'));
});

test('Example C (bytes hashes): bin of the full digest, decoded as its last 8 bytes big-endian', () => {
  const digest = new Uint8Array(32).map((_, i) => (i * 37 + 11) & 0xff);
  const c: KvEventBatch<WireHash> = {
    ts: 1700000001.0,
    events: [
      storedEvent({ blockHashes: [digest], tokenIds: range(1, 16), extraKeys: [['tenant-a']], groupIdx: 0, kvCacheSpecKind: 'full_attention' }),
      { type: 'AllBlocksCleared' },
    ],
    dataParallelRank: 0,
  };
  const bytes = encodeBatch(c, { ...CURRENT, hashFormat: 'bytes' });
  assert.ok(hex(bytes).includes('c420' + hex(digest)), 'the digest goes out as bin8 of 32 bytes');
  assert.equal(bytes[1], 0xcb, 'ts is float64 even when integral');
  const d = decodeBatch(bytes);
  const e = d.events[0] as BlockStored;
  assert.equal(e.blockHashes[0], digestToU64(digest));
  assert.equal(e.blockHashes[0], Buffer.from(digest.subarray(24)).readBigUInt64BE());
  assert.deepEqual(e.extraKeys, [['tenant-a']]);
  assert.deepEqual(d.events[1], { type: 'AllBlocksCleared' });
  // The int format of the same digest carries the same 64 bits.
  const asInt = decodeBatch(encodeBatch(c, CURRENT)).events[0] as BlockStored;
  assert.equal(asInt.blockHashes[0], e.blockHashes[0]);
});

test('ints take their smallest form; hashes of 2^63 and above go out as uint64 (0xcf)', () => {
  const one = (h: bigint): string => hex(encodeBatch({ ts: 0, events: [{ type: 'BlockRemoved', blockHashes: [h], medium: null, groupIdx: null }], dataParallelRank: null }, LEGACY, { batchLength: 2, blockRemovedLength: 2 }));
  assert.equal(one(5n), '92cb0000000000000000' + '91' + '92ac426c6f636b52656d6f766564' + '91' + '05');
  assert.ok(one(200n).endsWith('91' + 'cc' + 'c8'));
  assert.ok(one(70000n).endsWith('91' + 'ce' + '00011170'));
  assert.ok(one(1n << 63n).endsWith('91' + 'cf' + '8000000000000000'));
  assert.ok(one((1n << 64n) - 1n).endsWith('91' + 'cf' + 'ffffffffffffffff'));
  // An old `builtin` hash (negative int64) goes out as int64 and comes back as its two's complement.
  assert.ok(one(-(1n << 40n)).endsWith('91' + 'd3' + 'ffffff0000000000'));
  const back = decodeBatch(unhex(one(-5n))).events[0];
  assert.deepEqual(back, { type: 'BlockRemoved', blockHashes: [(1n << 64n) - 5n], medium: null, groupIdx: null });
  assert.throws(() => one(1n << 64n), RangeError);
});

test('older array lengths (version skew) decode with the missing trailing fields as null', () => {
  const full = storedEvent({
    blockHashes: [7n, 1n << 63n], parentBlockHash: 3n, tokenIds: range(1, 32), loraId: 2, loraName: 'ad', extraKeys: [['ad'], ['ad']],
    groupIdx: 1, kvCacheSpecKind: 'sliding_window', kvCacheSpecSlidingWindow: 4096,
  });
  const names: Array<keyof BlockStored> = ['loraId', 'medium', 'loraName', 'extraKeys', 'groupIdx', 'kvCacheSpecKind', 'kvCacheSpecSlidingWindow'];
  for (let len = 5; len <= 12; len++) {
    const bytes = encodeBatch({ ts: 1.25, events: [full], dataParallelRank: 3 }, LEGACY, { blockStoredLength: len });
    assert.equal(bytes[11], 0x90 | len, `array of ${len}`);
    const got = decodeBatch(bytes).events[0] as BlockStored;
    const want: Record<string, unknown> = { ...full };
    names.forEach((n, i) => { if (5 + i >= len) want[n] = null; });
    assert.deepEqual(got, want, `length ${len}`);
  }
  for (const [len, medium, groupIdx] of [[2, null, null], [3, 'CPU', null], [4, 'CPU', 2]] as const) {
    const bytes = encodeBatch({ ts: 1, events: [{ type: 'BlockRemoved', blockHashes: [9n], medium: 'CPU', groupIdx: 2 }], dataParallelRank: null }, LEGACY, { blockRemovedLength: len });
    assert.deepEqual(decodeBatch(bytes).events[0], { type: 'BlockRemoved', blockHashes: [9n], medium, groupIdx });
  }
  const noDp = decodeBatch(encodeBatch({ ts: 2, events: [], dataParallelRank: 5 }, LEGACY, { batchLength: 2 }));
  assert.deepEqual(noDp, { ts: 2, events: [], dataParallelRank: null, skippedEvents: 0 });
  assert.throws(() => encodeBatch(exampleA, LEGACY, { blockStoredLength: 4 }), RangeError);
});

test('map batch layout: data_parallel_rank omitted when null, SGLang attn_dp_rank accepted', () => {
  const fmt: KvWireFormat = { batchLayout: 'map', eventLayout: 'map', hashFormat: 'int' };
  assert.equal(decodeBatch(encodeBatch({ ...exampleA, dataParallelRank: 2 }, fmt)).dataParallelRank, 2);
  assert.equal(decodeBatch(encodeBatch({ ...exampleA, dataParallelRank: 2 }, fmt, { dpRankKey: 'attn_dp_rank' })).dataParallelRank, 2);
  const none = encodeBatch({ ...exampleA, dataParallelRank: null }, fmt);
  assert.equal(none[0], 0x82);
  assert.equal(decodeBatch(none).dataParallelRank, null);
});

test('SGLang shapes: 5-field BlockStored without medium, maps with cache_salt/session_id, attn_dp_rank', () => {
  const older = msgpackEncode([1.5, [['BlockStored', [11, 12], null, range(1, 2), 1, null], ['BlockRemoved', [11]], ['AllBlocksCleared']], 1]);
  const d1 = decodeBatch(older);
  assert.deepEqual(d1.events[0], {
    type: 'BlockStored', blockHashes: [11n, 12n], parentBlockHash: null, tokenIds: [1, 2], blockSize: 1, loraId: null, medium: null,
    loraName: null, extraKeys: null, groupIdx: null, kvCacheSpecKind: null, kvCacheSpecSlidingWindow: null,
  });
  assert.deepEqual(d1.events[1], { type: 'BlockRemoved', blockHashes: [11n], medium: null, groupIdx: null });
  const newer = msgpackEncode({
    ts: 2.5,
    events: [
      { type: 'BlockStored', block_hashes: [-7], parent_block_hash: 99, token_ids: range(1, 4), block_size: 4, lora_id: null, medium: 'GPU', cache_salt: 'tenant-b', session_id: 's-1' },
      { type: 'BlockRemoved', block_hashes: [-7], medium: 'GPU', session_id: 's-1' },
    ],
    attn_dp_rank: 3,
  });
  const d2 = decodeBatch(newer);
  assert.equal(d2.dataParallelRank, 3);
  const s = d2.events[0] as BlockStored;
  assert.equal(s.blockHashes[0], (1n << 64n) - 7n);
  assert.equal(s.parentBlockHash, 99n);
  assert.equal(s.medium, 'GPU');
  assert.equal(s.extraKeys, null);
  assert.deepEqual(d2.events[1], { type: 'BlockRemoved', blockHashes: [(1n << 64n) - 7n], medium: 'GPU', groupIdx: null });
});

test('the kthena capture shape (vLLM v0.26): uint64 hash above 2^63 in an inner map', () => {
  const capture = msgpackEncode([1789095808.8378847, [{
    type: 'BlockStored', block_hashes: [15760518052499183552n], parent_block_hash: null, token_ids: range(151630, 151645), block_size: 16,
    lora_id: null, medium: 'GPU', lora_name: null, extra_keys: [null], group_idx: 0, kv_cache_spec_kind: 'full_attention',
  }], 0], { useBigInt64: true });
  const e = decodeBatch(capture).events[0] as BlockStored;
  assert.equal(e.blockHashes[0], 15760518052499183552n);
  assert.deepEqual(e.extraKeys, [null]);
});

test('unknown event tags are skipped and counted; unknown fields are ignored', () => {
  const p = msgpackEncode([3, [['BlockStored', [1], null, [], 16, null, 'CPU', null, null, null, null, null, 'a-future-field'],
    ['BlockPinned', [1]], { type: 'SomethingNew', x: 1 }, { type: 'AllBlocksCleared', reason: 'reset' }], 0, 'extra']);
  const d = decodeBatch(p);
  assert.equal(d.skippedEvents, 2);
  assert.deepEqual(d.events.map((e) => e.type), ['BlockStored', 'AllBlocksCleared']);
  assert.deepEqual((d.events[0] as BlockStored).tokenIds, [], 'a tier-only store has no tokens');
});

test('malformed payloads throw KvDecodeError with its code', () => {
  const bad: unknown[] = [
    new Uint8Array(0), unhex('c1'), unhex('93cb41d954fc40200000'), msgpackEncode(5), msgpackEncode([1]), msgpackEncode([1, 2, 0]),
    msgpackEncode(['x', [], 0]), msgpackEncode({ events: [] }), msgpackEncode([1, [5], 0]), msgpackEncode([1, [[7, 1]], 0]),
    msgpackEncode([1, [['BlockStored', [1], null, [1]]], 0]), msgpackEncode([1, [['BlockStored', ['h'], null, [], 16]], 0]),
    msgpackEncode([1, [['BlockStored', [1], null, [1.5], 16]], 0]), msgpackEncode([1, [['BlockStored', [1], null, [], 16, null, 7]], 0]),
    msgpackEncode([1, [{ type: 'BlockStored', block_hashes: [1] }], 0]), msgpackEncode([1, [{ block_hashes: [1] }], 0]),
    msgpackEncode([1, [['BlockRemoved']], 0]), msgpackEncode([1, [['BlockStored', [1], null, [], 16, null, null, null, ['x']]], 0]),
    new Uint8Array([...msgpackEncode([1, [], 0]), 0]),
  ];
  for (const p of bad) {
    assert.throws(() => decodeBatch(p as Uint8Array), (err: unknown) => err instanceof KvDecodeError && err.code === 'EAR_ERR_KV_DECODE', hex(p as Uint8Array));
  }
});

// Exhaustive round trip over layouts × hash formats × array lengths with a mixed batch.
test('round trip encode → decode for every layout, hash format and array length', () => {
  const digest = new Uint8Array(32).map((_, i) => 255 - i);
  const events: Array<KvEvent<WireHash>> = [
    storedEvent({ blockHashes: [digest, 1n, (1n << 64n) - 1n], parentBlockHash: 0n, tokenIds: range(0, 47), loraId: 70000, loraName: 'x'.repeat(40), extraKeys: [['tenant', 3], null, [new Uint8Array([1, 2])]], groupIdx: 300, kvCacheSpecKind: 'full_attention', kvCacheSpecSlidingWindow: 128 }),
    { type: 'BlockRemoved', blockHashes: [digest], medium: 'CPU', groupIdx: 1 },
    { type: 'AllBlocksCleared' },
  ];
  const norm = (h: WireHash): bigint => (typeof h === 'bigint' ? h : digestToU64(h));
  for (const batchLayout of ['array', 'map'] as const) {
    for (const eventLayout of ['array', 'map'] as const) {
      for (const hashFormat of ['int', 'bytes'] as const) {
        const lengths: EncodeOptions[] = eventLayout === 'map' ? [{}] : [5, 6, 7, 8, 9, 10, 11, 12].map((n) => ({ blockStoredLength: n, blockRemovedLength: Math.min(4, Math.max(2, n - 6)) }));
        for (const opts of lengths) {
          const d = decodeBatch(encodeBatch({ ts: 1700000000.25, events, dataParallelRank: 1 }, { batchLayout, eventLayout, hashFormat }, opts));
          const label = JSON.stringify({ batchLayout, eventLayout, hashFormat, opts });
          assert.equal(d.ts, 1700000000.25, label);
          assert.equal(d.dataParallelRank, 1, label);
          const s = d.events[0] as BlockStored;
          assert.deepEqual(s.blockHashes, (events[0] as BlockStored<WireHash>).blockHashes.map(norm), label);
          assert.equal(s.parentBlockHash, 0n, label);
          assert.deepEqual(s.tokenIds, range(0, 47), label);
          const len = opts.blockStoredLength ?? 12;
          assert.equal(s.kvCacheSpecSlidingWindow, len >= 12 ? 128 : null, label);
          assert.equal(s.loraName, len >= 8 ? 'x'.repeat(40) : null, label);
          if (len >= 9) {
            const ek = s.extraKeys!;
            assert.deepEqual([ek[0], ek[1]], [['tenant', 3], null], label);
            assert.deepEqual([...(ek[2]![0] as Uint8Array)], [1, 2], label);
          }
          assert.deepEqual(d.events[1], { type: 'BlockRemoved', blockHashes: [digestToU64(digest)], medium: (opts.blockRemovedLength ?? 4) >= 3 ? 'CPU' : null, groupIdx: (opts.blockRemovedLength ?? 4) >= 4 ? 1 : null }, label);
          assert.deepEqual(d.events[2], { type: 'AllBlocksCleared' }, label);
        }
      }
    }
  }
});
