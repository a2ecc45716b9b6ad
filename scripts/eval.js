#!/usr/bin/env node
// `npm run eval`: the two load regimes of specs/evaluation.md ("Load regimes") on the discrete-event driver,
// 8 h20-qwen3-coder engines, the agentic workload, seed 1: a light regime and the stress regime, one after the
// other (two cores, shared: never both at once). Writes results/light and results/stress (results.json,
// report.md, plots) and prints, for the stress regime, the two figures that define it.
// Budget: under 3 minutes of wall on the 2-core AMD EPYC dev machine (bench/RESULTS.md, "Evaluation on the
// routing host (issue 10)", has the measured figure and the sweep these constants come from).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const ear = join(root, 'dist', 'src', 'cli', 'ear.js');

const ENGINES = 8;
const PROFILE = 'h20-qwen3-coder';
const SEED = 1;
// Seconds of session arrivals. 300 s at 0.5/s is 150 sessions, one of them ~1000 turns long, so a run's virtual
// time is ~13,000 s and one policy takes ~25-35 s of wall at the stress rate; 300 s is the shortest window whose
// session mix (a 1% tail carrying ~half the input tokens) the sweep found usable, and the longest that fits.
const DURATION = 300;

// Light: a quarter of the generator's default rate. From the sweep (seed 1, 300 s): the best load balancer's mean
// session slowdown is 1.12 (kv-load) at 0.125/s and 1.08 at 0.0625/s; the engines are rarely queued. The
// generator's default, 0.5/s, is no longer light since the workload matched the trace (a fifth of the input new,
// p99 prompt ~120k): it is the stress regime.
const LIGHT_RATE = 0.125;
const LIGHT_POLICIES = ['random', 'round-robin', 'least-request', 'least-load', 'sticky', 'prefix-cache', 'scorer', 'kv-load', 'chwbl', 'preble'];

// Stress: the lowest rate at which the best load balancer's mean session slowdown is ≥ 4 (seed 1, 300 s):
// 0.45/s → 3.68 (prefix-cache), 0.5/s → 4.25 (prefix-cache; kv-load 4.78). Sticky's TTFT p90 is only 1.0× kv-load's
// there (the spec's second condition, ≥ 2×, is not reached below ~2-3/s: 1.77× at 2/s). Policies: the two best
// load balancers (prefix-cache, kv-load), sticky (the pin), and least-load (the LMetric stand-in); the whole set
// costs ~4 min at this rate, over the budget.
const STRESS_RATE = 0.5;
const STRESS_POLICIES = ['least-load', 'prefix-cache', 'kv-load', 'sticky'];

function run (name, rate, policies) {
  const out = join(root, 'results', name);
  const args = [ear, 'eval', '--driver', 'des', '--workload', 'agentic', '--engines', String(ENGINES), '--profile', PROFILE,
    '--duration', String(DURATION), '--seed', String(SEED), '--set', `rate=${rate}`, '--policies', policies.join(','), '--out', out];
  console.log(`\n== ${name}: ${rate} sessions/s ==\n$ node ${args.map((a) => a.replace(root, '')).join(' ')}`);
  const t0 = performance.now();
  const r = spawnSync(process.execPath, args, { stdio: 'inherit', cwd: root });
  if (r.status !== 0) {
    console.error(`ear eval (${name}) exited with ${r.status ?? r.signal}`);
    process.exit(r.status ?? 1);
  }
  console.log(`${name}: ${((performance.now() - t0) / 1000).toFixed(1)} s of wall`);
  return JSON.parse(readFileSync(join(out, 'results.json'), 'utf8'));
}

const LOAD_BALANCERS = new Set(['least-load', 'least-request', 'kv-load', 'round-robin', 'scorer', 'preble', 'prefix-cache', 'chwbl']);

function regimeCheck (name, results) {
  const by = Object.fromEntries(results.policies.map((p) => [p.policy, p.metrics]));
  const lbs = Object.entries(by).filter(([p]) => LOAD_BALANCERS.has(p)).sort((a, b) => a[1].sessionSlowdown.mean - b[1].sessionSlowdown.mean);
  const parts = [];
  if (lbs.length > 0) parts.push(`best load balancer ${lbs[0][0]}, mean session slowdown ${lbs[0][1].sessionSlowdown.mean.toFixed(2)} (stress: ≥ 4)`);
  if (by.sticky && by['kv-load']) parts.push(`sticky / kv-load TTFT p90 ${(by.sticky.ttft.p90 / by['kv-load'].ttft.p90).toFixed(2)} (stress: ≥ 2)`);
  const failed = Object.entries(by).filter(([, m]) => Object.keys(m.failures).length > 0).map(([p, m]) => `${p} ${JSON.stringify(m.failures)}`);
  parts.push(failed.length > 0 ? `FAILURES: ${failed.join('; ')}` : 'no failures');
  console.log(`${name}: ${parts.join('; ')}`);
}

const t0 = performance.now();
const light = run('light', LIGHT_RATE, LIGHT_POLICIES);
const stress = run('stress', STRESS_RATE, STRESS_POLICIES);
console.log('');
regimeCheck('light', light);
regimeCheck('stress', stress);
console.log(`total: ${((performance.now() - t0) / 1000).toFixed(1)} s of wall`);
