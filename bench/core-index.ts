// Benchmarks of xxHash64, block hashing and the prefix index: each WASM kernel against its TypeScript
// reference (src/core/reference/), measured in the same process one after the other. Returns rows only;
// bench/core.ts prints them and writes bench/RESULTS.md.
import xxhash from 'xxhash-wasm';
import { createAndAttach, type Region } from '../src/core/region.js';
import { BlockHasher } from '../src/core/block-keys.js';
import { PrefixIndex, PrefixIndexWriter } from '../src/core/prefix-index.js';
import { xxh64Ref } from '../src/core/reference/xxhash64.js';
import { hashBlocksRef } from '../src/core/reference/block-hash.js';
import { PrefixIndexRef } from '../src/core/reference/prefix-index.js';
import type { BenchRow } from './row.js';

// xxhash-wasm only initialises asynchronously: done once at import (top-level await) so the run stays synchronous.
const { h64Raw } = await xxhash();

const PROMPT_TOKENS = 33_600;
const BLOCK_SIZE = 16;
const BLOCKS = PROMPT_TOKENS / BLOCK_SIZE; // 2,100
const PODS = 64;
/** Keys already in the index besides the prompt's, so lookups do not run in an empty, cache-resident table. */
const BACKGROUND_KEYS = 200_000;

/**
 * Best time per call (ms) over `samples` samples, each at least `minMs` long: the least disturbed figure.
 * A sample counts the smaller of wall time and this process's CPU time: on a shared machine the thread is
 * often descheduled mid-sample, which CPU time leaves out (the benchmark itself runs on one thread).
 */
function timePerCall (fn: () => void, minMs = 40, samples = 5): number {
  fn();
  let best = Infinity;
  for (let s = 0; s < samples; s++) {
    let calls = 0;
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    let t = t0;
    do { fn(); calls++; t = performance.now(); } while (t - t0 < minMs);
    const c = process.cpuUsage(c0);
    best = Math.min(best, Math.min(t - t0, (c.user + c.system) / 1000) / calls);
  }
  return best;
}

function rng (seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; return (s >>> 0) / 2 ** 32; };
}

function randomKeys (n: number, seed: number): BigUint64Array {
  const r = rng(seed);
  const out = new BigUint64Array(n);
  const w = new Uint32Array(out.buffer);
  for (let i = 0; i < w.length; i++) w[i] = (r() * 2 ** 32) >>> 0;
  for (let i = 0; i < n; i++) if (out[i] === 0n) out[i] = 1n;
  return out;
}

function xxhashRows (region: Region, h64Raw: (b: Uint8Array, s?: bigint) => bigint): BenchRow[] {
  const len = 64 << 10;
  const bytes = new Uint8Array(len);
  const r = rng(7);
  for (let i = 0; i < len; i++) bytes[i] = (r() * 256) | 0;
  const area = region.claimScratch();
  region.u8.set(bytes, area.ptr);
  const xxh64 = region.fn<(p: number, l: number, s: bigint) => bigint>('xxh64');
  const gbps = (ms: number): number => len / ms / 1e6;
  const wasm = gbps(timePerCall(() => xxh64(area.ptr, len, 0n)));
  const ref = gbps(timePerCall(() => xxh64Ref(bytes, 0n)));
  const lib = gbps(timePerCall(() => h64Raw(bytes, 0n)));
  return [
    { op: 'xxHash64 over 64 KiB', unit: 'GB/s', wasm, reference: ref, better: 'higher' },
    { op: 'xxHash64 over 64 KiB, npm xxhash-wasm (h64Raw) as the baseline', unit: 'GB/s', wasm, reference: lib, better: 'higher' }
  ];
}

function blockHashRow (region: Region, tokens: Uint32Array): BenchRow {
  const hasher = new BlockHasher(region);
  const wasm = timePerCall(() => hasher.hash(tokens, BLOCK_SIZE, 42n)) * 1000;
  const ref = timePerCall(() => hashBlocksRef(tokens, BLOCK_SIZE, 42n)) * 1000;
  return { op: `block keys of a ${PROMPT_TOKENS}-token prompt (${BLOCKS} blocks of ${BLOCK_SIZE}, incl. copy to scratch)`, unit: 'µs', wasm, reference: ref, better: 'lower' };
}

