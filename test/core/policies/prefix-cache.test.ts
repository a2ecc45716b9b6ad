import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../../../src/core/policies/index.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

const route = (loads: PodLoad[], config: Record<string, unknown> = {}, random = 0.5) =>
  createPolicy('prefix-cache', config).route(request(loads, { random }), cluster(loads), 0);

test('prefix-cache: an imbalance above the threshold sends the request to a least-request pod, whatever the match', () => {
  // max − min = 17 > 8 (the source default): the full match on pod 0 is ignored; pods 1 and 2 tie at the least
  const loads: PodLoad[] = [{ inFlight: 20, matched: 100 }, { inFlight: 3, matched: 50 }, { inFlight: 3 }, { inFlight: 10 }];
  assert.deepEqual(route(loads, {}, 0), { pod: 1, reason: 'load-imbalance' });
  assert.deepEqual(route(loads, {}, 0.99), { pod: 2, reason: 'load-imbalance' });
  // the guard is strict: a gap equal to the threshold keeps prefix matching (pod 0 is then over mean + σ ≈ 17.04)
  assert.deepEqual(route(loads, { imbalanceAbsCount: 17 }, 0.99), { pod: 1, reason: 'prefix-match' });
  assert.equal(route(loads, { imbalanceAbsCount: 16 }).reason, 'load-imbalance');
});

test('prefix-cache: the best match wins only within mean + k·σ of requests (sample σ), else the next match', () => {
  // requests 6,2,2,2: mean 3, sample σ = √(12/3) = 2, bound 3 + 1·2 = 5: pod 0 (100 %) is over it, pod 1 (50 %) is not
  const loads: PodLoad[] = [{ inFlight: 6, matched: 100 }, { inFlight: 2, matched: 50 }, { inFlight: 2 }, { inFlight: 2 }];
  assert.deepEqual(route(loads), { pod: 1, reason: 'prefix-match' });
  // k = 2: bound 7, pod 0 passes
  assert.deepEqual(route(loads, { stdDevFactor: 2 }), { pod: 0, reason: 'prefix-match' });
  // requests 4,1,1,1,1: mean 1.6, sample σ = √1.8 ≈ 1.342 (population σ would be 1.2); k = 1.8 gives a bound of
  // 4.015 with the sample σ (pod 0 passes) and 3.76 with the population σ (it would not)
  const five: PodLoad[] = [{ inFlight: 4, matched: 100 }, { inFlight: 1, matched: 10 }, { inFlight: 1 }, { inFlight: 1 }, { inFlight: 1 }];
  assert.equal(route(five, { stdDevFactor: 1.8 }).pod, 0);
  assert.equal(route(five, { stdDevFactor: 1.7 }).pod, 1);
});

test('prefix-cache: equal match percents go to fewer requests; full ties are broken at random', () => {
  const loads: PodLoad[] = [{ inFlight: 3, matched: 50 }, { inFlight: 1, matched: 50 }, { inFlight: 2 }];
  assert.equal(route(loads).pod, 1);
  // integer percents, as AIBrix computes them: 101/200 and 100/200 blocks are both 50 %
  const pct: PodLoad[] = [{ inFlight: 2, matched: 101 }, { inFlight: 1, matched: 100 }];
  assert.equal(createPolicy('prefix-cache').route(request(pct, { totalBlocks: 200 }), cluster(pct), 0).pod, 1);
  const tie: PodLoad[] = [{ inFlight: 1, matched: 50 }, { inFlight: 1, matched: 50 }, { inFlight: 1, matched: 50 }];
  assert.deepEqual([0, 0.4, 0.9].map((r) => route(tie, {}, r).pod), [0, 1, 2]);
});

test('prefix-cache: with no match (empty index) or every match over the bound, a least-request pod', () => {
  const none: PodLoad[] = [{ inFlight: 4 }, { inFlight: 2 }, { inFlight: 2 }];
  assert.deepEqual(route(none, {}, 0), { pod: 1, reason: 'no-match' });
  assert.deepEqual(route(none, {}, 0.7), { pod: 2, reason: 'no-match' });
  // a prompt with no full block matches nothing
  const short: PodLoad[] = [{ inFlight: 1, matched: 5 }, { inFlight: 0 }];
  assert.equal(createPolicy('prefix-cache').route(request(short, { totalBlocks: 0 }), cluster(short), 0).reason, 'no-match');
  // requests 8,0,0,0: mean 2, σ = 4, bound 6: the only matching pod is over it
  const over: PodLoad[] = [{ inFlight: 8, matched: 90 }, { inFlight: 0 }, { inFlight: 0 }, { inFlight: 0 }];
  assert.deepEqual(route(over, {}, 0), { pod: 1, reason: 'prefix-match-skipped' });
});

test('prefix-cache: knobs are checked', () => {
  assert.throws(() => createPolicy('prefix-cache', { imbalance: 3 }), /policy "prefix-cache": unknown knob "imbalance"; known: imbalanceAbsCount, stdDevFactor/);
  assert.throws(() => createPolicy('prefix-cache', { stdDevFactor: -1 }), /knob "stdDevFactor" must be a number in \[0, ∞\], got -1/);
  assert.throws(() => createPolicy('prefix-cache', { imbalanceAbsCount: '16' }), TypeError);
});
