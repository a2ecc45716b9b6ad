// What the evaluation's driver-independent half costs a `des` run (whose target is a 600 s agentic trace on
// 16 engines in under 10 s of wall time): building the workloads, expanding every prompt to token ids,
// the APC bound, the ideal-makespan replay, and one plot. `node dist/bench/eval-workloads.js`
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { agentic } from '../src/eval/workloads/agentic.js';
import { claudeCode } from '../src/eval/workloads/claude-code.js';
import { mooncake } from '../src/eval/workloads/mooncake.js';
import { PromptSource } from '../src/eval/workloads/prompt-builder.js';
import { workloadStats } from '../src/eval/workloads/stats.js';
import { allSessions } from '../src/eval/workloads/types.js';
import { ApcBound } from '../src/eval/metrics/apc-bound.js';
import { idealMakespan } from '../src/eval/metrics/amplification.js';
import { renderPng } from '../src/eval/report/plots.js';

const traces = fileURLToPath(new URL('../../../shared/traces/', import.meta.url));
const rows: Array<[string, string]> = [];
function time<T> (what: string, fn: () => T, extra?: (r: T, ms: number) => string): T {
  const t0 = performance.now();
  const r = fn();
  const ms = performance.now() - t0;
  rows.push([what, `${ms.toFixed(0)} ms${extra === undefined ? '' : `, ${extra(r, ms)}`}`]);
  return r;
}

const w = time('agentic() defaults (600 s at 0.5 sessions/s)', () => agentic(), (r) => `${r.sessions.length} sessions`);
time('workloadStats(agentic)', () => workloadStats(w), (s) => `${s.requests} requests`);
const turns = [...allSessions(w.sessions)].flatMap((s) => s.turns.map((_, k) => [s, k] as const));
time('PromptSource: every agentic prompt as token ids', () => {
  const src = new PromptSource(w);
  let tokens = 0;
  for (const [s, k] of turns) tokens += src.turn(s, k).tokens.length;
  return tokens;
}, (n, ms) => `${(n / 1e6).toFixed(0)}M tokens, ${(n / ms / 1e3).toFixed(0)}M tokens/s`);
time('ApcBound over every agentic request', () => {
  const src = new PromptSource(w);
  const b = new ApcBound(w.blockSize);
  for (const [s, k] of turns) b.observe(s.id, src.turn(s, k).blocks, s.turns[k].promptTokens);
});
time('idealMakespan(agentic), 2 s per request', () => idealMakespan(w, () => 2), (m) => `${m.toFixed(0)} s`);
time('claudeCode(shared/traces/claude-code)', () => claudeCode(`${traces}claude-code`));
time('mooncake(conversation_trace.jsonl)', () => mooncake(`${traces}mooncake/conversation_trace.jsonl`), (r) => `${r.requests.length} requests`);
const t0 = performance.now();
await renderPng({ data: { values: [{ x: 1, y: 2 }] }, mark: 'point', encoding: { x: { field: 'x', type: 'quantitative' }, y: { field: 'y', type: 'quantitative' } } });
rows.push(['renderPng, one small plot', `${(performance.now() - t0).toFixed(0)} ms`]);

console.log(`Machine: ${cpus()[0]?.model.trim()} × ${cpus().length}, Node ${process.version}\n`);
console.log('| step | time |\n|---|---|');
for (const [a, b] of rows) console.log(`| ${a} | ${b} |`);
