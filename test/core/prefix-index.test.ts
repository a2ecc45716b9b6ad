import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createAndAttach, type Region } from '../../src/core/region.js';
import { PrefixIndex, PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { PrefixIndexRef } from '../../src/core/reference/prefix-index.js';

// One region per file; each case gets a freshly zeroed and initialised index table inside it.
const CAPACITY = 48; // 64 slots: load up to 0.75, so clusters and backward shifts are common
const region = createAndAttach({ prefixIndexKeys: 1 << 16, scratchSlots: 4, scratchBytes: 1 << 16 });
const area = region.claimScratch();
const keysPtr = area.ptr + 4096;

/** `pods`: the pod rows the index is laid out for (the region's own 256 unless a test asks for more groups). */
function freshIndex (r: Region, capacity: number, pods = 256): PrefixIndexWriter {
  const base = r.base('TABLE_PREFIX_INDEX');
  const bytes = r.fn<(c: number, pods: number) => number>('ixBytes')(capacity, pods) >>> 0;
  r.u8.fill(0, base, base + bytes);
  r.fn<(b: number, c: number, pods: number) => void>('ixInit')(base, capacity, pods);
  return new PrefixIndexWriter(r, { ptr: area.ptr, bytes: 4096 });
}

function putKeys (keys: bigint[]): { ptr: number; count: number } {
  region.u64.set(keys, keysPtr >>> 3);
  return { ptr: keysPtr, count: keys.length };
}

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
/** Pods of an index of `rows` rows: the word and group edges, and any. */
const podsOf = (rows: number): fc.Arbitrary<number> => fc.oneof(
  fc.constantFrom(...[0, 1, 63, 64, 127, 128, 255, 256, 319, 511, 512, rows - 1].filter((p) => p < rows)), fc.integer({ min: 0, max: rows - 1 }));
const podArb = podsOf(256);

type Op =
  | { op: 'insert'; k: number; pod: number; kind: number; dt: number }
  | { op: 'remove'; k: number; pod: number; mask: number }
  | { op: 'clearPod'; pod: number; mask: number }
  | { op: 'clearPods'; pods: number[]; mask: number }
  | { op: 'expire'; ttl: number; dt: number }
  | { op: 'longest'; ks: number[]; mask: number; timed: boolean }
  | { op: 'insertMany'; ks: number[]; pod: number; kind: number; dt: number }
  | { op: 'removeMany'; ks: number[]; pod: number; mask: number };

const opArb = (nKeys: number, podArb = podsOf(256)): fc.Arbitrary<Op> => fc.oneof(
  { weight: 6, arbitrary: fc.record({ op: fc.constant('insert' as const), k: fc.nat(nKeys - 1), pod: podArb, kind: fc.integer({ min: 0, max: 2 }), dt: fc.nat(400) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('remove' as const), k: fc.nat(nKeys - 1), pod: podArb, mask: fc.integer({ min: 0, max: 7 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('clearPod' as const), pod: podArb, mask: fc.integer({ min: 0, max: 7 }) }) },
  // Several rows at once (duplicates allowed, as a set); the same pod pool as inserts, so keys lose several pods.
  { weight: 1, arbitrary: fc.record({ op: fc.constant('clearPods' as const), pods: fc.array(podArb, { maxLength: 12 }), mask: fc.integer({ min: 0, max: 7 }) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('expire' as const), ttl: fc.nat(3000), dt: fc.nat(2000) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('longest' as const), ks: fc.array(fc.nat(nKeys - 1), { maxLength: 20 }), mask: fc.integer({ min: 0, max: 7 }), timed: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('insertMany' as const), ks: fc.array(fc.nat(nKeys - 1), { maxLength: 20 }), pod: podArb, kind: fc.integer({ min: 0, max: 2 }), dt: fc.nat(400) }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('removeMany' as const), ks: fc.array(fc.nat(nKeys - 1), { maxLength: 20 }), pod: podArb, mask: fc.integer({ min: 0, max: 7 }) }) }
);

/**
 * Random op sequences on an index of `rows` pod rows stay below capacity (an entry is a block in one pod group,
 * so a pool of CAPACITY / groups keys fits whatever pods hold them) and leave it equal to the reference.
 */
function equalsReference (rows: number, numRuns: number): void {
  const groups = Math.ceil(rows / 256);
  const scenario = fc.record({
    // The pool may hold 0 (aliases 1, as in the kernel) and more keys than fit: a prefix of it stays below capacity.
    pool: fc.uniqueArray(fc.oneof(u64, fc.constantFrom(0n, 1n, 2n)), { minLength: 1, maxLength: Math.floor(CAPACITY / groups) }),
    start: fc.oneof(fc.constant(0), fc.constant(2 ** 32 - 3000), fc.nat(2 ** 32 - 1)),
    ops: fc.array(opArb(CAPACITY, podsOf(rows)), { maxLength: 250 })
  });
  fc.assert(fc.property(scenario, ({ pool, start, ops }) => {
    const ix = freshIndex(region, CAPACITY, rows);
    const ref = new PrefixIndexRef(CAPACITY, rows);
    const slots = ix.stats().slots;
    const refCounts = new Uint32Array(rows);
    let now = start;
    for (const o of ops) {
      switch (o.op) {
        case 'insert': {
          now += o.dt;
          const key = pool[o.k % pool.length];
          assert.equal(ix.insert(key, o.pod, o.kind, now) ? 1 : 0, ref.insert(key, o.pod, o.kind, now), 'insert');
          break;
        }
        case 'remove': {
          const key = pool[o.k % pool.length];
          assert.equal(ix.remove(key, o.pod, o.mask), ref.remove(key, o.pod, o.mask), 'remove');
          break;
        }
        case 'clearPod':
          assert.equal(ix.clearPod(o.pod, o.mask), ref.clearPod(o.pod, o.mask), 'clearPod');
          break;
        case 'clearPods':
          assert.equal(ix.clearPods(o.pods, o.mask), ref.clearPods([...new Set(o.pods)], o.mask), 'clearPods');
          break;
        case 'expire':
          now += o.dt;
          assert.equal(ix.expireAssumed(now, o.ttl, slots), ref.expireAssumed(now, o.ttl), 'expire');
          break;
        case 'insertMany': {
          now += o.dt;
          const keys = o.ks.map((i) => pool[i % pool.length]);
          const want = keys.reduce((a, k) => a + ref.insert(k, o.pod, o.kind, now), 0);
          assert.equal(ix.insertMany(putKeys(keys), o.pod, o.kind, now), want, 'insertMany');
          break;
        }
        case 'removeMany': {
          const keys = o.ks.map((i) => pool[i % pool.length]);
          const want = keys.reduce((a, k) => a + (ref.remove(k, o.pod, o.mask) > 0 ? 1 : 0), 0);
          assert.equal(ix.removeMany(putKeys(keys), o.pod, o.mask), want, 'removeMany');
          break;
        }
        case 'longest': {
          const keys = o.ks.map((i) => pool[i % pool.length]);
          // timed: the walk applies the TTL of the last sweep at `now` (assumed presence it has not reached yet)
          const t = o.timed ? now : undefined;
          const depth = ix.longestPrefix(putKeys(keys), o.mask, t);
          assert.equal(depth, ref.longestPrefix(BigUint64Array.from(keys), o.mask, refCounts, t), 'depth');
          assert.deepEqual([...ix.counts], [...refCounts], 'counts');
          break;
        }
      }
    }
    for (const key of pool) {
      for (const mask of [1, 2, 4, 7]) {
        assert.deepEqual(ix.lookup(key, mask), ref.lookup(key, mask), `lookup ${key}`);
        assert.deepEqual(ix.lookup(key, mask, now), ref.lookup(key, mask, now), `lookup ${key} at ${now}`);
      }
    }
    const s = ix.stats();
    assert.deepEqual(
      [s.size, s.inserts, s.removes, s.evictions, s.expirations],
      [ref.size, ref.inserts, ref.removes, ref.evictions, ref.expirations]);
    assert.equal(s.size, s.inserts - s.removes - s.evictions - s.expirations);
    const p = ix.probeStats();
    assert.equal(p.junk, 0);
    assert.equal(p.occupied, s.size);
  }), { numRuns });
}

test('random op sequences below capacity: WASM index equals the reference (returns, lookups, counts, counters)', () => {
  equalsReference(256, 300);
});

test('with 600 pod rows (three groups, the last one partial) the WASM index still equals the reference', () => {
  equalsReference(600, 200);
});

test('longestPrefix counts each pod up to its first missing block and stops when no pod remains', () => {
  const ix = freshIndex(region, 1000);
  const chain = Array.from({ length: 10 }, (_, i) => BigInt(i + 100) * 0x9E3779B97F4A7C15n % (1n << 64n));
  chain.slice(0, 10).forEach((k) => ix.insert(k, 3, ix.kind.confirmed, 0));
  chain.slice(0, 4).forEach((k) => ix.insert(k, 200, ix.kind.assumed, 0));
  chain.slice(0, 6).forEach((k) => ix.insert(k, 64, ix.kind.offloaded, 0));
  ix.insert(chain[7], 9, ix.kind.confirmed, 0); // 9 holds block 7 but not block 0: matches nothing
  assert.equal(ix.longestPrefix(putKeys(chain), ix.mask.all), 10);
  assert.deepEqual([ix.counts[3], ix.counts[200], ix.counts[64], ix.counts[9]], [10, 4, 6, 0]);
  assert.equal(ix.longestPrefix(putKeys(chain), ix.mask.assumed | ix.mask.offloaded), 6);
  assert.deepEqual([ix.counts[3], ix.counts[200], ix.counts[64]], [0, 4, 6]);
  assert.equal(ix.longestPrefix(putKeys([]), ix.mask.all), 0);
  assert.equal(ix.counts.reduce((a, b) => a + b, 0), 0);
});

test('assumed presence expires incrementally: partial budgets from the cursor add up to a full sweep', () => {
  const ix = freshIndex(region, 2000);
  const ref = new PrefixIndexRef(2000);
  for (let i = 0; i < 1500; i++) {
    const key = BigInt(i + 1) * 0x2545F4914F6CDD1Dn % (1n << 64n);
    const kind = i % 3;
    ix.insert(key, i % 256, kind, i);
    ref.insert(key, i % 256, kind, i);
  }
  const slots = ix.stats().slots;
  let expired = 0;
  for (let done = 0; done < slots; done += 97) expired += ix.expireAssumed(5000, 4000, Math.min(97, slots - done));
  assert.equal(expired, ref.expireAssumed(5000, 4000));
  assert.ok(expired > 0);
  const s = ix.stats();
  assert.deepEqual([s.size, s.expirations], [ref.size, ref.expirations]);
  assert.equal(ix.expireAssumed(5000, 4000, slots), 0, 'nothing left to expire');
});

test('at capacity CLOCK evicts: size never exceeds capacity, evictions are counted, referenced keys survive', () => {
  const cap = 1000;
  const ix = freshIndex(region, cap);
  const hot = Array.from({ length: 20 }, (_, i) => BigInt(i + 1) << 40n);
  for (const k of hot) ix.insert(k, 1, ix.kind.confirmed, 0);
  for (let i = 0; i < 20000; i++) {
    // Touch every hot key before each new insert: its reference bit is set whenever the hand reaches it.
    for (const k of hot) ix.insert(k, 1, ix.kind.confirmed, i);
    ix.insert(BigInt(i + 1) * 0x9E3779B97F4A7C15n % (1n << 64n) | 1n, 2, ix.kind.assumed, i);
    if (i % 997 === 0) assert.ok(ix.stats().size <= cap);
  }
  const s = ix.stats();
  assert.equal(s.size, cap);
  assert.equal(s.inserts, 20 + 20000);
  assert.equal(s.evictions, s.inserts - cap);
  for (const k of hot) assert.deepEqual(ix.lookup(k), [1], 'a referenced key was evicted');
  assert.equal(ix.probeStats().junk, 0);
});

test('long insert/remove churn leaves the table as if built from the live keys alone (no tombstones)', () => {
  const cap = 3000;
  const ix = freshIndex(region, cap);
  const live = new Set<bigint>();
  let x = 12345n;
  const next = (): bigint => { x = (x * 6364136223846793005n + 1442695040888963407n) % (1n << 64n); return x; };
  const pool = Array.from({ length: 4000 }, next);
  for (let i = 0; i < 200000; i++) {
    const key = pool[Number(next() >> 52n) % pool.length];
    if (live.has(key)) { ix.remove(key, 5, ix.mask.all); live.delete(key); } else if (live.size < cap) { ix.insert(key, 5, 0, i); live.add(key); }
  }
  const churned = ix.probeStats();
  const fresh = freshIndex(region, cap);
  for (const key of live) fresh.insert(key, 5, 0, 0);
  const rebuilt = fresh.probeStats();
  assert.equal(churned.junk, 0);
  assert.equal(churned.occupied, live.size);
  // Linear probing's total displacement depends only on the set of keys: history left no trace.
  assert.equal(churned.sumProbe, rebuilt.sumProbe);
  assert.ok(churned.meanProbe < 4, `mean probe ${churned.meanProbe}`);
});

test('clearPods of many rows in one sweep of a full table leaves what one clearPod per row leaves', () => {
  // Load 0.75 with every key held by several pods in several kinds, clusters wrapping the table's end: the
  // sweep deletes most keys and shifts the survivors back, across the wrap too.
  const cap = 3000;
  const batched = freshIndex(region, cap);
  const ref = new PrefixIndexRef(cap);
  let x = 987654321n;
  const next = (): bigint => { x = (x * 6364136223846793005n + 1442695040888963407n) % (1n << 64n); return x; };
  const keys = Array.from({ length: cap }, next);
  const holders = (i: number): number[] => [i % 200, (i * 7 + 3) % 256, (i * 13 + 5) % 256].filter((p, j, a) => a.indexOf(p) === j);
  const fill = (ix: PrefixIndexWriter | PrefixIndexRef): void => {
    keys.forEach((k, i) => holders(i).forEach((p, j) => ix.insert(k, p, j % 3, i)));
  };
  fill(batched);
  fill(ref);
  const gone = Array.from({ length: 180 }, (_, i) => (i * 37) % 256);
  const changed = batched.clearPods(gone, batched.mask.all);
  assert.equal(changed, ref.clearPods([...new Set(gone)], 7));
  for (const k of keys) assert.deepEqual(batched.lookup(k), ref.lookup(k, 7), `lookup ${k}`);
  const a = batched.stats();
  assert.deepEqual([a.size, a.removes], [ref.size, ref.removes]);
  assert.ok(a.removes > cap / 4, `${a.removes} keys deleted`);
  const p = batched.probeStats();
  assert.equal(p.junk, 0);
  assert.equal(p.occupied, a.size);
  const after = keys.map((k) => batched.lookup(k));
  // The same rows one at a time, on the same table filled again.
  const single = freshIndex(region, cap);
  fill(single);
  for (const pod of new Set(gone)) single.clearPod(pod, single.mask.all);
  assert.deepEqual(keys.map((k) => single.lookup(k)), after);
  assert.equal(single.stats().removes, a.removes);
  assert.equal(single.probeStats().sumProbe, p.sumProbe, 'same keys, same displacement');
});

test('warm writes every page of the slots in slices and changes nothing the index holds', () => {
  const ix = freshIndex(region, 1 << 12);
  const keys = Array.from({ length: 500 }, (_, i) => BigInt(i + 1) * 0x9E3779B97F4A7C15n % (1n << 64n));
  ix.insertMany(putKeys(keys), 7, ix.kind.assumed, 1000);
  ix.insertMany(putKeys(keys.slice(0, 100)), 300 % 256, ix.kind.confirmed, 1000);
  const before = ix.probeStats();
  const slots = ix.stats().slots;
  let at = 0;
  let slices = 0;
  while (at < slots) {
    const next = ix.warm(at, 3); // 3 pages: 96 slots of 128 bytes
    assert.equal(next, Math.min(at + 96, slots));
    at = next;
    slices++;
  }
  assert.equal(slices, Math.ceil(slots / 96));
  assert.equal(ix.warm(slots, 8), slots, 'done: nothing more');
  assert.deepEqual(ix.probeStats(), before);
  assert.equal(ix.longestPrefix(putKeys(keys)), 500);
  assert.equal(ix.counts[7], 500);
  assert.equal(ix.counts[300 % 256], 100);
});

test('bad arguments are refused; key 0 is the same key as 1; one writer per index', () => {
  const ix = freshIndex(region, 100);
  assert.throws(() => ix.insert(5n, 256, 0, 0), /pod must be/);
  assert.throws(() => ix.insert(5n, -1, 0, 0), /pod must be/);
  assert.throws(() => ix.insert(5n, 1.5, 0, 0), /pod must be/);
  assert.throws(() => ix.insert(5n, 1, 3, 0), /kind out of range/);
  assert.throws(() => ix.expireAssumed(0, 2 ** 31, 10), /TTL/);
  assert.throws(() => ix.clearPods([3, 256], ix.mask.all), /pod must be/);
  assert.throws(() => ix.clearPods([-1], ix.mask.all), /pod must be/);
  assert.equal(ix.clearPods([], ix.mask.all), 0);
  assert.equal(ix.insert(0n, 7, 0, 0), true);
  assert.deepEqual(ix.lookup(1n), [7]);
  assert.equal(ix.lookup(2n), null);
  assert.equal(new PrefixIndex(region, { ptr: area.ptr + 8192, bytes: 4096 }).lookup(0n)?.[0], 7);
});
