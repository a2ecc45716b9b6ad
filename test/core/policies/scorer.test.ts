import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../../../src/core/policies/index.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

const route = (loads: PodLoad[], config: Record<string, unknown> = {}, random = 0.5, sessions?: Map<bigint, { host: number }>) =>
  createPolicy('scorer', config).route(request(loads, { random, sessionKey: sessions ? 1n : null }), cluster(loads, { sessions }), 0);

test('scorer: default weights prefix 3, queue 2, KV utilisation 2 summed', () => {
  // A: 3·1 + 2·0 + 2·(1 − 0.9) = 3.2; B: 3·0 + 2·1 + 2·(1 − 0.1) = 3.8
  const loads: PodLoad[] = [{ matched: 100, waiting: 10, kvUsage: 0.9 }, { matched: 0, waiting: 0, kvUsage: 0.1 }];
  assert.deepEqual(route(loads), { pod: 1, reason: 'max-score' });
  // prefix 5: A 5.2 beats B 3.8
  assert.equal(route(loads, { prefixWeight: 5 }).pod, 0);
  // half a match, prefix 5, no KV term: A = 5·0.5 = 2.5 beats B = 2·1 = 2
  loads[0].matched = 50;
  assert.equal(route(loads, { prefixWeight: 5, kvUtilizationWeight: 0 }).pod, 0);
});

test('scorer: queue and running are min-max normalised; equal queues are neutral and ties go at random', () => {
  // waiting 0, 5, 10 → 1, 0.5, 0: weighted-random picks pod 0 for r < 2/3, pod 1 above, pod 2 never
  const loads: PodLoad[] = [{ waiting: 0 }, { waiting: 5 }, { waiting: 10 }];
  const only = { prefixWeight: 0, kvUtilizationWeight: 0, queueWeight: 1, picker: 'weighted-random' };
  assert.deepEqual([0, 0.66, 0.67, 0.999].map((r) => route(loads, only, r).pod), [0, 0, 1, 1]);
  // queue 100 vs 110 scores like 0 vs 10: only the spread matters
  const shifted: PodLoad[] = [{ waiting: 100 }, { waiting: 105 }, { waiting: 110 }];
  assert.deepEqual([0, 0.66, 0.67, 0.999].map((r) => route(shifted, only, r).pod), [0, 0, 1, 1]);
  // equal queues: all 1, a three-way tie under max-score
  const equal: PodLoad[] = [{ waiting: 7 }, { waiting: 7 }, { waiting: 7 }];
  assert.deepEqual([0, 0.5, 0.99].map((r) => route(equal, { queueWeight: 1 }, r).pod), [0, 1, 2]);
  // running, likewise
  const running: PodLoad[] = [{ running: 9 }, { running: 1 }, { running: 5 }];
  assert.equal(route(running, { prefixWeight: 0, queueWeight: 0, kvUtilizationWeight: 0, runningWeight: 1 }).pod, 1);
});

test('scorer: weighted-random draws in proportion to the total score; all zero draws uniformly', () => {
  // prefix only: matches 60 and 20 of 100 → totals 1.8 and 0.6 (3 : 1); pod 2 (no match) is never drawn
  const loads: PodLoad[] = [{ matched: 60 }, { matched: 20 }, {}];
  const cfg = { queueWeight: 0, kvUtilizationWeight: 0, picker: 'weighted-random' };
  const counts = [0, 0, 0];
  for (let i = 0; i < 1000; i++) counts[route(loads, cfg, (i + 0.5) / 1000).pod]++;
  assert.deepEqual(counts, [750, 250, 0]);
  const zero = route([{}, {}, {}, {}], cfg, 0.6);
  assert.deepEqual(zero, { pod: 2, reason: 'uniform-random' });
});

test('scorer: prefix score caps both sides at prefixMaxBlocks; session affinity scores the host', () => {
  const long: PodLoad[] = [{ matched: 256 }, { matched: 1000 }];
  const req = (r: number) => request(long, { totalBlocks: 1000, random: r });
  const p = createPolicy('scorer');
  // both hold the first 256 blocks: a tie
  assert.deepEqual([0, 0.99].map((r) => p.route(req(r), cluster(long), 0).pod), [0, 1]);
  assert.equal(createPolicy('scorer', { prefixMaxBlocks: 1000 }).route(req(0), cluster(long), 0).pod, 1);

  const loads: PodLoad[] = [{ matched: 100 }, {}, {}];
  const sessions = new Map([[1n, { host: 2 }]]);
  assert.equal(route(loads, {}, 0.5, sessions).pod, 0);
  assert.equal(route(loads, { sessionAffinityWeight: 4 }, 0.5, sessions).pod, 2);
});

test('scorer: knobs are checked', () => {
  assert.throws(() => createPolicy('scorer', { picker: 'random' }), /knob "picker" must be one of "max-score", "weighted-random"/);
  assert.throws(() => createPolicy('scorer', { prefix: 3 }), /unknown knob "prefix"/);
  assert.throws(() => createPolicy('scorer', { prefixMaxBlocks: 0.5 }), /an integer ≥ 1/);
});
