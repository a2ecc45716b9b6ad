// The lab tells priority engines the gateway's order through the gateway's own mapping (issue 23 item 2): each
// request reaches its DES engine with the priority its admission rank maps to, every KV leg (here pd-static's
// prefill leg, an export) with the most urgent value; fcfs engines, or a run that sends none (a stock router),
// get none.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SimEngine } from '../../../src/sim/engine.js';
import type { SimRequest } from '../../../src/sim/engine-types.js';
import { runDes, type DesRunOptions } from '../../../src/eval/drivers/des.js';
import { enginePriority, urgentEnginePriority } from '../../../src/core/engine-priority.js';
import type { OpenLoopWorkload, OpenRequest } from '../../../src/eval/workloads/index.js';

let nextBlock = 1;
function open (sessionId: string, turn: number, at: number, promptTokens: number, keepBlocks = 0): OpenRequest {
  const newBlocks = Uint32Array.from({ length: Math.ceil(promptTokens / 16) - keepBlocks }, () => nextBlock++);
  return { at, sessionId, turn, final: turn === 1, outputTokens: 4, keepBlocks, newBlocks, promptTokens };
}

function workload (): OpenLoopWorkload {
  const requests = [open('a', 0, 0, 2000), open('b', 0, 0.1, 2000), open('a', 1, 20, 3000, 125), open('b', 1, 20.1, 3000, 125)];
  return { kind: 'open', name: 'prio', blockSize: 16, seed: 1, sharedPrefixBlocks: new Set(), config: {}, requests };
}

/** The priority each engine request of a run carried, by id. */
function priorities (o: Partial<DesRunOptions>): Map<string, number | undefined> {
  const add = SimEngine.prototype.addRequest;
  const seen = new Map<string, number | undefined>();
  SimEngine.prototype.addRequest = function (this: SimEngine, r: SimRequest): void {
    seen.set(r.id, r.priority);
    add.call(this, r);
  };
  try {
    const s = runDes({ workload: workload(), policy: 'pd-static', engines: 2, profile: 'h100-llama-3.1-8b', seed: 1, kvConnector: 'nixl', scheduler: 'atlas', ...o }).summary;
    assert.equal(s.requests.completed, 4);
  } finally {
    SimEngine.prototype.addRequest = add;
  }
  return seen;
}

test('priority engines: requests at their rank\'s value, prefill legs at the most urgent', () => {
  const seen = priorities({ schedulingPolicy: 'priority' });
  assert.equal(seen.size, 8, [...seen.keys()].join(', '));
  for (const [id, p] of seen) {
    if (id.endsWith('#export')) assert.equal(p, urgentEnginePriority('vllm'), id);
    else assert.equal(p, enginePriority('vllm', { classRank: 1, order: 0 }), `${id}: a new session's call, normal class, level 0`);
  }
});

test('fcfs engines, or a run as a stock router (sendEnginePriority false), send none', () => {
  for (const o of [{ schedulingPolicy: 'fcfs' as const }, { schedulingPolicy: 'priority' as const, sendEnginePriority: false }]) {
    const seen = priorities(o);
    assert.equal(seen.size, 8);
    for (const [id, p] of seen) assert.equal(p, undefined, `${JSON.stringify(o)} ${id}`);
  }
});
