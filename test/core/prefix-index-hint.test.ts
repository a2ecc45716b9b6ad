import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createAndAttach } from '../../src/core/region.js';
import { PrefixIndex, PrefixIndexWriter } from '../../src/core/prefix-index.js';

// ixLongestPrefixFrom, the loss epochs and the loss rings: a walk told that a pod holds a prompt's first blocks
// equals the whole walk whenever the pod's loss epoch has not moved since the walk that found it, or for as many
// blocks as the pod's loss ring then vouches for (heldSince).
const CAPACITY = 48;
const region = createAndAttach({ prefixIndexKeys: 1 << 16, scratchSlots: 4, scratchBytes: 1 << 18 });
const area = region.claimScratch();
/** The writer's area: its fixed part and heldSince's set for every loss a ring keeps (64 KiB at 256 rows). */
const AREA_BYTES = 1 << 17;
const keysPtr = area.ptr + AREA_BYTES;

/** `pods`: the pod rows the index is laid out for (the region's own 256 unless a test asks for more groups). */
function freshIndex (capacity: number, pods = 256): PrefixIndexWriter {
  const base = region.base('TABLE_PREFIX_INDEX');
  const bytes = region.fn<(c: number, pods: number) => number>('ixBytes')(capacity, pods) >>> 0;
  region.u8.fill(0, base, base + bytes);
  region.fn<(b: number, c: number, pods: number) => void>('ixInit')(base, capacity, pods);
  assert.ok(PrefixIndex.areaBytes(region) + PrefixIndex.heldSetBytes(region) <= AREA_BYTES);
  return new PrefixIndexWriter(region, { ptr: area.ptr, bytes: AREA_BYTES });
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

test('two hinted pods (a moved session\'s old host and new): blocks both hold are skipped, counts are the whole walk\'s', () => {
  const [A, B, C] = [3, 70, 200];
  const ix = freshIndex(CAPACITY);
  const keys = chain(40);
  for (let i = 0; i < 30; i++) ix.insert(keys[i], A, ix.kind.assumed, 1);
  for (let i = 0; i < 20; i++) ix.insert(keys[i], B, ix.kind.confirmed, 1);
  for (let i = 0; i < 4; i++) ix.insert(keys[i], C, ix.kind.assumed, 1);
  const span = putKeys(keys);
  ix.longestPrefix(span);
  const whole = ix.counts.slice();
  assert.deepEqual([whole[A], whole[B], whole[C]], [30, 20, 4]);
  for (const [fa, fb] of [[30, 20], [0, 20], [30, 0], [10, 20], [30, 5], [29, 19], [1, 1]]) {
    assert.equal(ix.longestPrefixFrom(span, ix.mask.all, A, fa, undefined, B, fb), 30);
    assert.deepEqual(ix.counts.slice(), whole, `A from ${fa}, B from ${fb}`);
    // Either order.
    assert.equal(ix.longestPrefixFrom(span, ix.mask.all, B, fb, undefined, A, fa), 30);
    assert.deepEqual(ix.counts.slice(), whole, `B from ${fb}, A from ${fa}`);
  }
  // The same pod twice is one hint.
  ix.longestPrefixFrom(span, ix.mask.all, A, 30, undefined, A, 30);
  assert.deepEqual(ix.counts.slice(), whole);
  // A hint on a pod that holds more than it says: found by looking past it.
  ix.longestPrefixFrom(span, ix.mask.all, A, 12, undefined, B, 12);
  assert.deepEqual(ix.counts.slice(), whole);
  // The second hint is taken, not merely harmless: one that claims more than B holds is believed while only A and B
  // match (after C's 4 blocks), and B is counted to it (the router takes a hint only where it is true).
  ix.longestPrefixFrom(span, ix.mask.all, A, 30, undefined, B, 25);
  assert.deepEqual([ix.counts[A], ix.counts[B], ix.counts[C]], [30, 25, 4]);
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
  let taken2 = 0;
  let wrongAfterLoss = 0;
  let heldTaken = 0;
  fc.assert(fc.property(fc.array(opArb, { minLength: 60, maxLength: 200 }), fc.boolean(), (ops, prefill) => {
    const ix = freshIndex(CAPACITY, rows);
    let now = 1000;
    if (prefill) for (let i = 0; i < 20; i++) ix.insert(keys[i], 0, ix.kind.assumed, now);
    let hint: { pod: number; count: number; epoch: number } | null = null;
    // The pod holding most after it (a moved session's other host), a second hint.
    let hint2: { pod: number; count: number; epoch: number } | null = null;
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
          // The pod lost blocks since: the whole hint may be wrong now, which is why it is refused...
          ix.longestPrefixFrom(span, ix.mask.all, hint.pod, hint.count);
          if (ix.counts[hint.pod] !== whole[hint.pod]) wrongAfterLoss++;
          // ...but as far as its loss ring vouches for it, it is exact.
          const held = ix.heldSince(span, hint.pod, hint.count, hint.epoch);
          assert.ok(held <= hint.count);
          if (held > 0) heldTaken++;
          ix.longestPrefixFrom(span, ix.mask.all, hint.pod, held);
          assert.deepEqual(ix.counts.slice(), whole, `held ${held} of ${hint.count}`);
        }
        if (hint2 !== null && hint2.count <= o.n && ix.lossEpoch(hint2.pod) === hint2.epoch) {
          // With the first hint where it stands, else alone.
          const first: boolean = hint !== null && hint.count <= o.n && ix.lossEpoch(hint.pod) === hint.epoch;
          taken2++;
          ix.longestPrefixFrom(span, ix.mask.all, first ? hint!.pod : ix.maxPods, first ? hint!.count : 0, undefined, hint2.pod, hint2.count);
          assert.deepEqual(ix.counts.slice(), whole, `second hint ${hint2.pod} from ${hint2.count}${first ? ` beside ${hint!.pod} from ${hint!.count}` : ''}`);
        }
        // The next hints: the pod holding most, and the one after it, with their epochs as read before the walk.
        let best = 0;
        for (let i = 1; i < pods.length; i++) if (whole[pods[i]] > whole[pods[best]]) best = i;
        hint = whole[pods[best]] > 0 ? { pod: pods[best], count: whole[pods[best]], epoch: epochs[best] } : null;
        let next = -1;
        for (let i = 0; i < pods.length; i++) if (i !== best && whole[pods[i]] > 0 && (next < 0 || whole[pods[i]] > whole[pods[next]])) next = i;
        hint2 = next >= 0 ? { pod: pods[next], count: whole[pods[next]], epoch: epochs[next] } : null;
      }
    }
  }), { numRuns: 300 });
  assert.ok(taken > 100, `hints were taken (${taken})`);
  assert.ok(taken2 > 50, `second hints were taken (${taken2})`);
  assert.ok(wrongAfterLoss > 0, 'a hint kept past a loss would have been wrong');
  assert.ok(heldTaken > 50, `hints were taken past losses, as far as the rings vouched (${heldTaken})`);
}

