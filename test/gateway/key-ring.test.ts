// The data-plane threads' key ring (asm/key-ring.ts, src/gateway/key-ring.ts): what the writer puts the reader
// takes back exactly, in message order, across many laps (keys kept contiguous at the wrap); at the bound a put
// is refused and counted (its keys then travel by message) and room comes back as the reader takes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { KeyRingReader, KeyRingWriter, TAKE_CHUNK_KEYS, type KeysAt } from '../../src/gateway/key-ring.js';
import { smallRegion } from '../core/fixtures/small-region.js';

const HEADER = 192;

function ring (slots: number) {
  const { region } = smallRegion();
  const area = region.claimScratch();
  assert.equal(region.const('KR_HEADER_BYTES'), HEADER);
  const writer = new KeyRingWriter(region, area.ptr, HEADER + 8 * slots);
  return { writer, reader: new KeyRingReader(region, area.ptr), capacity: region.fn<(b: number) => number>('keyRingCapacity')(HEADER + 8 * slots) };
}

const keysOf = (n: number, seed: number): BigUint64Array => BigUint64Array.from({ length: n }, (_, i) => (BigInt(seed) << 32n) ^ BigInt(i) ^ 0xfedcba9876543210n);

test('capacity is the largest power of two that fits after the header', () => {
  assert.equal(ring(16).capacity, 16);
  assert.equal(ring(23).capacity, 16);
  assert.equal(ring(1).capacity, 1);
});

test('every put is taken back exactly, in order, across many laps of the ring', () => {
  fc.assert(fc.property(fc.array(fc.record({ n: fc.nat(16), takeAfter: fc.boolean() }), { minLength: 1, maxLength: 200 }), (steps) => {
    const { writer, reader } = ring(16);
    const outstanding: Array<{ at: KeysAt; keys: BigUint64Array }> = [];
    let spills = 0;
    steps.forEach((s, i) => {
      const keys = keysOf(s.n, i);
      const at = writer.put(keys);
      if (at === null) spills++;
      else outstanding.push({ at, keys });
      // The reader takes in message order; with nothing outstanding every put of ≤ capacity keys fits.
      if (s.takeAfter || at === null) {
        while (outstanding.length > 0) {
          const o = outstanding.shift()!;
          assert.deepEqual(reader.take(o.at), o.keys);
        }
        const again = writer.put(keys);
        assert.ok(again !== null, 'an empty ring takes any put it can hold');
        assert.deepEqual(reader.take(again), keys);
      }
    });
    assert.equal(writer.spilled, spills);
  }));
});

test('a full ring refuses the put and counts it; more keys than the ring holds never fit', () => {
  const { writer, reader } = ring(8);
  const a = writer.put(keysOf(5, 1))!;
  assert.equal(writer.put(keysOf(4, 2)), null, '5 + 4 > 8: refused');
  const b = writer.put(keysOf(3, 3))!;
  assert.deepEqual(reader.take(a), keysOf(5, 1));
  // 4 more would run past the end: they skip to the start, where the first 5 are free again.
  const c = writer.put(keysOf(4, 4))!;
  assert.equal(c.at % 8, 0);
  assert.deepEqual(reader.take(b), keysOf(3, 3));
  assert.deepEqual(reader.take(c), keysOf(4, 4));
  assert.equal(writer.put(keysOf(9, 5)), null);
  assert.equal(writer.spilled, 2);
  assert.deepEqual(writer.put(new BigUint64Array(0)), { at: c.at + 4, n: 0 });
});

test('taken keys stay as taken while later takes fill and start copy chunks (small sets share one, large get their own)', () => {
  const { region } = smallRegion();
  const area = region.claimScratch();
  const slots = Math.min(1 << 14, Math.floor((area.bytes - HEADER) / 8));
  const writer = new KeyRingWriter(region, area.ptr, HEADER + 8 * slots);
  const reader = new KeyRingReader(region, area.ptr);
  // Sizes around the quarter-chunk bound and enough in all to cross several chunks.
  const sizes = [1, 7, TAKE_CHUNK_KEYS / 4, TAKE_CHUNK_KEYS / 4 + 1, 300, 0, 1000, TAKE_CHUNK_KEYS / 4 - 1, 513, 2, 1024, 999];
  const kept: Array<{ taken: BigUint64Array; keys: BigUint64Array }> = [];
  for (let round = 0; round < 6; round++) {
    sizes.forEach((n, i) => {
      const keys = keysOf(n, round * 100 + i);
      const at = writer.put(keys);
      assert.ok(at !== null, `${n} keys fit an emptied ring`);
      const taken = reader.take(at);
      assert.equal(taken.length, n);
      kept.push({ taken, keys });
    });
  }
  for (const { taken, keys } of kept) assert.deepEqual(taken, keys);
  // A large set is an array of its own; small ones are views that share chunks.
  const large = kept.find((k) => k.keys.length === TAKE_CHUNK_KEYS / 4 + 1)!;
  assert.equal(large.taken.buffer.byteLength, large.taken.byteLength);
  assert.ok(kept.some((k) => k.keys.length === 300 && k.taken.buffer.byteLength === TAKE_CHUNK_KEYS * 8));
  // A quarter chunk exactly still goes in one.
  assert.ok(kept.some((k) => k.keys.length === TAKE_CHUNK_KEYS / 4 && k.taken.buffer.byteLength === TAKE_CHUNK_KEYS * 8));
});
