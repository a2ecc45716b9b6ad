// A thread of the prefix-index stress test: the one writer churning the index, or a reader checking every
// answer against what the keys can legally hold. Stops when the control word turns non-zero. The writer runs
// its durationMs and on until every thread has done the work the test asserts (a slow machine runs longer, it
// does not do less), or a minute at most.
import { workerData, parentPort } from 'node:worker_threads';
import { Region, type SharedRegion } from '../../src/core/region.js';
import { PrefixIndex, PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { churnKey, churnPods, ENOUGH, keyOf, stablePods, walkCounts, walkOf, type StressShape } from './prefix-index-stress-keys.js';

const { shared, shape, role, ctrlPtr, durationMs, seed } = workerData as {
  shared: SharedRegion; shape: StressShape; role: 'writer' | 'reader'; ctrlPtr: number; durationMs: number; seed: number;
};
const region = new Region(shared);
const stop = ctrlPtr >>> 2; // i32: the writer sets it when its time is up
const readersReady = stop + 1; // i32: readers count themselves in; the writer's clock starts at 3
const readersDone = stop + 2; // i32: readers that have done their share (ENOUGH)
const MAX_MS = 60_000;
const nStable = shape.chains * shape.chainLength;
let rng = seed >>> 0 || 1;
const rand = (n: number): number => { rng ^= rng << 13; rng ^= rng >>> 17; rng ^= rng << 5; return (rng >>> 0) % n; };
const stable = Array.from({ length: nStable }, (_, i) => keyOf(i));
const churn = Array.from({ length: shape.churnKeys }, (_, j) => churnKey(shape, j));

if (role === 'writer') {
  const ix = new PrefixIndexWriter(region);
  for (let i = 0; i < nStable; i++) for (const pod of stablePods(shape, i)) ix.insert(stable[i], pod, ix.kind.confirmed, 0);
  parentPort!.postMessage({ ready: true });
  for (let n; (n = Atomics.load(region.i32, readersReady)) < 3;) Atomics.wait(region.i32, readersReady, n, 1000);
  const t0 = Date.now();
  let ops = 0;
  const enough = (): boolean => {
    const s = ix.stats();
    return ops > ENOUGH.writerOps && s.removes + s.expirations > ENOUGH.churnDeletes && Atomics.load(region.i32, readersDone) >= 3;
  };
  for (let now = t0; now - t0 < durationMs || (now - t0 < MAX_MS && !enough()); now = Date.now()) {
    for (let n = 0; n < 1000; n++, ops++) {
      const j = rand(shape.churnKeys);
      const pod = 128 + (j % 64) + 64 * rand(2); // churnPods(j), without an allocation per op
      if (rand(100) < 55) ix.insert(churn[j], pod, rand(3), now);
      else ix.remove(churn[j], pod, ix.mask.all);
    }
    ix.expireAssumed(now, 20, 512);
    if (rand(50) === 0) ix.clearPod(128 + rand(128), ix.mask.all);
    // Rows released together: one sweep for several churn pods (its deletions move stable keys past readers too).
    if (rand(50) === 0) ix.clearPods([128 + rand(128), 128 + rand(128), 128 + rand(128), 128 + rand(128)], ix.mask.all);
  }
  Atomics.store(region.i32, stop, 1);
  const report = { ops, stats: ix.stats(), probe: ix.probeStats() };
  ix.release();
  parentPort!.postMessage(report);
} else {
  // One scratch area: the index's output first, then this reader's walks (each chain repeated, ~400 blocks).
  const area = region.claimScratch();
  const ix = new PrefixIndex(region, { ptr: area.ptr, bytes: 4096 });
  const repeat = Math.ceil(400 / shape.chainLength);
  const walkLength = shape.chainLength * repeat;
  const walks = Array.from({ length: shape.chains }, (_, c) => walkOf(shape, c, repeat));
  const walksPtr = area.ptr + 4096;
  walks.forEach((w, c) => region.u64.set(w.map((i) => stable[i]), (walksPtr >>> 3) + c * walkLength));
  const expected = walks.map((w) => walkCounts(shape, w));
  const errors: string[] = [];
  let lookups = 0, prefixes = 0, churnHits = 0;
  let done = false;
  Atomics.add(region.i32, readersReady, 1);
  Atomics.notify(region.i32, readersReady);
  while (Atomics.load(region.i32, stop) === 0 && errors.length < 5) {
    for (let n = 0; n < 4; n++) {
      const i = rand(nStable);
      const pods = ix.lookup(stable[i]);
      const want = stablePods(shape, i);
      if (pods === null || pods.length !== 2 || pods[0] !== want[0] || pods[1] !== want[1]) {
        errors.push(`stable key ${i}: ${JSON.stringify(pods)}, want ${want}`);
      }
    }
    const j = rand(shape.churnKeys);
    const got = ix.lookup(churn[j]);
    if (got !== null) {
      churnHits++;
      const legal = churnPods(j);
      if (got.some((p) => !legal.includes(p))) errors.push(`churn key ${j}: pods ${got}, legal ${legal}`);
    }
    lookups += 5;
    // Long walks in one WASM call: many probes per call, so the writer's moves overlap them often.
    for (let n = 0; n < 4; n++) {
      const c = rand(shape.chains);
      const depth = ix.longestPrefix({ ptr: walksPtr + c * walkLength * 8, count: walkLength });
      const want = expected[c];
      const bad = ix.counts.findIndex((v, p) => v !== want[p]);
      if (depth !== walkLength || bad >= 0) {
        errors.push(`chain ${c}: depth ${depth}, pod ${bad} matched ${ix.counts[bad]}, want ${want[bad]}`);
      }
      prefixes++;
    }
    if (!done && lookups > ENOUGH.lookups && prefixes > ENOUGH.prefixes && churnHits > 0) {
      done = true;
      Atomics.add(region.i32, readersDone, 1);
    }
  }
  parentPort!.postMessage({ lookups, prefixes, churnHits, errors });
}