test('random writes: a hint found by a walk stays exact while the pod\'s loss epoch stands, and up to its first lost block after', () => {
  hintsUnderRandomWrites(256, [0, 1, 64, 255]);
});

test('the same on 600 rows, the pods in three groups of 256 (loss epochs and hints past the first group)', () => {
  hintsUnderRandomWrites(600, [0, 255, 256, 300, 599]);
});

test('heldSince: up to the first of the prompt\'s blocks the pod lost since, whichever way; others\' losses do not count', () => {
  const A = 3;
  const B = 7;
  const ix = freshIndex(256);
  const keys = chain(40);
  const others = Array.from({ length: 20 }, (_, i) => BigInt(90_000 + i));
  for (let i = 0; i < 30; i++) ix.insert(keys[i], A, ix.kind.assumed, 200);
  for (const k of others) ix.insert(k, A, ix.kind.assumed, 200);
  for (let i = 0; i < 10; i++) ix.insert(keys[i], B, ix.kind.confirmed, 200);
  const span = putKeys(keys);
  const e0 = ix.lossEpoch(A);
  assert.equal(ix.heldSince(span, A, 30, e0), 30, 'nothing lost');
  ix.remove(others[0], A, ix.mask.all);
  assert.notEqual(ix.lossEpoch(A), e0);
  assert.equal(ix.heldSince(span, A, 30, e0), 30, 'a block of another prompt');
  ix.remove(keys[20], A, ix.mask.all);
  assert.equal(ix.heldSince(span, A, 30, e0), 20, 'block 20');
  assert.equal(ix.heldSince(span, A, 15, e0), 15, 'a prefix short of it');
  ix.remove(keys[3], B, ix.mask.all);
  assert.equal(ix.heldSince(span, A, 30, e0), 20, 'another pod\'s loss');
  ix.insert(keys[20], A, ix.kind.assumed, 200);
  assert.equal(ix.heldSince(span, A, 30, e0), 20, 'held again, but lost since: counted lost');
  const e1 = ix.lossEpoch(A);
  assert.equal(ix.heldSince(span, A, 30, e1), 30, 'from a later epoch');
  ix.remove(keys[25], A, ix.mask.confirmed);
  assert.equal(ix.heldSince(span, A, 30, e1), 30, 'a kind the pod did not hold it in: no loss');
  ix.remove(keys[25], A, ix.mask.assumed);
  assert.equal(ix.heldSince(span, A, 30, e1), 25);
  ix.clearPod(A, ix.mask.all);
  assert.equal(ix.heldSince(span, A, 30, e1), 0, 'clearPod has no list of what it cleared');
});

