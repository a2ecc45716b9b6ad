// npm run bench:core [-- --rows 256,1024,4096] — the WASM kernels against their TypeScript references, in one
// run, on this machine. --rows: the prefix index's benchmarks on regions of those pod rows (maxPods), one after the
// other in this process, written to the issue-24 section with each WASM figure's ratio to the 256-row one.
// Prints the table and writes it, with the machine and the command, into bench/RESULTS.md.
import { parseArgs } from 'node:util';
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

const { values } = parseArgs({ options: { rows: { type: 'string' } } });
if (values.rows !== undefined) {
  const counts = values.rows.split(',').map(Number);
  if (counts.length === 0 || counts.some((r) => !Number.isInteger(r) || r < 1)) throw new Error(`--rows takes row counts, got ${values.rows}`);
  const runs = counts.map((n) => ({ n, rows: runIndexBenchmarks(n) }));
  const base = runs.find((r) => r.n === 256) ?? runs[0];
  // Rows by operation; the walk packed into one group is only measured past 256 rows.
  const ops = [...new Set(runs.flatMap((r) => r.rows.map((x) => x.op.replace(/ over every group of 256 rows/, ''))))];
  const find = (r: typeof runs[number], op: string): BenchRow | undefined => r.rows.find((x) => x.op.replace(/ over every group of 256 rows/, '') === op);
  const lines = [
    `| operation | unit | ${runs.map((r) => `${r.n} rows`).join(' | ')} |`,
    `|---|---|${runs.map(() => '---:|').join('')}`,
    ...ops.map((op) => {
      const b = find(base, op) ?? find(base, op.replace(' in one group of 256 rows', ''));
      const cells = runs.map((r) => {
        const x = find(r, op);
        if (x === undefined) return '—';
        const vs = b === undefined || b.wasm === 0 ? '' : ` (${(x.better === 'higher' ? b.wasm / x.wasm : x.wasm / b.wasm).toFixed(2)}×)`;
        return `${fmt(x.wasm)}${vs}`;
      });
      return `| ${op} | ${find(runs[runs.length - 1], op)?.unit ?? ''} | ${cells.join(' | ')} |`;
    })
  ];
  const table = lines.join('\n');
  console.log(table);
  writeSection('bench-core-rows', [
    `## Core index kernels by pod rows, issue 24 (\`npm run bench:core -- --rows ${counts.join(',')}\`)`,
    '',
    `Machine: ${machine()}. Commit ${gitCommit()}, ${new Date().toISOString().slice(0, 10)}.`,
    `Command: \`npm run build && npm run bench:core -- --rows ${counts.join(',')}\`: the prefix index's benchmarks (and the`,
    'hashing ones, which do not depend on the rows) on one region per row count (maxPods), one after the other in one',
    `process. WASM figures; in brackets the cost relative to the ${base.n}-row run (above 1×: slower). Past 256 rows the walk`,
    'is measured with its 64 pods spread over every group of 256 rows (every group probed at every block) and packed into',
    `one group (every group probed at block 0 only; its ratio is to the ${base.n}-row walk).`,
    '',
    table
  ].join('\n'));
  process.exit(0);
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
