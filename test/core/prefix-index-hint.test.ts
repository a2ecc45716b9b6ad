import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createAndAttach } from '../../src/core/region.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';

// ixLongestPrefixFrom and the loss epochs: a walk told that a pod holds a prompt's first blocks equals the whole
// walk whenever the pod's loss epoch has not moved since the walk that found it.
const CAPACITY = 48;
const region = createAndAttach({ prefixIndexKeys: 1 << 16, scratchSlots: 4, scratchBytes: 1 << 16 });
const area = region.claimScratch();
const keysPtr = area.ptr + 4096;

/** `pods`: the pod rows the index is laid out for (the region's own 256 unless a test asks for more groups). */
function freshIndex (capacity: number, pods = 256): PrefixIndexWriter {
  const base = region.base('TABLE_PREFIX_INDEX');
  const bytes = region.fn<(c: number, pods: number) => number>('ixBytes')(capacity, pods) >>> 0;
  region.u8.fill(0, base, base + bytes);
  region.fn<(b: number, c: number, pods: number) => void>('ixInit')(base, capacity, pods);
  return new PrefixIndexWriter(region, { ptr: area.ptr, bytes: 4096 });
}

function putKeys (keys: bigint[]): { ptr: number; count: number } {
  region.u64.set(keys, keysPtr >>> 3);
  return { ptr: keysPtr, count: keys.length };
}

const chain = (n: number, from = 1): bigint[] => Array.from({ length: n }, (_, i) => BigInt(1000 + from + i));

/** Pods A and B on an index of `rows` rows (in one group, or in two groups of 256 past 256 rows). */
function hintedWalk (rows: number, A: number, B: number): void {
  const ix = freshIndex(CAPACITY, rows);
  const keys = chain(40);
  for (let i = 0; i < 30; i++) ix.insert(keys[i], A, ix.kind.assumed, 1);
  for (let i = 0; i < 10; i++) ix.insert(keys[i], B, ix.kind.confirmed, 1);
  const span = putKeys(keys);
  const depth = ix.longestPrefix(span);
  const whole = ix.counts.slice();
  assert.deepEqual([depth, whole[A], whole[B]], [30, 30, 10]);
  for (const from of [0, 1, 10, 20, 30]) {
    assert.equal(ix.longestPrefixFrom(span, ix.mask.all, A, from), 30);
    assert.deepEqual(ix.counts.slice(), whole, `hint from ${from}`);
  }
  // Past the hint the walk goes on looking: A's new blocks are found.
  for (let i = 30; i < 35; i++) ix.insert(keys[i], A, ix.kind.assumed, 2);
  assert.equal(ix.longestPrefixFrom(span, ix.mask.all, A, 30), 35);
  assert.equal(ix.counts[A], 35);
  assert.equal(ix.counts[B], 10);
}

test('a hinted walk skips the hinted pod\'s known blocks and gives the whole walk\'s counts, other pods included', () => {
  hintedWalk(256, 3, 200);
});

test('the same on 600 rows, the hinted pod and the other in different groups of 256, either way round', () => {
  hintedWalk(600, 300, 599);
  hintedWalk(600, 599, 3);
  hintedWalk(600, 256, 257);
});

test('loss epochs move after every way a pod loses a block: remove, clearPod, clearPods, expiry, CLOCK eviction', () => {
  const ix = freshIndex(8);
  const keys = chain(8);
  const e = (pod: number): number => ix.lossEpoch(pod);
  for (const k of keys) ix.insert(k, 1, ix.kind.assumed, 100);
  ix.insert(keys[0], 2, ix.kind.confirmed, 100);
  const base = [e(1), e(2), e(3)];
  ix.insert(keys[1], 1, ix.kind.assumed, 100);
  assert.deepEqual([e(1), e(2), e(3)], base, 'inserts lose nothing');
  assert.equal(ix.remove(keys[7], 3, ix.mask.all), 0);
  assert.equal(e(3), base[2], 'a pod that was not there lost nothing');
  ix.remove(keys[7], 1, ix.mask.all);
  assert.equal(e(1), base[0] + 1, 'remove');
  ix.clearPod(2, ix.mask.all);
  assert.ok(e(2) > base[1], 'clearPod');
  const mid = [e(1), e(2)];
  ix.clearPods([1, 2], ix.mask.all);
  assert.ok(e(1) > mid[0] && e(2) > mid[1], 'clearPods');
  for (const k of keys) ix.insert(k, 4, ix.kind.assumed, 100);
  const before = e(4);
  ix.expireAssumed(100 + 50, 50, 1 << 10);
  assert.ok(e(4) > before, 'expiry');
  assert.equal(ix.assumedTtlMs(), 50, 'the writer\'s TTL is published for readers');
  // At capacity (8 keys) a new key evicts one by CLOCK.
  for (const k of keys) ix.insert(k, 5, ix.kind.assumed, 200);
  const e5 = e(5);
  ix.insert(99n, 6, ix.kind.assumed, 201);
  assert.equal(ix.stats().evictions, 1);
  assert.equal(e(5), e5 + 1, 'CLOCK eviction');
});