/**
 * `holder(p)`: the pod row of the p-th of the PODS pods holding parts (spread over every row, or packed into one
 * group of 256 rows), so that with more rows a walk probes every group or only one past block 0.
 */
function longestPrefixRow (region: Region, writer: PrefixIndexWriter, ref: PrefixIndexRef, prompt: BigUint64Array, holder: (p: number) => number, where: string): BenchRow {
  // Pod p holds the first ~(p+1)/64 of the prompt (pod 63 all of it), in alternating kinds, plus a scattering
  // of later blocks (parts of other branches) that a prefix walk must not count.
  const r = rng(11);
  for (let q = 0; q < PODS; q++) {
    const p = holder(q);
    const len = Math.floor((BLOCKS * (q + 1)) / PODS);
    const kind = q % 2 === 0 ? writer.kind.confirmed : writer.kind.assumed;
    for (let i = 0; i < BLOCKS; i++) {
      if (i < len || r() < 0.1) {
        writer.insert(prompt[i], p, kind, 0);
        ref.insert(prompt[i], p, kind, 0);
      }
    }
  }
  const area = region.claimScratch();
  region.u64.set(prompt, area.ptr >>> 3);
  const span = { ptr: area.ptr, count: BLOCKS };
  const reader = new PrefixIndex(region, { ptr: area.ptr + BLOCKS * 8, bytes: area.bytes - BLOCKS * 8 });
  const counts = new Uint32Array(writer.maxPods);
  // The router's walk: given a time, so assumed presence past the writer's TTL does not count (none is, here).
  writer.expireAssumed(0, 5000, 0);
  const now = 1;
  const depth = reader.longestPrefix(span, writer.mask.all, now);
  const deepest = holder(PODS - 1);
  if (depth !== BLOCKS || ref.longestPrefix(prompt, writer.mask.all, counts) !== BLOCKS || counts[deepest] !== BLOCKS || reader.counts[deepest] !== BLOCKS) {
    throw new Error('longestPrefix benchmark set-up is wrong: the deepest pod must match every block');
  }
  const wasm = timePerCall(() => reader.longestPrefix(span, writer.mask.all, now)) * 1000;
  const refUs = timePerCall(() => ref.longestPrefix(prompt, writer.mask.all, counts)) * 1000;
  return {
    op: `longestPrefix over ${BLOCKS} blocks, ${PODS} pods holding parts${where} (index of ${BACKGROUND_KEYS / 1000}k keys)`,
    unit: 'µs', wasm, reference: refUs, better: 'lower',
    target: '< 50 µs and ≥ 3× reference', met: wasm < 50 && refUs / wasm >= 3
  };
}

function churnRows (region: Region, writer: PrefixIndexWriter, ref: PrefixIndexRef): BenchRow[] {
  // A prompt's worth of new keys recorded for one pod, then removed again: the table never changes size, so
  // every sample does the same work (inserts of new keys and deletions with backward shifts).
  const keys = randomKeys(BLOCKS, 99);
  const area = region.claimScratch();
  region.u64.set(keys, area.ptr >>> 3);
  const span = { ptr: area.ptr, count: BLOCKS };
  const list = [...keys];
  const { assumed } = writer.kind;
  const all = writer.mask.all;
  const opsPerSec = (ms: number): number => (2 * BLOCKS) / ms * 1000;
  const perCall = opsPerSec(timePerCall(() => {
    for (let i = 0; i < BLOCKS; i++) writer.insert(list[i], 7, assumed, 0);
    for (let i = 0; i < BLOCKS; i++) writer.remove(list[i], 7, all);
  }));
  const batched = opsPerSec(timePerCall(() => {
    writer.insertMany(span, 7, assumed, 0);
    writer.removeMany(span, 7, all);
  }));
  const refOps = opsPerSec(timePerCall(() => {
    for (let i = 0; i < BLOCKS; i++) ref.insert(list[i], 7, assumed, 0);
    for (let i = 0; i < BLOCKS; i++) ref.remove(list[i], 7, all);
  }));
  const target = '10 M ops/s';
  return [
    { op: 'index insert + remove of new keys, one writer, one call per op from JS (bigint keys)', unit: 'ops/s', wasm: perCall, reference: refOps, better: 'higher', target, met: perCall >= 10e6 },
    { op: 'index insert + remove of new keys, one writer, batched kernel (insertMany/removeMany)', unit: 'ops/s', wasm: batched, reference: refOps, better: 'higher', target, met: batched >= 10e6 }
  ];
}

