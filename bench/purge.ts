// npm run bench:purge [-- --rows 256,1024,4096] — purging N released pod rows from a full prefix index: one
// ixClearPod sweep per row (how rows were freed before) against one ixClearPods sweep for all N
// (IndexFeeder.purgePods). The index is the gateway's default size (1 Mi keys, 2 Mi slots of 128 bytes: 256 MiB),
// filled to 90% of its entries with keys held by two to three pods of the region's pod rows in the three kinds,
// so the sweep reads real memory, not the zero page (past 256 rows a key held by pods of k groups of 256 is k
// entries: fewer keys fill it). After each timed purge the rows' entries are put back (untimed), so every sample
// starts from the same table.
// --rows: the region's pod rows (maxPods), one region each, in one run; with more than the default 256 the
// tables are written to the issue-24 section with each figure's ratio to the 256-row one of the same run.
// Prints the tables and writes them, with the machine and the command, into bench/RESULTS.md.
import { parseArgs } from 'node:util';
import { createAndAttach } from '../src/core/region.js';
import { PrefixIndexWriter } from '../src/core/prefix-index.js';
import { machine, gitCommit } from './machine.js';
import { writeSection } from './results-file.js';

const SAMPLES = Number(process.env.EAR_BENCH_PURGE_SAMPLES ?? 3);
const BATCHES = [1, 8, 30, 64, 256];
/** One sweep per row is timed up to this many rows (4,096 sweeps of 16 ms would take a minute a sample). */
const MAX_SINGLE = 256;

const { values } = parseArgs({ options: { rows: { type: 'string', default: '256' } } });
const ROWS = values.rows!.split(',').map(Number);
if (ROWS.some((r) => !Number.isInteger(r) || r < 1) || ROWS.length === 0) throw new Error(`--rows takes row counts, got ${values.rows}`);

interface Measured {
  rows: number;
  keys: number;
  entries: number;
  /** Per batch size: ms of one sweep per row (null: not timed) and of one sweep for all. */
  byBatch: Map<number, { single: number | null; batched: number }>;
}

function median (xs: number[]): number {
  const a = [...xs].sort((x, y) => x - y);
  return a[a.length >> 1];
}