test('heldSince after expiry, CLOCK eviction and a void', () => {
  const A = 1;
  const keys = chain(30);
  const span = putKeys(keys);
  // Expiry: blocks 12..29 were recorded at 100, blocks 0..11 at 300; a sweep at 400 with a 200 ms TTL expires the first.
  let ix = freshIndex(256);
  for (let i = 12; i < 30; i++) ix.insert(keys[i], A, ix.kind.assumed, 100);
  for (let i = 0; i < 12; i++) ix.insert(keys[i], A, ix.kind.assumed, 300);
  let e = ix.lossEpoch(A);
  ix.expireAssumed(400, 200, 1 << 12);
  assert.equal(ix.heldSince(span, A, 30, e), 12);
  // CLOCK: a full index evicts with each new key.
  ix = freshIndex(30);
  for (const k of keys) ix.insert(k, A, ix.kind.assumed, 100);
  e = ix.lossEpoch(A);
  ix.insert(12345n, 2, ix.kind.assumed, 101);
  assert.equal(ix.stats().evictions, 1);
  const evicted = keys.findIndex((k) => ix.lookup(k) === null);
  assert.ok(evicted >= 0);
  assert.equal(ix.heldSince(span, A, 30, e), evicted);
  // A void (an engine's AllBlocksCleared) names no block: nothing is vouched for.
  ix = freshIndex(256);
  for (const k of keys) ix.insert(k, A, ix.kind.assumed, 100);
  e = ix.lossEpoch(A);
  ix.voidAssumed(A, 150);
  assert.equal(ix.heldSince(span, A, 30, e), 0);
});

test('heldSince follows as many losses as the pod\'s ring keeps, less one, and as its set holds', () => {
  const A = 2;
  const ring = region.u32[(region.base('TABLE_PREFIX_INDEX') + region.const('IX_H_RING')) >>> 2];
  assert.equal(ring, 4096, 'a region of 256 rows: 4,096 losses a row');
  const ix = freshIndex(ring + 64);
  const keys = chain(30);
  const span = putKeys(keys);
  for (const k of keys) ix.insert(k, A, ix.kind.assumed, 100);
  const e = ix.lossEpoch(A);
  for (let i = 0; i < ring - 1; i++) {
    ix.insert(BigInt(500_000 + i), A, ix.kind.assumed, 100);
    ix.remove(BigInt(500_000 + i), A, ix.mask.all);
  }
  assert.equal(ix.lossEpoch(A) - e, ring - 1);
  assert.equal(ix.heldSince(span, A, 30, e), 30, 'every loss since is in the ring, none of this prompt\'s');
  // A reader whose area holds a set of 32 slots follows 16 losses.
  const small = new PrefixIndex(region, { ptr: area.ptr + AREA_BYTES + 4096, bytes: PrefixIndex.areaBytes(region) + 256 });
  assert.equal(small.heldSince(span, A, 30, ix.lossEpoch(A) - 16), 30);
  assert.equal(small.heldSince(span, A, 30, ix.lossEpoch(A) - 17), 0);
  ix.insert(1n, A, ix.kind.assumed, 100);
  ix.remove(1n, A, ix.mask.all);
  assert.equal(ix.heldSince(span, A, 30, e), 0, 'the ring has come round: it cannot tell');
});
