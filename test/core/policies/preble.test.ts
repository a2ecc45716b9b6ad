import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../../../src/core/policies/index.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

// Prompts of 100 blocks of 16 tokens (1600 tokens).
const route = (loads: PodLoad[], config: Record<string, unknown> = {}, random = 0.5) =>
  createPolicy('preble', config).route(request(loads, { random }), cluster(loads), 0);

test('preble: exploit only when cached tokens outnumber the rest', () => {
  // 51 blocks = 816 cached > 784 missed: exploit pod 0, though pod 1 is lighter (within 1.5×)
  const loads: PodLoad[] = [{ matched: 51, pendingPrefill: 900 }, { pendingPrefill: 700 }];
  assert.deepEqual(route(loads), { pod: 0, reason: 'exploit' });
  // 50 blocks = 800 = 800: not more, explore: 900 + 800 vs 700 + 1600 → still pod 0, but as exploration
  loads[0].matched = 50;
  assert.deepEqual(route(loads), { pod: 0, reason: 'explore' });
  // exploration ties at 1300 + 800 = 500 + 1600 = 2100: broken at random (rebalancing kept out of the way)
  const tie: PodLoad[] = [{ matched: 50, pendingPrefill: 1300 }, { pendingPrefill: 500 }];
  assert.deepEqual([0, 0.99].map((r) => route(tie, { rebalanceRatio: 10 }, r).pod), [0, 1]);
});

test('preble: among pods with the longest match, the least loaded; explore weighs load plus this prefill', () => {
  const loads: PodLoad[] = [{ matched: 90, running: 2 }, { matched: 90, running: 1 }, { matched: 10, running: 1 }];
  assert.deepEqual(route(loads), { pod: 1, reason: 'exploit' });
  // explore: pod 0 load 300 + 960 missed = 1260, pod 1 250 + 1600 = 1850: pod 0, and 300 ≤ 1.5 · 250
  const explore: PodLoad[] = [{ matched: 40, pendingPrefill: 300 }, { pendingPrefill: 250 }];
  assert.deepEqual(route(explore), { pod: 0, reason: 'explore' });
  // empty index: every pod would compute the whole prompt, so the least loaded (ties at random)
  const none: PodLoad[] = [{ pendingPrefill: 50 }, { pendingPrefill: 10 }, { pendingPrefill: 10 }];
  assert.deepEqual([0, 0.9].map((r) => route(none, {}, r)), [{ pod: 1, reason: 'explore' }, { pod: 2, reason: 'explore' }]);
});

test('preble: the chosen pod over 1.5× the lightest pod\'s load gives the request to the lightest', () => {
  const loads: PodLoad[] = [{ matched: 90, pendingPrefill: 1000 }, { pendingPrefill: 600 }, { pendingPrefill: 800 }];
  assert.deepEqual(route(loads), { pod: 1, reason: 'rebalance' }); // 1000 > 900
  loads[0].pendingPrefill = 900;
  assert.deepEqual(route(loads), { pod: 0, reason: 'exploit' }); // 900 ≤ 900
  assert.deepEqual(route(loads, { rebalanceRatio: 1.2 }), { pod: 1, reason: 'rebalance' });
  // an idle pod takes the request from any loaded one
  const idle: PodLoad[] = [{ matched: 100, running: 1 }, {}];
  assert.deepEqual(route(idle), { pod: 1, reason: 'rebalance' });
});

test('preble: load is pending prefill plus decodeCostTokens per running request', () => {
  // pod 0: 2 running · 256 = 512; pod 1: 400 pending: pod 1 is the lighter
  const loads: PodLoad[] = [{ running: 2 }, { pendingPrefill: 400 }];
  assert.equal(route(loads).pod, 1);
  assert.equal(route(loads, { decodeCostTokens: 100 }).pod, 0); // 200 < 400
  // the gateway's in-flight count stands in when the engine's running count is stale
  const stale: PodLoad[] = [{ inFlight: 2 }, { pendingPrefill: 400 }];
  assert.equal(route(stale).pod, 1);
  assert.throws(() => createPolicy('preble', { rebalanceRatio: 0.5 }), /knob "rebalanceRatio" must be a number in \[1, ∞\]/);
  assert.throws(() => createPolicy('preble', { threshold: 2 }), /unknown knob "threshold"/);
});
