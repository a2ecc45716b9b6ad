import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../../../src/core/policies/index.js';
import { VTC_BASIC_DEFAULTS, podDraw, vtcBasicScores } from '../../../src/core/policies/vtc-basic.js';
import type { ClusterView, UserView } from '../../../src/core/policy.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';
import { routingHost } from '../../fixtures/host.js';

const U = 42n;

/** A cluster whose user window says user U has `tokens`, over `active` users ranging min..max. */
function withUsers (loads: PodLoad[], tokens: number, range: { active?: number; min: number; max: number }): ClusterView {
  const users: UserView = { tokens: (k) => (k === U ? tokens : 0), active: range.active ?? 2, min: range.min, max: range.max };
  return { ...cluster(loads), users };
}

const flat: PodLoad[] = [{}, {}, {}, {}];
const K0 = { ...VTC_BASIC_DEFAULTS, jitter: 0 };
const close = (actual: number[] | null, expected: number[]) => {
  assert.ok(actual !== null);
  assert.equal(actual.length, expected.length);
  actual.forEach((a, i) => assert.ok(Math.abs(a - expected[i]) < 1e-9, `score ${i}: ${a} ≠ ${expected[i]} (${actual.join(', ')})`));
};

test('vtc-basic: bucket = max(minTokens, (min + max) / 2), position = min(tokens / bucket, n − 1), score = |i − position| + utilisation, by hand', () => {
  const p = createPolicy('vtc-basic', { jitter: 0 });
  // bucket (1000 + 5000) / 2 = 3000; 3000 tokens → position 1: [1, 0, 1, 2]
  close(vtcBasicScores(K0, request(flat, { userKey: U }), withUsers(flat, 3000, { min: 1000, max: 5000 })), [1, 0, 1, 2]);
  assert.deepEqual(p.route(request(flat, { userKey: U }), withUsers(flat, 3000, { min: 1000, max: 5000 }), 0), { pod: 1, reason: 'fair-share' });
  // 3600 tokens → position 1.2: fairness [1.2, 0.2, 0.8, 1.8]; pod 1 runs 80 of 100 → +0.8: pod 2 wins
  const busy: PodLoad[] = [{}, { running: 80 }, {}, {}];
  close(vtcBasicScores(K0, request(busy, { userKey: U }), withUsers(busy, 3600, { min: 1000, max: 5000 })), [1.2, 1.0, 0.8, 1.8]);
  assert.equal(p.route(request(busy, { userKey: U }), withUsers(busy, 3600, { min: 1000, max: 5000 }), 0).pod, 2);
  // the gateway's in-flight count stands for running when it is the larger
  const inFlight: PodLoad[] = [{}, { running: 10, inFlight: 80 }, {}, {}];
  close(vtcBasicScores(K0, request(inFlight, { userKey: U }), withUsers(inFlight, 3600, { min: 1000, max: 5000 })), [1.2, 1.0, 0.8, 1.8]);
  // the light user of the same cluster goes to the first pods: 0 tokens → position 0
  close(vtcBasicScores(K0, request(flat, { userKey: 7n }), withUsers(flat, 3000, { min: 1000, max: 5000 })), [0, 1, 2, 3]);
});

test('vtc-basic: the position and the utilisation are clamped; weights scale their terms', () => {
  // 100 000 tokens / 3000 → 33.3, clamped to the last pod (3); running 150 and 500 are full (1), not 1.5 and 5
  const loads: PodLoad[] = [{}, {}, { running: 150 }, { running: 500 }];
  const k = { ...K0, utilizationWeight: 1.5 };
  close(vtcBasicScores(k, request(loads, { userKey: U }), withUsers(loads, 100_000, { min: 1000, max: 5000 })), [3, 2, 2.5, 1.5]);
  assert.equal(createPolicy('vtc-basic', { jitter: 0, utilizationWeight: 1.5 }).route(request(loads, { userKey: U }), withUsers(loads, 100_000, { min: 1000, max: 5000 }), 0).pod, 3);
  // fairnessWeight 2 doubles the distance; maxPodLoad 200 halves the utilisation: [6, 4, 2 + 1.5 · 0.75, 0 + 1.5 · 1]
  close(vtcBasicScores({ ...k, fairnessWeight: 2, maxPodLoad: 200 }, request(loads, { userKey: U }), withUsers(loads, 100_000, { min: 1000, max: 5000 })), [6, 4, 3.125, 1.5]);
  // fairnessWeight 0: utilisation only (least running)
  const u = createPolicy('vtc-basic', { jitter: 0, fairnessWeight: 0 });
  const rl: PodLoad[] = [{ running: 30 }, { running: 20 }, { running: 5 }, { running: 40 }];
  assert.equal(u.route(request(rl, { userKey: U }), withUsers(rl, 100_000, { min: 1000, max: 5000 }), 0).pod, 2);
});

