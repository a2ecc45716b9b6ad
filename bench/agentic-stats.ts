// The agentic generator's realised statistics against the production trace's (evaluation.md), one row per seed:
// what the defaults in src/eval/workloads/agentic.ts were tuned to. `node dist/bench/agentic-stats.js [seed...]`
// (seeds 1 2 3 by default); `--set name=value` overrides a generator option.
import { parseArgs } from 'node:util';
import { agentic } from '../src/eval/workloads/agentic.js';
import { loadWorkload } from '../src/eval/workloads/index.js';
import { workloadStats, type WorkloadStats } from '../src/eval/workloads/stats.js';
import { gitCommit, machine } from './machine.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { set: { type: 'string', multiple: true, default: [] } } });
const options: Record<string, unknown> = {};
for (const kv of values.set ?? []) {
  const eq = kv.indexOf('=');
  if (eq < 1) throw new Error(`--set wants name=value, got ${kv}`);
  options[kv.slice(0, eq)] = kv.slice(eq + 1);
}
const seeds = positionals.length > 0 ? positionals.map(Number) : [1, 2, 3];

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const k = (x: number) => `${(x / 1000).toFixed(1)}k`;
const columns: Array<[string, string, (s: WorkloadStats) => string]> = [
  ['sessions', '', (s) => String(s.sessions)],
  ['requests', '', (s) => String(s.requests)],
  ['prompt/output', '75', (s) => s.promptOutputRatio.toFixed(1)],
  ['mean prompt', '33.6k', (s) => k(s.meanPrompt)],
  ['p99 prompt', '120k', (s) => k(s.p99Prompt)],
  ['top 1% share', '46.5%', (s) => pct(s.top1PctTokenShare)],
  ['APC bound', '80.3%', (s) => pct(s.reusableShare)],
  ['intra-session bound', '79.6%', (s) => pct(s.intraSessionShare)],
  ['reuse intra / cross / shared', '93 / 6 / 1%', (s) => `${pct(s.reuseSplit.intraSession)} / ${pct(s.reuseSplit.crossSession)} / ${pct(s.reuseSplit.sharedPrefix)}`],
];

const rows = seeds.map((seed) => {
  const w = Object.keys(options).length > 0 ? loadWorkload('agentic', { ...options, seed }) : agentic({ seed });
  return [String(seed), ...columns.map(([, , f]) => f(workloadStats(w)))];
});
console.log(`Machine: ${machine()}; commit ${gitCommit()}${Object.keys(options).length > 0 ? `; options ${JSON.stringify(options)}` : ''}\n`);
console.log(`| seed | ${columns.map(([c]) => c).join(' | ')} |`);
console.log(`|---|${columns.map(() => '---').join('|')}|`);
for (const r of rows) console.log(`| ${r.join(' | ')} |`);
console.log(`| trace | ${columns.map(([, t]) => t).join(' | ')} |`);
