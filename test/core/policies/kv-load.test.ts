import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../../../src/core/policies/index.js';
import { KV_LOAD_DEFAULTS, kvLoadCosts } from '../../../src/core/policies/kv-load.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

// Fixture pods: block size 16, 10000 KV blocks; prompts of 100 blocks (1600 tokens).
const loads: PodLoad[] = [
  // 1·(100 − 80) + 0.003·10000 + 160/16 = 20 + 30 + 10 = 60
  { matched: 80, kvUsage: 0.003, pendingPrefill: 160 },
  // 100 + 0 + 0
  {},
  // 50 matched, all offloaded at credit 0.5 → 25 cached: 75
  { matched: 50, offloaded: 50 }
];

const close = (actual: number[], expected: number[]) =>
  actual.forEach((a, i) => assert.ok(Math.abs(a - expected[i]) < 1e-9, `cost ${i}: ${a} ≠ ${expected[i]}`));

test('kv-load: cost = prefillScale · max(prompt − cached, 0) + decode blocks, by hand', () => {
  close(kvLoadCosts(KV_LOAD_DEFAULTS, request(loads), cluster(loads)), [60, 100, 75]);
  assert.deepEqual(createPolicy('kv-load').route(request(loads), cluster(loads), 0), { pod: 0, reason: 'least-cost' });
  // credit 1: an offloaded block counts as cached → 50
  close(kvLoadCosts({ ...KV_LOAD_DEFAULTS, offloadCredit: 1 }, request(loads), cluster(loads)), [60, 100, 50]);
  assert.equal(createPolicy('kv-load', { offloadCredit: 1 }).route(request(loads), cluster(loads), 0).pod, 2);
  // prefillScale 2 weighs the uncached part twice: 80, 200, 150
  close(kvLoadCosts({ ...KV_LOAD_DEFAULTS, prefillScale: 2 }, request(loads), cluster(loads)), [80, 200, 150]);
  // prefillScale 0 is pure load: pods 1 and 2 tie at 0, broken at random
  assert.deepEqual([0, 0.99].map((r) => createPolicy('kv-load', { prefillScale: 0 }).route(request(loads, { random: r }), cluster(loads), 0).pod), [1, 2]);
  // a cache longer than the prompt never makes the prefill term negative; a partial block counts as a fraction
  close(kvLoadCosts(KV_LOAD_DEFAULTS, request(loads, { promptTokens: 1608 }), cluster(loads)), [60.5, 100.5, 75.5]);
  close(kvLoadCosts(KV_LOAD_DEFAULTS, request(loads, { promptTokens: 800 }), cluster(loads)), [40, 50, 25]);
});

test('kv-load: with temperature, a softmax over range-normalised costs sampled with the host number', () => {
  // costs 60, 100, 75; T = 1: weights e^0, e^(−40/40), e^(−15/40) → p ≈ 0.4866, 0.1790, 0.3344
  const p = createPolicy('kv-load', { temperature: 1 });
  const pick = (r: number) => p.route(request(loads, { random: r }), cluster(loads), 0);
  assert.deepEqual(pick(0.48), { pod: 0, reason: 'softmax-sample' });
  assert.equal(pick(0.49).pod, 1);
  assert.equal(pick(0.66).pod, 1);
  assert.equal(pick(0.67).pod, 2);
  const counts = [0, 0, 0];
  for (let i = 0; i < 10000; i++) counts[pick((i + 0.5) / 10000).pod]++;
  const w = [1, Math.exp(-1), Math.exp(-15 / 40)];
  const sum = w[0] + w[1] + w[2];
  counts.forEach((c, i) => assert.ok(Math.abs(c / 10000 - w[i] / sum) < 1e-3, `pod ${i}: ${c}`));
  // hotter: flatter
  const hot = createPolicy('kv-load', { temperature: 100 });
  const hotCounts = [0, 0, 0];
  for (let i = 0; i < 3000; i++) hotCounts[hot.route(request(loads, { random: (i + 0.5) / 3000 }), cluster(loads), 0).pod]++;
  assert.ok(hotCounts.every((c) => c > 950 && c < 1050), String(hotCounts));
  // all costs equal: uniform
  const even: PodLoad[] = [{}, {}, {}, {}];
  assert.deepEqual([0.1, 0.3, 0.6, 0.9].map((r) => p.route(request(even, { random: r }), cluster(even), 0).pod), [0, 1, 2, 3]);
});

test('kv-load: empty index → the least loaded; knobs are checked', () => {
  const idle: PodLoad[] = [{ pendingPrefill: 320 }, { kvUsage: 0.001 }, { pendingPrefill: 16, kvUsage: 0.002 }];
  // 100 + 20, 100 + 10, 100 + 1 + 20
  assert.equal(createPolicy('kv-load').route(request(idle), cluster(idle), 0).pod, 1);
  assert.throws(() => createPolicy('kv-load', { offloadCredit: 2 }), /knob "offloadCredit" must be a number in \[0, 1\]/);
  assert.throws(() => createPolicy('kv-load', { temperature: Number.NaN }), TypeError);
  assert.throws(() => createPolicy('kv-load', { overlapWeight: 1 }), /unknown knob "overlapWeight"; known: prefillScale, temperature, offloadCredit/);
});
