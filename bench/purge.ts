// npm run bench:purge — purging N released pod rows from a full prefix index: one ixClearPod sweep per row (how
// rows were freed before) against one ixClearPods sweep for all N (IndexFeeder.purgePods). The index is the
// gateway's default size (1 Mi keys, 2 Mi slots of 128 bytes: 256 MiB), filled to 90% with keys held by two
// to three pods of 256 in the three kinds, so the sweep reads real memory, not the zero page. After each timed
// purge the rows' entries are put back (untimed), so every sample starts from the same table.
// Prints the table and writes it, with the machine and the command, into bench/RESULTS.md.
import { createAndAttach } from '../src/core/region.js';
import { PrefixIndexWriter } from '../src/core/prefix-index.js';
import { machine, gitCommit } from './machine.js';
import { writeSection } from './results-file.js';

const PODS = 256;
const SAMPLES = Number(process.env.EAR_BENCH_PURGE_SAMPLES ?? 3);
const BATCHES = [1, 8, 30, 64, 256];

const region = createAndAttach({});
const ix = new PrefixIndexWriter(region);
const capacity = ix.stats().capacity;
const nKeys = Math.floor(capacity * 0.9);

// Key i is held by pods a[i] (confirmed), b[i] (assumed) and, for one key in three, c[i] (offloaded).
let s = 0x2545F491;
const rand = (): number => { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; return s >>> 0; };
const keys = new BigUint64Array(nKeys);
const holders = [new Uint8Array(nKeys), new Uint8Array(nKeys), new Int16Array(nKeys)];
for (let i = 0; i < nKeys; i++) {
  keys[i] = (BigInt(rand()) << 32n) | BigInt(rand() | 1);
  holders[0][i] = rand() % PODS;
  holders[1][i] = rand() % PODS;
  holders[2][i] = i % 3 === 0 ? rand() % PODS : -1;
}

/** Puts back every entry of the pods in `set` (all when null). */
function fill (set: Set<number> | null): void {
  for (let i = 0; i < nKeys; i++) {
    for (let k = 0; k < 3; k++) {
      const p = holders[k][i];
      if (p >= 0 && (set === null || set.has(p))) ix.insert(keys[i], p, k, 0);
    }
  }
}

const t0 = performance.now();
fill(null);
const filled = ix.stats();
console.log(`filled ${filled.size} keys (${filled.slots} slots, capacity ${filled.capacity}) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);

function median (xs: number[]): number {
  const a = [...xs].sort((x, y) => x - y);
  return a[a.length >> 1];
}

/** Median ms of `purge` over SAMPLES runs on rows `rows`, the table refilled after each. */
function measure (rows: number[], purge: (rows: number[]) => void): number {
  const set = new Set(rows);
  const times: number[] = [];
  for (let k = 0; k < SAMPLES; k++) {
    const t = performance.now();
    purge(rows);
    times.push(performance.now() - t);
    fill(set);
    if (ix.stats().size !== filled.size) throw new Error('the refill did not restore the table');
  }
  return median(times);
}

const lines = [
  '| rows purged | one sweep per row (ixClearPod × N) | one sweep for all (ixClearPods) | per row, batched | speed-up |',
  '|---:|---:|---:|---:|---:|'
];
for (const n of BATCHES) {
  // Rows spread over the table's 256 pods, as a rollout frees them.
  const rows = Array.from({ length: n }, (_, i) => (i * 97) % PODS);
  const single = measure(rows, (r) => { for (const p of r) ix.clearPod(p, ix.mask.all); });
  const batched = measure(rows, (r) => { ix.clearPods(r, ix.mask.all); });
  const line = `| ${n} | ${single.toFixed(1)} ms | ${batched.toFixed(1)} ms | ${(batched / n).toFixed(2)} ms | ${(single / batched).toFixed(1)}× |`;
  console.log(line);
  lines.push(line);
}
const table = lines.join('\n');
writeSection('bench-purge', [
  '## Purging released pod rows (`npm run bench:purge`)',
  '',
  `Machine: ${machine()}. Commit ${gitCommit()}, ${new Date().toISOString().slice(0, 10)}.`,
  'Command: `npm run build && npm run bench:purge`. The default index (1 Mi keys, 2 Mi slots of 128 bytes), filled',
  `to ${filled.size} keys held by 2–3 of 256 pods; median of ${SAMPLES} samples, the table restored (untimed) after each.`,
  'One thread, no readers: on the gateway the sweep runs on the kv-events thread beside the request path.',
  '',
  table
].join('\n'));
