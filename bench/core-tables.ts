// Micro-benchmarks of the shared tables: each WASM kernel (through its TS view, as the gateway calls it)
// against the plain TypeScript reference, measured in one run on this thread. bench/core.ts prints the rows.
import { performance } from 'node:perf_hooks';
import type { BenchRow } from './row.js';
import { createRegion, Region } from '../src/core/region.js';
import { AdmissionHeap } from '../src/core/heap.js';
import { AdmissionQueue, ADMISSION_DEFAULTS } from '../src/core/admission.js';
import { RingConsumer, RingProducer } from '../src/core/ring.js';
import { SessionTable } from '../src/core/session-table.js';
import { ReferenceHeap } from '../src/core/reference/heap.js';
import { ReferenceRing } from '../src/core/reference/ring.js';
import { ReferenceSessionTable } from '../src/core/reference/session-table.js';

const RUN_MS = 600;
const WARM_MS = 150;

/** Runs `round` (which does `perRound` operations) for about RUN_MS after a warm-up; returns operations per second. */
function rate (round: () => void, perRound: number): number {
  const warmEnd = performance.now() + WARM_MS;
  while (performance.now() < warmEnd) round();
  let rounds = 0;
  const t0 = performance.now();
  let t = t0;
  while (t - t0 < RUN_MS) {
    for (let i = 0; i < 16; i++) round();
    rounds += 16;
    t = performance.now();
  }
  return (rounds * perRound) / ((t - t0) / 1000);
}

/** A deterministic stream of doubles in [0, 1) (no Math.random: runs are comparable). */
function lcg (seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function row (op: string, wasm: number, reference: number): BenchRow {
  return { op, unit: 'ops/s', wasm: Math.round(wasm), reference: Math.round(reference), better: 'higher' };
}

/** Push + pop pairs per second with `n` jobs waiting (issue 11's target: ≤ 1 µs each at 10k, so ≥ 500k pairs/s). */
function heapRow (region: Region, n: number): BenchRow {
  const heap = new AdmissionHeap(region);
  const ref = new ReferenceHeap(heap.capacity);
  const rnd = lcg(1);
  const prios = Float64Array.from({ length: 1 << 16 }, () => Math.floor(rnd() * 1000));
  for (let j = 0; j < n; j++) { heap.push(j, prios[j]); ref.push(j, prios[j]); }
  // Steady state at n waiting jobs: pop the first, push it back with a new priority (ties are common).
  let i = 0;
  const wasm = rate(() => {
    for (let k = 0; k < 256; k++) heap.push(heap.popMin(), prios[i++ & 0xFFFF]);
  }, 256);
  i = 0;
  const reference = rate(() => {
    for (let k = 0; k < 256; k++) ref.push(ref.popMin(), prios[i++ & 0xFFFF]);
  }, 256);
  while (heap.popMin() >= 0) { /* empty for the next row */ }
  return row(`heap push+pop, ${n} waiting`, wasm, reference);
}

/**
 * The admission queue as the host uses it (src/core/admission.ts: job objects, levels, the heap under them),
 * push + pop + remove per job with `n` waiting; the reference column is the same queue over the TS heap model.
 */
function admissionRow (region: Region, n: number): BenchRow {
  const rnd = lcg(2);
  const values = Float64Array.from({ length: 1 << 16 }, () => Math.floor(rnd() * 60_000));
  const run = (heap: AdmissionHeap): number => {
    const q = new AdmissionQueue<number>(heap, { ...ADMISSION_DEFAULTS, kind: 'atlas', maxQueued: n + 1 });
    for (let j = 0; j < n; j++) q.push(j, 1, values[j], 0);
    let i = 0;
    const r = rate(() => {
      for (let k = 0; k < 256; k++) {
        const job = q.pop()!;
        q.remove(job);
        q.push(i, 1, values[i++ & 0xFFFF], 0);
      }
    }, 256);
    for (const job of q.all()) q.remove(job);
    return r;
  };
  const wasm = run(new AdmissionHeap(region));
  const reference = run(new ReferenceHeap(1 << 16) as unknown as AdmissionHeap);
  return row(`admission queue push+pop, ${n} waiting`, wasm, reference);
}

function ringRows (region: Region): BenchRow[] {
  const producer = new RingProducer(region);
  const consumer = new RingConsumer(region);
  const ref = new ReferenceRing(1 << 12);
  const { assumed, touch } = producer.layout.opcodes;
  const keys = Array.from({ length: 1024 }, (_, i) => BigInt(i + 1) * 0x9E3779B97F4A7C15n & 0xFFFFFFFFFFFFFFFFn);
  const time = 1e12;
  const timeBits = new BigUint64Array(new Float64Array([time]).buffer)[0];
  const B = 64;
  let i = 0;
  const one = rate(() => {
    for (let k = 0; k < B; k++) producer.push(touch, 3, keys[i++ & 1023], timeBits, 0n, 0);
    consumer.pop(B);
  }, B);
  i = 0;
  const oneRef = rate(() => {
    for (let k = 0; k < B; k++) ref.push({ opcode: touch, pod: 3, key: keys[i++ & 1023], a: timeBits, b: 0n, lease: 0 });
    ref.pop(B);
  }, B);
  // Bulk: a prompt's block keys already in shared memory (as the hasher leaves them), recorded in one call.
  const scratch = region.claimScratch();
  new BigUint64Array(region.memory.buffer, scratch.ptr, keys.length).set(keys);
  const bulk = rate(() => {
    producer.pushKeysAt(assumed, 3, scratch.ptr, 256, time, 0, 0);
    consumer.pop(256);
  }, 256);
  const bulkKeys = keys.slice(0, 256);
  const bulkRef = rate(() => {
    ref.pushKeys(assumed, 3, bulkKeys, timeBits, 0, 0);
    ref.pop(256);
  }, 256);
  return [
    row('ring push+pop, one op per call', one, oneRef),
    row('ring pushKeys+pop, 256 block keys per call', bulk, bulkRef)
  ];
}

function sessionRow (region: Region): BenchRow {
  const table = new SessionTable(region);
  const cap = table.stats().capacity;
  const ref = new ReferenceSessionTable(cap);
  const live = cap >>> 2;
  const rnd = lcg(7);
  const keys = Array.from({ length: live }, () => (BigInt(Math.floor(rnd() * 2 ** 32)) << 32n) | BigInt(Math.floor(rnd() * 2 ** 32)) | 1n);
  let now = 0;
  for (const k of keys) { table.upsert(k, now, 1e9); ref.upsert(k, now, 1e9); }
  // A turn: touch the session, then read it back (what admission and routing do per request).
  let i = 0;
  const wasm = rate(() => {
    for (let k = 0; k < 128; k++) {
      const key = keys[i++ % live];
      table.upsert(key, ++now, 1e9);
      table.get(key);
    }
  }, 128);
  i = 0;
  const reference = rate(() => {
    for (let k = 0; k < 128; k++) {
      const key = keys[i++ % live];
      ref.upsert(key, ++now, 1e9);
      ref.get(key);
    }
  }, 128);
  return row(`session upsert+get, ${live} live of ${cap}`, wasm, reference);
}

/** Heap, ring and session-table throughput, WASM against the TS references. About 6 s. */
export function runTableBenchmarks (): BenchRow[] {
  const region = new Region(createRegion({ prefixIndexKeys: 1 << 12, sessions: 1 << 16, heapJobs: 1 << 16, recordRingOps: 1 << 12, pods: 256, scratchSlots: 8 }));
  return [heapRow(region, 4096), heapRow(region, 10_000), admissionRow(region, 10_000), ...ringRows(region), sessionRow(region)];
}
