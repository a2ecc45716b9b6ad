// The simulator's DES behaviour, pinned: fixed-seed `ear eval --driver des` runs, in process, give the results.json
// kept in test/fixtures/des-golden/<scheduling policy>/, byte for byte but for what a run cannot repeat: createdAt,
// commit, machine, the --out directory in config.command, and the routing decisions' wall-clock figures
// (gateway.decision: only its count is the run's). Each run exercises what the engine core does besides plain
// batching: its waiting-queue policy, chunked prefill, preemptions under a small KV pool, NIXL export holds and
// imports, and offload-store saves and loads. It runs with shortCost=false: its 5000 blocks are short of KV for
// the workload's contexts, and ear's cost placement there would move no KV (no NIXL imports to pin). After a deliberate change of the engine's behaviour, rewrite a
// fixture with its command (from the repository root, after a build):
//   node dist/src/cli/ear.js eval <argv(policy)> --out test/fixtures/des-golden/<policy> && rm test/fixtures/des-golden/<policy>/report.md
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { main } from '../../src/cli/eval.js';
import { SimEngine, type SchedulingPolicy } from '../../src/sim/engine.js';
import type { StepResult } from '../../src/sim/engine-types.js';

const fixture = (policy: SchedulingPolicy): string => fileURLToPath(new URL(`../../../test/fixtures/des-golden/${policy}/results.json`, import.meta.url));
const argv = (policy: SchedulingPolicy): string[] => ['--driver', 'des', '--workload', 'agentic', '--duration', '30', '--set', 'rate=0.5',
  '--policies', 'ear-proactive', '--engines', '2', '--profile', 'h100-llama-3.1-8b', '--seed', '1', '--set', `schedulingPolicy=${policy}`,
  '--set', 'longPrefillTokenThreshold=512', '--set', 'kvConnectors=nixl+shared-store', '--set', 'kvConnector=nixl',
  '--set', 'numGpuBlocks=5000', '--set', 'shortCost=false', '--no-plots'];

/** results.json as written, with what differs between two runs of the same seed set to fixed values. */
function deterministic (text: string): string {
  const r = JSON.parse(text);
  r.createdAt = null;
  r.commit = null;
  r.machine = null;
  r.config.command = r.config.command.replace(/ --out \S+$/, ' --out DIR');
  for (const p of r.policies) p.metrics.gateway.decision = { count: p.metrics.gateway.decision.count };
  return JSON.stringify(r, null, 2);
}

for (const policy of ['fcfs', 'priority'] as const) {
  test(`a fixed-seed DES eval run on ${policy} engines writes the results.json kept in test/fixtures/des-golden/${policy}`, async () => {
    const engines = new Set<SimEngine>();
    const step = SimEngine.prototype.step;
    SimEngine.prototype.step = function (this: SimEngine, now: number): StepResult {
      engines.add(this);
      return step.call(this, now);
    };
    const out = mkdtempSync(join(tmpdir(), `ear-des-golden-${policy}-`));
    const log = console.log;
    try {
      console.log = () => {};
      assert.equal(await main([...argv(policy), '--out', out]), 0);
    } finally {
      console.log = log;
      SimEngine.prototype.step = step;
    }
    try {
      assert.equal(deterministic(readFileSync(join(out, 'results.json'), 'utf8')), deterministic(readFileSync(fixture(policy), 'utf8')));
    } catch (err) {
      console.error(`the run's results.json, kept: ${join(out, 'results.json')}`);
      throw err;
    }
    rmSync(out, { recursive: true, force: true });
    // What the fixture covers: the engine paths beyond plain batching were taken.
    let preemptions = 0;
    let imported = 0;
    let loads = 0;
    let saved = 0;
    for (const e of engines) {
      assert.equal(e.schedulingPolicy, policy);
      preemptions += e.stats().preemptions;
      imported += e.importedTokens;
      loads += e.offloadLoads;
      saved += e.offloadSavedBlocks;
    }
    assert.equal(engines.size, 2);
    assert.ok(preemptions > 0, 'preemptions');
    assert.ok(imported > 0, 'NIXL imports (of held exports)');
    assert.ok(loads > 0 && saved > 0, 'offload-store loads and saves');
  });
}
