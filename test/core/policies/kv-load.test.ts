import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../../../src/core/policies/index.js';
import { KV_LOAD_DEFAULTS, kvLoadCosts } from '../../../src/core/policies/kv-load.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

// Fixture pods: block size 16, 10000 KV blocks; prompts of 100 blocks (1600 tokens).
// cost = prefillScale · (uncached + pending) + held + pending + added, in blocks.
const loads: PodLoad[] = [
  // (100 − 80) + 160/16 = 30; 0.01 · 10000 + 10 + (100 − 80) = 130: 160
  { matched: 80, kvUsage: 0.01, pendingPrefill: 160 },
  // 100; 100: 200
  {},
  // 50 matched, all offloaded, credit 0.5 → 25 cached: 75; none in GPU memory, 100 added: 175
  { matched: 50, offloaded: 50 }
];

const close = (actual: number[], expected: number[]) =>
  actual.forEach((a, i) => assert.ok(Math.abs(a - expected[i]) < 1e-9, `cost ${i}: ${a} ≠ ${expected[i]}`));

test('kv-load: cost = prefillScale · prefill blocks + decode blocks, by hand', () => {
  close(kvLoadCosts(KV_LOAD_DEFAULTS, request(loads), cluster(loads)), [160, 200, 175]);
  assert.deepEqual(createPolicy('kv-load').route(request(loads), cluster(loads), 0), { pod: 0, reason: 'least-cost' });
  // credit 1: an offloaded block saves its whole prefill (50 + 100 = 150), though it still has to come back
  close(kvLoadCosts({ ...KV_LOAD_DEFAULTS, offloadCredit: 1 }, request(loads), cluster(loads)), [160, 200, 150]);
  assert.equal(createPolicy('kv-load', { offloadCredit: 1 }).route(request(loads), cluster(loads), 0).pod, 2);
  // prefillScale 2 weighs the prefill term twice
  close(kvLoadCosts({ ...KV_LOAD_DEFAULTS, prefillScale: 2 }, request(loads), cluster(loads)), [190, 300, 250]);
  // prefillScale 0 is memory load only: pods 1 and 2 tie at 100, broken at random
  assert.deepEqual([0, 0.99].map((r) => createPolicy('kv-load', { prefillScale: 0 }).route(request(loads, { random: r }), cluster(loads), 0).pod), [1, 2]);
  // a partial last block counts as a fraction of prefill (not of memory)
  close(kvLoadCosts(KV_LOAD_DEFAULTS, request(loads, { promptTokens: 1608 }), cluster(loads)), [160.5, 200.5, 175.5]);
  // a cache longer than the prompt never makes the prefill term negative: 50-block prompt
  close(kvLoadCosts(KV_LOAD_DEFAULTS, request(loads, { promptTokens: 800, totalBlocks: 50 }), cluster(loads)), [120, 100, 75]);
});

test('kv-load: with temperature, a softmax over range-normalised costs sampled with the host number', () => {
  // costs 160, 200, 175; T = 1: weights e^0, e^(−40/40), e^(−15/40) → p ≈ 0.4866, 0.1790, 0.3344
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
  // 120 + 120, 100 + 110, 101 + 121
  assert.equal(createPolicy('kv-load').route(request(idle), cluster(idle), 0).pod, 1);
  assert.throws(() => createPolicy('kv-load', { offloadCredit: 2 }), /knob "offloadCredit" must be a number in \[0, 1\]/);
  assert.throws(() => createPolicy('kv-load', { temperature: Number.NaN }), TypeError);
  assert.throws(() => createPolicy('kv-load', { overlapWeight: 1 }), /unknown knob "overlapWeight"; known: prefillScale, temperature, offloadCredit/);
});