function measureRows (rows: number): Measured {
  const region = createAndAttach({ pods: rows });
  const ix = new PrefixIndexWriter(region);
  const capacity = ix.stats().capacity;
  // Key i is held by pods a[i] (confirmed), b[i] (assumed) and, for one key in three, c[i] (offloaded); keys are
  // drawn until their entries (one per pod group holding the key) fill 90% of the capacity.
  let s = 0x2545F491;
  const rand = (): number => { s ^= s << 13; s ^= s >>> 17; s ^= s << 5; return s >>> 0; };
  const want = Math.floor(capacity * 0.9);
  const keys: bigint[] = [];
  const holders: [number[], number[], number[]] = [[], [], []];
  const seen = new Set<bigint>();
  let entries = 0;
  while (entries < want) {
    const i = keys.length;
    const a = rand() % rows;
    const b = rand() % rows;
    const c = i % 3 === 0 ? rand() % rows : -1;
    const groups = new Set([a >> 8, b >> 8, ...(c >= 0 ? [c >> 8] : [])]).size;
    if (entries + groups > want) break;
    const key = (BigInt(rand()) << 32n) | BigInt(rand() | 1);
    if (seen.has(key)) continue; // the generator repeats a pair now and then
    seen.add(key);
    keys.push(key);
    holders[0].push(a);
    holders[1].push(b);
    holders[2].push(c);
    entries += groups;
  }
  /** Puts back every entry of the pods in `set` (all when null). */
  const fill = (set: Set<number> | null): void => {
    for (let i = 0; i < keys.length; i++) {
      for (let k = 0; k < 3; k++) {
        const p = holders[k][i];
        if (p >= 0 && (set === null || set.has(p))) ix.insert(keys[i], p, k, 0);
      }
    }
  };
  const t0 = performance.now();
  fill(null);
  const filled = ix.stats();
  if (filled.size !== entries || filled.evictions !== 0) throw new Error(`filled ${filled.size} entries, expected ${entries} with no eviction`);
  console.log(`${rows} rows: filled ${filled.size} entries (${keys.length} keys; ${filled.slots} slots) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  /** Median ms of `purge` over SAMPLES runs on rows `list`, the table refilled after each. */
  const measure = (list: number[], purge: (list: number[]) => void): number => {
    const set = new Set(list);
    const times: number[] = [];
    for (let k = 0; k < SAMPLES; k++) {
      const t = performance.now();
      purge(list);
      times.push(performance.now() - t);
      fill(set);
      if (ix.stats().size !== filled.size) throw new Error('the refill did not restore the table');
    }
    return median(times);
  };
  const byBatch = new Map<number, { single: number | null; batched: number }>();
  for (const n of [...new Set([...BATCHES, rows])].filter((b) => b <= rows)) {
    // Rows spread over the table's pods, as a rollout frees them.
    const list = Array.from({ length: n }, (_, i) => (i * 97) % rows);
    const single = n <= MAX_SINGLE ? measure(list, (r) => { for (const p of r) ix.clearPod(p, ix.mask.all); }) : null;
    const batched = measure(list, (r) => { ix.clearPods(r, ix.mask.all); });
    byBatch.set(n, { single, batched });
    console.log(`  ${n} rows purged: ${single === null ? '—' : `${single.toFixed(1)} ms`} one sweep each, ${batched.toFixed(1)} ms one sweep for all`);
  }
  ix.release();
  return { rows, keys: keys.length, entries, byBatch };
}

const results = ROWS.map(measureRows);

function table (m: Measured): string {
  const lines = [
    '| rows purged | one sweep per row (ixClearPod × N) | one sweep for all (ixClearPods) | per row, batched | speed-up |',
    '|---:|---:|---:|---:|---:|'
  ];
  for (const [n, { single, batched }] of m.byBatch) {
    lines.push(`| ${n} | ${single === null ? '—' : `${single.toFixed(1)} ms`} | ${batched.toFixed(1)} ms | ${(batched / n).toFixed(2)} ms | ${single === null ? '—' : `${(single / batched).toFixed(1)}×`} |`);
  }
  return lines.join('\n');
}

const stamp = `Machine: ${machine()}. Commit ${gitCommit()}, ${new Date().toISOString().slice(0, 10)}.`;
if (ROWS.length === 1 && ROWS[0] === 256) {
  const m = results[0];
  writeSection('bench-purge', [
    '## Purging released pod rows (`npm run bench:purge`)',
    '',
    stamp,
    'Command: `npm run build && npm run bench:purge`. The default index (1 Mi keys, 2 Mi slots of 128 bytes), filled',
    `to ${m.entries} keys held by 2–3 of 256 pods; median of ${SAMPLES} samples, the table restored (untimed) after each.`,
    'One thread, no readers: on the gateway the sweep runs on the kv-events thread beside the request path.',
    '',
    table(m)
  ].join('\n'));
} else {
  const base = results.find((m) => m.rows === 256) ?? results[0];
  const ratios = ['| rows purged | ' + results.map((m) => `${m.rows} rows`).join(' | ') + ' |', '|---:|' + results.map(() => '---:|').join('')];
  for (const n of base.byBatch.keys()) {
    ratios.push(`| ${n} | ` + results.map((m) => {
      const b = m.byBatch.get(n);
      return b === undefined ? '—' : `${b.batched.toFixed(1)} ms (${(b.batched / base.byBatch.get(n)!.batched).toFixed(2)}×)`;
    }).join(' | ') + ' |');
  }
  const all = results.filter((m) => m.rows > 256).map((m) => `${m.rows}: ${m.byBatch.get(m.rows)!.batched.toFixed(1)} ms`);
  writeSection('bench-purge-rows', [
    `## Purging released pod rows by row count, issue 24 (\`npm run bench:purge -- --rows ${ROWS.join(',')}\`)`,
    '',
    stamp,
    `Command: \`npm run build && npm run bench:purge -- --rows ${ROWS.join(',')}\`: one region per row count (maxPods), in one`,
    'process, one after the other. Each default index (1 Mi entries, 2 Mi slots of 128 bytes) filled to 90% of its',
    'entries with keys held by 2–3 pods drawn from all its rows (an entry is a key in one group of 256 rows, so more',
    `rows fill it with fewer keys: ${results.map((m) => `${m.rows} rows ${m.keys} keys`).join(', ')}); median of ${SAMPLES} samples,`,
    'the table restored (untimed) after each. One sweep for all purged rows (ixClearPods), ms, and its ratio to the same',
    `purge in the ${base.rows}-row index of this run. Every row at once: ${all.join(', ')}.`,
    '',
    ratios.join('\n'),
    '',
    ...results.flatMap((m) => [`${m.rows} rows, both ways:`, '', table(m), ''])
  ].join('\n'));
}