/** `pods` of an index of `rows` rows take random writes and walks; a hint is taken while its epoch stands. */
function hintsUnderRandomWrites (rows: number, pods: number[]): void {
  const keys = chain(24);
  type Op = { op: 'insert'; k: number; pod: number; kind: number } | { op: 'remove'; k: number; pod: number } |
    { op: 'clear'; pod: number } | { op: 'expire'; dt: number } | { op: 'walk'; n: number } | { op: 'record'; n: number; pod: number };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    { weight: 8, arbitrary: fc.record({ op: fc.constant('insert' as const), k: fc.nat(23), pod: fc.constantFrom(...pods), kind: fc.integer({ min: 0, max: 2 }) }) },
    { weight: 2, arbitrary: fc.record({ op: fc.constant('remove' as const), k: fc.nat(23), pod: fc.constantFrom(...pods) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('clear' as const), pod: fc.constantFrom(...pods) }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('expire' as const), dt: fc.nat(100) }) },
    // A routing decision's record: a prompt's first blocks, assumed on one pod.
    { weight: 4, arbitrary: fc.record({ op: fc.constant('record' as const), n: fc.integer({ min: 1, max: 24 }), pod: fc.constantFrom(...pods) }) },
    { weight: 4, arbitrary: fc.record({ op: fc.constant('walk' as const), n: fc.integer({ min: 1, max: 24 }) }) }
  );
  let taken = 0;
  let wrongAfterLoss = 0;
  fc.assert(fc.property(fc.array(opArb, { minLength: 60, maxLength: 200 }), fc.boolean(), (ops, prefill) => {
    const ix = freshIndex(CAPACITY, rows);
    let now = 1000;
    if (prefill) for (let i = 0; i < 20; i++) ix.insert(keys[i], 0, ix.kind.assumed, now);
    let hint: { pod: number; count: number; epoch: number } | null = null;
    for (const o of ops) {
      if (o.op === 'insert') ix.insert(keys[o.k], o.pod, o.kind, now);
      else if (o.op === 'remove') ix.remove(keys[o.k], o.pod, ix.mask.all);
      else if (o.op === 'clear') ix.clearPod(o.pod, ix.mask.all);
      else if (o.op === 'record') ix.insertMany(putKeys(keys.slice(0, o.n)), o.pod, ix.kind.assumed, now);
      else if (o.op === 'expire') { now += o.dt; ix.expireAssumed(now, 60, 64); }
      else {
        const span = putKeys(keys.slice(0, o.n));
        const epochs = pods.map((p) => ix.lossEpoch(p));
        ix.longestPrefix(span);
        const whole = ix.counts.slice();
        if (hint !== null && hint.count <= o.n && ix.lossEpoch(hint.pod) === hint.epoch) {
          taken++;
          ix.longestPrefixFrom(span, ix.mask.all, hint.pod, hint.count);
          assert.deepEqual(ix.counts.slice(), whole);
        } else if (hint !== null && hint.count <= o.n) {
          // The pod lost blocks since: the hint may be wrong now, which is why it is refused.
          ix.longestPrefixFrom(span, ix.mask.all, hint.pod, hint.count);
          if (ix.counts[hint.pod] !== whole[hint.pod]) wrongAfterLoss++;
        }
        // The next hint: the pod holding most, with its epoch as read before the walk.
        let best = 0;
        for (let i = 1; i < pods.length; i++) if (whole[pods[i]] > whole[pods[best]]) best = i;
        hint = whole[pods[best]] > 0 ? { pod: pods[best], count: whole[pods[best]], epoch: epochs[best] } : null;
      }
    }
  }), { numRuns: 300 });
  assert.ok(taken > 100, `hints were taken (${taken})`);
  assert.ok(wrongAfterLoss > 0, 'a hint kept past a loss would have been wrong');
}

test('random writes: a hint found by a walk stays exact while the pod\'s loss epoch stands, and is refused once it moves', () => {
  hintsUnderRandomWrites(256, [0, 1, 64, 255]);
});

test('the same on 600 rows, the pods in three groups of 256 (loss epochs and hints past the first group)', () => {
  hintsUnderRandomWrites(600, [0, 255, 256, 300, 599]);
});
