import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { runDes } from '../../../src/eval/drivers/des.js';
import { runE2e } from '../../../src/eval/drivers/e2e.js';
import { isolatedServiceTime } from '../../../src/eval/drivers/isolated.js';
import { loadWorkload } from '../../../src/eval/workloads/index.js';
import { loadProfile } from '../../../src/engine-model/profile.js';

const small = () => loadWorkload('agentic', { duration: 60, rate: 0.4, seed: 3 });

test('des is deterministic for a seed, and sane: sticky beats round-robin on APC, amplification ≥ 1, no failures', () => {
  const w = small();
  const a = runDes({ workload: w, policy: 'sticky', engines: 4, profile: 'h20-qwen3-coder', seed: 7 }).summary;
  const b = runDes({ workload: w, policy: 'sticky', engines: 4, profile: 'h20-qwen3-coder', seed: 7 }).summary;
  const strip = (s: typeof a) => ({ ...s, gateway: null });
  assert.deepEqual(strip(a), strip(b));
  const rr = runDes({ workload: w, policy: 'round-robin', engines: 4, profile: 'h20-qwen3-coder', seed: 7 }).summary;
  assert.ok(a.apc.value > rr.apc.value, `sticky ${a.apc.value} vs round-robin ${rr.apc.value}`);
  for (const s of [a, rr]) {
    assert.equal(s.requests.failed, 0);
    assert.equal(s.requests.incomplete, 0);
    assert.ok(s.amplification !== null && s.amplification >= 0.999, `amplification ${s.amplification}`);
    assert.ok(s.apc.bound !== null && s.apc.value <= s.apc.bound + 1e-9);
    // Every session against its own ideal completion time (the same replay as the ideal makespan).
    assert.equal(s.sessionSlowdown.sessions, w.kind === 'closed' ? w.sessions.length : -1);
    assert.ok(s.sessionSlowdown.mean !== null && s.sessionSlowdown.mean >= 0.999 && s.sessionSlowdown.p90! >= s.sessionSlowdown.mean * 0.5, JSON.stringify(s.sessionSlowdown));
    assert.ok(s.hotspot.loadWeighted >= 1 && s.hotspot.loadWeighted <= 4, `load-weighted hotspot ${s.hotspot.loadWeighted}`);
    // The engine's own queue, from its figures: one sample per completed request, never past its TTFT.
    assert.equal(s.engineQueue.count, s.requests.completed);
    assert.ok(s.engineQueue.max <= s.ttft.max, `engine queue max ${s.engineQueue.max} µs, TTFT max ${s.ttft.max} µs`);
  }
  assert.ok(rr.engineQueue.max > 0, 'round-robin on four engines queues somewhere');
});

test('des counts ear\'s moves as migrations (a re-route until the KV connectors exist), with no thrash inside tCool', () => {
  const r = runDes({ workload: loadWorkload('agentic', { duration: 60, rate: 0.5, seed: 2 }), policy: 'ear', engines: 2, profile: 'h100-llama-3.1-8b', seed: 1 });
  const s = r.summary;
  assert.equal(s.requests.completed, s.requests.sent);
  assert.ok(s.migrations.count > 0, 'two engines at this rate run hot: sessions move');
  assert.equal(s.migrations.thrash, 0, 'no session moves twice within tCool');
  assert.ok(s.timeline.migrations.length === s.migrations.count);
  const sticky = runDes({ workload: loadWorkload('agentic', { duration: 60, rate: 0.5, seed: 2 }), policy: 'sticky', engines: 2, profile: 'h100-llama-3.1-8b', seed: 1 });
  assert.equal(sticky.summary.migrations.count, 0, 'sticky never moves a session');
});

test('the isolated time follows the profile: cached blocks skip prefill, each further token is one batch-1 step', () => {
  const p = loadProfile('h100-llama-3.1-8b');
  const s = p.step;
  const cold = isolatedServiceTime(p, 160, 0, 1);
  assert.ok(Math.abs(cold - (s.stepOverhead + s.prefillPerToken * 160 + s.prefillAttnPerTokenPair * 160 * 80)) < 1e-12);
  // 128 cached tokens (8 blocks of 16): only 32 are computed, attending to 128 past tokens
  const warm = isolatedServiceTime(p, 160, 130, 3);
  const prefill = s.stepOverhead + s.prefillPerToken * 32 + s.prefillAttnPerTokenPair * 32 * (128 + 16);
  const decode = [161, 162].reduce((t, ctx) => t + s.stepOverhead + s.decodePerSeq + s.decodePerContextToken * ctx, 0);
  assert.ok(Math.abs(warm - (prefill + decode)) < 1e-12);
});