/**
 * A session's next turn on an index at its capacity (bench/RESULTS.md, "The pods' loss rings"): the pod its hint
 * names has lost other keys since, CLOCK evicting one with each insert, a run of neighbouring slots at a time, and
 * heldSince reads its loss ring to vouch for the hint's blocks. The baseline is the whole walk it spares.
 */
function heldSinceRow (region: Region, writer: PrefixIndexWriter, prompt: BigUint64Array): BenchRow {
  const LOSSES = 128;
  const pod = 0;
  const area = region.claimScratch();
  region.u64.set(prompt, area.ptr >>> 3);
  const span = { ptr: area.ptr, count: BLOCKS };
  const batch = { ptr: area.ptr + BLOCKS * 8, count: 4096 };
  const { assumed } = writer.kind;
  // The rest of the index, the pod's too.
  const r = rng(17);
  const w = new Uint32Array(region.memory.buffer, batch.ptr, batch.count * 2);
  const fill = (n: number): void => {
    for (let i = 0; i < w.length; i++) w[i] = ((r() * 2 ** 32) >>> 0) | 1;
    writer.insertMany({ ptr: batch.ptr, count: n }, pod, assumed, 0);
  };
  const { capacity } = writer.stats();
  while (writer.stats().size < capacity) fill(batch.count);
  // The prompt's entries referenced last, so the hand takes other keys first.
  writer.insertMany(span, pod, assumed, 0);
  const epoch = writer.lossEpoch(pod);
  while (writer.lossEpoch(pod) - epoch < LOSSES) fill(1);
  const reader = new PrefixIndex(region, { ptr: batch.ptr + batch.count * 8, bytes: area.bytes - BLOCKS * 8 - batch.count * 8 });
  if (reader.heldSince(span, pod, BLOCKS, epoch) !== BLOCKS) throw new Error('heldSince benchmark set-up is wrong: the prompt lost a block');
  const wasm = timePerCall(() => reader.heldSince(span, pod, BLOCKS, epoch)) * 1000;
  const whole = timePerCall(() => reader.longestPrefix(span, writer.mask.all, 1)) * 1000;
  return {
    op: `heldSince over ${BLOCKS} blocks, ${LOSSES} keys evicted from the pod since (index at its capacity); baseline: the whole walk it spares`,
    unit: 'µs', wasm, reference: whole, better: 'lower'
  };
}

/**
 * Runs every index benchmark (about 10 s) and returns the rows, on a region of `podRows` pod rows (maxPods). With
 * more than 256 rows the walk is measured twice: its 64 pods spread over every group of 256 rows, and packed
 * into one group.
 */
export function runIndexBenchmarks (podRows = 256): BenchRow[] {
  const region = createAndAttach({ scratchSlots: 8, pods: podRows });
  const rows = xxhashRows(region, h64Raw);
  const r = rng(3);
  const tokens = Uint32Array.from({ length: PROMPT_TOKENS }, () => (r() * 150_000) >>> 0);
  rows.push(blockHashRow(region, tokens));

  const writer = new PrefixIndexWriter(region);
  const ref = new PrefixIndexRef(writer.stats().capacity, podRows);
  const background = randomKeys(BACKGROUND_KEYS, 5);
  for (let i = 0; i < background.length; i++) {
    writer.insert(background[i], i % podRows, i % 3, 0);
    ref.insert(background[i], i % podRows, i % 3, 0);
  }
  const stride = Math.max(1, Math.floor(podRows / PODS));
  rows.push(longestPrefixRow(region, writer, ref, hashBlocksRef(tokens, BLOCK_SIZE, 42n), (p) => p * stride, podRows > 256 ? ' over every group of 256 rows' : ''));
  if (podRows > 256) {
    rows.push(longestPrefixRow(region, writer, ref, hashBlocksRef(tokens, BLOCK_SIZE, 43n), (p) => podRows - PODS + p, ' in one group of 256 rows'));
  }
  rows.push(...churnRows(region, writer, ref));
  rows.push(heldSinceRow(region, writer, hashBlocksRef(tokens, BLOCK_SIZE, 44n)));
  return rows;
}
