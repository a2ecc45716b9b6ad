// The lab short of KV (issue 31 part 4), on a tiny fixed-seed run: two engines whose KV holds a few sessions'
// contexts (3 engines of 8,000 blocks, 24 sessions). ear with KV room (shortCost off) moves sessions whose engine
// cannot hold them before their turn runs, and the engines preempt less than under ear without it (kvAware=false,
// ear before issue 31); ear by default places by kv-load's cost there. Every figure compared is a pure function of
// the seed (virtual time), never of the wall clock.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runDes } from '../../../src/eval/drivers/des.js';
import { loadWorkload } from '../../../src/eval/workloads/index.js';
import { createPolicy, registerPolicy } from '../../../src/core/policies/index.js';

/** ear with its decisions' reasons counted, under a name of its own. */
function counted (name: string, knobs: Record<string, unknown>): Map<string, number> {
  const reasons = new Map<string, number>();
  registerPolicy(name, () => {
    const p = createPolicy('ear', knobs);
    return { name, route: (r, c, now) => { const d = p.route(r, c, now); reasons.set(d.reason, (reasons.get(d.reason) ?? 0) + 1); return d; } };
  });
  return reasons;
}

test('des short of KV: ear moves sessions off engines that cannot hold them, before their turn, and the engines preempt less', () => {
  const w = loadWorkload('agentic', { sessions: 24, rate: 0.5, seed: 1 });
  const run = (policy: string) => runDes({ workload: w, policy, engines: 3, profile: 'h20-qwen3-coder', seed: 2, numGpuBlocks: 8000 });
  // shortCost=false: these engines are short of KV (8,000 blocks < 3 × the largest context), where ear by default
  // places by kv-load's cost (the next test); here its KV room rules are what is under test.
  const kvReasons = counted('ear-kv-test', { shortCost: false });
  const oldReasons = counted('ear-old-test', { kvAware: false, shortCost: false });
  const kv = run('ear-kv-test');
  const old = run('ear-old-test');
  for (const r of [kv, old]) {
    assert.equal(r.summary.requests.incomplete, 0);
    assert.equal(r.summary.requests.failed, 0);
    assert.equal(r.stall, null);
  }
  assert.ok((kvReasons.get('kv-move') ?? 0) > 0, `kv-move decisions: ${JSON.stringify(Object.fromEntries(kvReasons))}`);
  assert.equal(oldReasons.get('kv-move') ?? 0, 0);
  assert.ok(kv.engineKv.preemptions < old.engineKv.preemptions,
    `preemptions with KV room ${kv.engineKv.preemptions}, without ${old.engineKv.preemptions}`);
  const share = (r: typeof kv) => r.summary.recompute.share ?? 0;
  assert.ok(share(kv) < share(old), `recompute share with KV room ${share(kv)}, without ${share(old)}`);
  // The same run again gives the same figures (the DES is deterministic for a seed).
  const again = run('ear-kv-test');
  assert.deepEqual(again.engineKv, kv.engineKv);
  assert.deepEqual(again.summary.recompute, kv.summary.recompute);
});

test('des short of KV: ear by default places by kv-load\'s cost, and a turn that leaves its engine moves no KV', () => {
  const w = loadWorkload('agentic', { sessions: 24, rate: 0.5, seed: 1 });
  const reasons = counted('ear-short-test', {});
  const r = runDes({ workload: w, policy: 'ear-short-test', engines: 3, profile: 'h20-qwen3-coder', seed: 2, numGpuBlocks: 8000 });
  assert.equal(r.summary.requests.incomplete, 0);
  assert.equal(r.stall, null);
  const seen = JSON.stringify(Object.fromEntries(reasons));
  // the host's largest context reached the policy: turns stayed and left by cost
  assert.ok((reasons.get('short-cost-leave') ?? 0) > 0 && (reasons.get('short-cost-host') ?? 0) > 0, seen);
  for (const reason of ['kv-move', 'migrate']) assert.equal(reasons.get(reason) ?? 0, 0, seen);
  assert.equal(r.summary.migrations.count, 0);
});