test('vtc-basic: the bucket never falls under minTokens; with no active user the range is minTokens..maxTokens', () => {
  // (100 + 300) / 2 = 200 < 1000 → bucket 1000; 1500 tokens → position 1.5: pods 1 and 2 tie, broken by the host draw
  close(vtcBasicScores(K0, request(flat, { userKey: U }), withUsers(flat, 1500, { min: 100, max: 300 })), [1.5, 0.5, 0.5, 1.5]);
  const p = createPolicy('vtc-basic', { jitter: 0 });
  assert.deepEqual([0, 0.99].map((r) => p.route(request(flat, { userKey: U, random: r }), withUsers(flat, 1500, { min: 100, max: 300 }), 0).pod), [1, 2]);
  // minTokens 100: bucket 200 → 1500 / 200 = 7.5 → clamped to 3
  close(vtcBasicScores({ ...K0, minTokens: 100 }, request(flat, { userKey: U }), withUsers(flat, 1500, { min: 100, max: 300 })), [3, 2, 1, 0]);
  // no active user: min 1000, max 8000 → bucket 4500; 4500 tokens → position 1 (as AIBrix's tracker answers when empty)
  close(vtcBasicScores(K0, request(flat, { userKey: U }), withUsers(flat, 4500, { active: 0, min: 0, max: 0 })), [1, 0, 1, 2]);
  close(vtcBasicScores({ ...K0, minTokens: 10, maxTokens: 30 }, request(flat, { userKey: U }), withUsers(flat, 30, { active: 0, min: 0, max: 0 })), [1.5, 0.5, 0.5, 1.5]);
});

test('vtc-basic: the random term is jitter · a per-pod draw from the host number; no user → a pod at random', () => {
  const view = withUsers(flat, 3000, { min: 1000, max: 5000 });
  for (const r of [0, 0.25, 0.5, 0.999]) {
    const s = vtcBasicScores(VTC_BASIC_DEFAULTS, request(flat, { userKey: U, random: r }), view)!;
    [1, 0, 1, 2].forEach((base, i) => {
      const d = podDraw(r, i);
      assert.ok(d >= 0 && d < 1);
      assert.ok(Math.abs(s[i] - (base + 0.1 * d)) < 1e-12, `pod ${i} at ${r}`);
    });
  }
  // the draws differ between pods and between requests
  assert.equal(new Set([0, 1, 2, 3].map((i) => podDraw(0.5, i))).size, 4);
  assert.notEqual(podDraw(0.5, 0), podDraw(0.6, 0));
  // with the default 0.1, a pod one position closer always wins against an equally loaded one
  assert.equal(createPolicy('vtc-basic').route(request(flat, { userKey: U, random: 0.37 }), view, 0).pod, 1);
  // no user, or a host without a user window: uniform by the host number
  const p = createPolicy('vtc-basic');
  assert.deepEqual([0, 0.3, 0.6, 0.99].map((r) => p.route(request(flat, { random: r }), view, 0)), [0, 1, 2, 3].map((pod) => ({ pod, reason: 'no-user' })));
  assert.equal(p.route(request(flat, { userKey: U, random: 0.6 }), cluster(flat), 0).reason, 'no-user');
  assert.equal(vtcBasicScores(K0, request(flat), view), null);
});

test('vtc-basic: knobs are checked', () => {
  assert.throws(() => createPolicy('vtc-basic', { windowMs: 1 }), /policy "vtc-basic": unknown knob "windowMs"/);
  assert.throws(() => createPolicy('vtc-basic', { maxPodLoad: 0 }), /knob "maxPodLoad" must be a number in \[1, ∞\]/);
  assert.throws(() => createPolicy('vtc-basic', { fairnessWeight: -1 }), /knob "fairnessWeight"/);
  assert.throws(() => createPolicy('vtc-basic', { minTokens: '1000' }), /knob "minTokens"/);
  assert.throws(() => createPolicy('vtc-basic', { jitter: Number.NaN }), /knob "jitter"/);
});

test('vtc-basic over the routing host: a user\'s finished tokens move its next requests toward the last pods', () => {
  const { host, request: hostRequest } = routingHost({ policy: 'vtc-basic', knobs: { jitter: 0 }, pods: 4, random: () => 0, users: { windowMs: 60_000, buckets: 6 } });
  const route = (user: string | null, now: number) => host.route(hostRequest({ promptTokens: 10, user }), new Set(), now);
  const serve = (user: string, prompt: number, completion: number, now: number) => {
    const p = route(user, now);
    host.dispatched(p, now);
    host.finished(p, { promptTokens: prompt, completionTokens: completion }, now + 1);
    return p;
  };
  // first request: nobody has tokens → position 0
  assert.equal(serve('heavy', 3000, 1000, 0).pod, 0);
  // heavy: 3000 + 2 · 1000 = 5000 tokens, alone: bucket max(1000, 5000) → position 1
  assert.equal(host.users.tokens(host.userKey('heavy'), 10), 5000);
  assert.equal(route('heavy', 10).pod, 1);
  // light: 500 + 2 · 250 = 1000; range 1000..5000 → bucket 3000: heavy at 5000 / 3000 = 1.67 → pod 2, light at 0.33 → pod 0
  serve('light', 500, 250, 20);
  assert.equal(route('heavy', 30).pod, 2);
  assert.equal(route('light', 30).pod, 0);
  // a request with no user goes at random (the host's draw 0 → the first pod)
  assert.deepEqual([route(null, 40).pod, route(null, 40).reason], [0, 'no-user']);
  // a minute later both left the window: back to position 0
  assert.equal(host.users.tokens(host.userKey('heavy'), 70_001), 0);
  assert.equal(route('heavy', 70_001).pod, 0);
  // a failed request (no outcome) counts nothing
  const f = route('light', 70_002);
  host.dispatched(f, 70_002);
  host.finished(f, null, 70_003);
  assert.equal(host.users.tokens(host.userKey('light'), 70_004), 0);
});
