// `ear eval --set schedulingPolicy=… --set longPrefillTokenThreshold=…` (and --sweep over them) reach every
// engine of a des run as vLLM's --scheduling-policy and --long-prefill-token-threshold, and bad values are
// usage errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/eval.js';
import { DesHost } from '../../src/sim/des.js';
import type { SimEngineOptions } from '../../src/sim/engine.js';

async function evalCli (args: string[]): Promise<{ code: number; err: string; engines: SimEngineOptions[] }> {
  const log = console.log, error = console.error;
  const addEngine = DesHost.prototype.addEngine;
  const engines: SimEngineOptions[] = [];
  DesHost.prototype.addEngine = function (this: DesHost, opts: SimEngineOptions): number {
    engines.push(opts);
    return addEngine.call(this, opts);
  };
  let err = '';
  console.log = () => {};
  console.error = (...a: unknown[]) => { err += a.join(' ') + '\n'; };
  try { return { code: await main(args), err, engines }; } finally { console.log = log; console.error = error; DesHost.prototype.addEngine = addEngine; }
}

const small = ['--policies', 'sticky', '--engines', '2', '--profile', 'h100-llama-3.1-8b', '--set', 'sessions=4', '--set', 'rate=2', '--set', 'turnsMedian=3',
  '--set', 'turnsSigma=0.2', '--no-plots'];

test('--set schedulingPolicy and longPrefillTokenThreshold reach every des engine and the results\' config', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-eval-engine-'));
  try {
    const r = await evalCli([...small, '--set', 'schedulingPolicy=priority', '--set', 'longPrefillTokenThreshold=512', '--out', dir]);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.engines.length, 2);
    for (const e of r.engines) {
      assert.equal(e.schedulingPolicy, 'priority');
      assert.equal(e.longPrefillTokenThreshold, 512);
    }
    const res = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'));
    assert.deepEqual(res.config.engine, { schedulingPolicy: 'priority', longPrefillTokenThreshold: 512 });
    // Not given: vLLM's defaults, left to the engine.
    const d = await evalCli([...small, '--out', dir]);
    assert.equal(d.code, 0, d.err);
    for (const e of d.engines) assert.equal(e.schedulingPolicy ?? 'fcfs', 'fcfs');
  } finally { rmSync(dir, { recursive: true }); }
});

test('--sweep schedulingPolicy=fcfs,priority runs each point on engines of that policy', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-eval-engine-'));
  try {
    const r = await evalCli([...small, '--sweep', 'schedulingPolicy=fcfs,priority', '--out', dir]);
    assert.equal(r.code, 0, r.err);
    // The main run, then one per sweep point, two engines each.
    assert.deepEqual(r.engines.map((e) => e.schedulingPolicy ?? 'fcfs'), ['fcfs', 'fcfs', 'fcfs', 'fcfs', 'priority', 'priority']);
    const res = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'));
    assert.deepEqual(res.sweeps[0].points.map((p: { value: string }) => p.value), ['fcfs', 'priority']);
  } finally { rmSync(dir, { recursive: true }); }
});

test('bad engine knobs are usage errors', async () => {
  for (const [arg, message] of [['schedulingPolicy=sjf', /--set schedulingPolicy must be one of fcfs, priority, got "sjf"/],
    ['longPrefillTokenThreshold=-1', /--set longPrefillTokenThreshold must be an integer ≥ 0, got -1/],
    ['longPrefillTokenThreshold=2.5', /must be an integer/]] as const) {
    const bad = await evalCli(['--policies', 'sticky', '--set', arg, '--out', '/nonexistent']);
    assert.equal(bad.code, 2, arg);
    assert.match(bad.err, message);
  }
  const sweep = await evalCli(['--policies', 'sticky', '--sweep', 'schedulingPolicy=fcfs,lifo', '--out', '/nonexistent']);
  assert.equal(sweep.code, 2);
  assert.match(sweep.err, /schedulingPolicy must be one of fcfs, priority, got "lifo"/);
});