test('e2e smoke: the real gateway in front of two simulated engines serves a short workload without failures', async () => {
  const w = loadWorkload('agentic', { duration: 15, rate: 0.4, seed: 5 });
  const r = await runE2e({ workload: w, policy: 'sticky', engines: 2, profile: 'h100-llama-3.1-8b', seed: 1, timeScale: 0.05 });
  const s = r.summary;
  assert.ok(s.requests.sent > 0);
  assert.equal(s.requests.failed, 0, JSON.stringify(s.failures));
  assert.equal(s.requests.completed, s.requests.sent);
  assert.ok(s.apc.value > 0.3, `APC ${s.apc.value}`);
  // The gateway's cost: its decision times (one sample per routed request, from its histogram) and the latency it
  // adds to every request (client TTFT minus the engine's own, in wall seconds).
  assert.ok(s.gateway.decision.count >= s.requests.sent, `decisions ${s.gateway.decision.count}`);
  assert.equal(s.admissionWait.count, s.requests.sent, 'every request was admitted once (the gateway\'s own count)');
  assert.equal(s.gateway.addedLatency.count, s.requests.completed);
  // Wall µs, a part of each request's TTFT (workload µs, × the time scale on the wall clock): a bound in the
  // run's own terms, where a fixed one (it was 1 s) is the machine's pace.
  assert.ok(s.gateway.addedLatency.p50 > 0 && s.gateway.addedLatency.p50 <= s.ttft.max * 0.05, `added p50 ${s.gateway.addedLatency.p50} µs, TTFT max ${s.ttft.max} µs`);
});

test('e2e in precise mode: the engines publish KV events, the gateway follows them, and the run completes', async () => {
  const w = loadWorkload('agentic', { duration: 10, rate: 0.4, seed: 6 });
  const r = await runE2e({ workload: w, policy: 'prefix-cache', engines: 2, profile: 'h100-llama-3.1-8b', seed: 2, timeScale: 0.05, kvEvents: 'precise' });
  const s = r.summary;
  assert.ok(s.requests.sent > 0);
  assert.equal(s.requests.failed, 0, JSON.stringify(s.failures));
  assert.equal(s.requests.completed, s.requests.sent);
});

test('ear eval writes results.json and report.md, and refuses a bad flag', () => {
  const out = mkdtempSync(join(tmpdir(), 'ear-eval-'));
  const bin = new URL('../../../src/cli/ear.js', import.meta.url).pathname;
  const ok = spawnSync(process.execPath, [bin, 'eval', '--duration', '30', '--engines', '2', '--policies', 'round-robin,sticky', '--no-plots', '--out', out], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8'));
  assert.deepEqual(results.policies.map((p: { policy: string }) => p.policy), ['round-robin', 'sticky']);
  assert.equal(results.config.engines, 2);
  assert.match(readFileSync(join(out, 'report.md'), 'utf8'), /\| `sticky` \|/);
  assert.match(readFileSync(join(out, 'report.md'), 'utf8'), /- prefix index: approximate \(routing decisions only\)/);
  assert.equal(results.config.kvEvents, 'approximate');
  const badMode = spawnSync(process.execPath, [bin, 'eval', '--set', 'kvEvents=exact'], { encoding: 'utf8' });
  assert.equal(badMode.status, 2);
  assert.match(badMode.stderr, /kvEvents must be approximate or precise/);
  const bad = spawnSync(process.execPath, [bin, 'eval', '--policies', 'nope'], { encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /unknown policy "nope"/);
});

test('ear eval --sweep scheduler runs each scheduler through the lab\'s host; a capacity signal makes requests queue', () => {
  const out = mkdtempSync(join(tmpdir(), 'ear-eval-'));
  const bin = new URL('../../../src/cli/ear.js', import.meta.url).pathname;
  const ok = spawnSync(process.execPath, [bin, 'eval', '--duration', '30', '--engines', '2', '--policies', 'least-load', '--no-plots', '--out', out,
    '--set', 'maxConcurrent=1', '--scheduler', 'off', '--sweep', 'scheduler=fcfs,atlas'], { encoding: 'utf8' });
  assert.equal(ok.status, 0, ok.stderr);
  const results = JSON.parse(readFileSync(join(out, 'results.json'), 'utf8'));
  assert.equal(results.config.scheduler, 'off');
  const points = results.sweeps[0].points as Array<{ value: string; metrics: { admissionWait: { count: number; max: number }; requests: { sent: number; completed: number } } }>;
  assert.deepEqual(points.map((p) => p.value), ['fcfs', 'atlas']);
  const off = results.policies[0].metrics;
  assert.equal(off.admissionWait.max, 0, 'off never queues');
  for (const p of points) {
    assert.equal(p.metrics.requests.completed, p.metrics.requests.sent, p.value);
    assert.ok(p.metrics.admissionWait.max > 0, `${p.value}: one request per engine at a time, so some waited`);
  }
  const bad = spawnSync(process.execPath, [bin, 'eval', '--scheduler', 'lifo'], { encoding: 'utf8' });
  assert.equal(bad.status, 2);
  assert.match(bad.stderr, /--scheduler must be one of off, fcfs, plas, atlas, vtc/);
});
