// npm run bench:core — the WASM kernels against their TypeScript references, in one run, on this machine.
// Prints the table and writes it, with the machine and the command, into bench/RESULTS.md.
import { runIndexBenchmarks } from './core-index.js';
import { runTableBenchmarks } from './core-tables.js';
import { machine, gitCommit } from './machine.js';
import { writeSection } from './results-file.js';
import type { BenchRow } from './row.js';

function fmt (n: number | null): string {
  if (n === null) return '—';
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)} M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)} k`;
  return n >= 100 ? n.toFixed(0) : n.toPrecision(3);
}

function ratio (r: BenchRow): string {
  if (r.reference === null || r.reference === 0 || r.wasm === 0) return '—';
  const x = r.better === 'higher' ? r.wasm / r.reference : r.reference / r.wasm;
  return `${x.toFixed(1)}×`;
}

const rows: BenchRow[] = [...runIndexBenchmarks(), ...runTableBenchmarks()];
const lines = [
  '| operation | unit | WASM | TS reference | WASM advantage | target | met |',
  '|---|---|---:|---:|---:|---|---|',
  ...rows.map((r) => `| ${r.op} | ${r.unit} | ${fmt(r.wasm)} | ${fmt(r.reference)} | ${ratio(r)} | ${r.target ?? ''} | ${r.met === undefined ? '' : r.met ? 'yes' : '**no**'} |`)
];
const table = lines.join('\n');
console.log(table);
writeSection('bench-core', [
  '## Core kernels (`npm run bench:core`)',
  '',
  `Machine: ${machine()}. Commit ${gitCommit()}, ${new Date().toISOString().slice(0, 10)}.`,
  'Command: `npm run build && npm run bench:core`. Both columns measured in the same process, one after the other;',
  '"WASM advantage" is the ratio in the direction that is better for the unit.',
  '',
  table
].join('\n'));
