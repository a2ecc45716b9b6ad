import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createPolicy, policyNames, registerPolicy } from '../../../src/core/policies/index.js';
import { NoCandidateError } from '../../../src/core/policy.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

test('the registry names every policy and rejects unknown or duplicate names', () => {
  for (const n of ['random', 'round-robin', 'least-request', 'least-load', 'sticky', 'sticky-hash', 'prefix-cache', 'scorer', 'kv-load', 'chwbl', 'preble', 'vtc-basic', 'ear', 'ear-proactive', 'pd-static']) {
    assert.ok(policyNames().includes(n), n);
  }
  assert.throws(() => createPolicy('nope'), /unknown policy "nope"; known: .*sticky/);
  assert.throws(() => registerPolicy('sticky', () => createPolicy('sticky')), /already registered/);
});

test('every policy answers NoCandidateError when no pod is a candidate', () => {
  for (const name of policyNames()) {
    const loads: PodLoad[] = [{}, {}];
    assert.throws(() => createPolicy(name).route(request(loads), cluster(loads, { exclude: [0, 1] }), 0), NoCandidateError, name);
  }
});

test('every policy picks a candidate, never an excluded pod (property)', () => {
  fc.assert(fc.property(
    fc.array(fc.record({
      inFlight: fc.nat(50), pendingPrefill: fc.nat(100000), running: fc.nat(50), waiting: fc.nat(50),
      kvUsage: fc.double({ min: 0, max: 1, noNaN: true }), matched: fc.nat(120), offloaded: fc.nat(120)
    }), { minLength: 2, maxLength: 12 }),
    fc.nat(), fc.double({ min: 0, max: 0.999999, noNaN: true }), fc.constantFrom(...policyNames()), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }),
    (loads, decisions, random, name, seed) => {
      const exclude = [decisions % loads.length];
      const view = cluster(loads, { decisions, exclude });
      const keys = Array.from({ length: 100 }, (_, i) => BigInt.asUintN(64, seed + BigInt(i) * 0x9e3779b97f4a7c15n));
      const d = createPolicy(name).route(request(loads, { random, sessionKey: 7n, keys }), view, 0);
      assert.ok(view.pods.some((p) => p.index === d.pod), `${name} chose ${d.pod}`);
      assert.equal(typeof d.reason, 'string');
    }));
});

test('round-robin walks the candidates by the decision counter', () => {
  const loads: PodLoad[] = [{}, {}, {}];
  const rr = createPolicy('round-robin');
  assert.deepEqual([0, 1, 2, 3, 4].map((d) => rr.route(request(loads), cluster(loads, { decisions: d }), 0).pod), [0, 1, 2, 0, 1]);
  // with pod 1 gone, the turn skips it
  assert.deepEqual([0, 1, 2].map((d) => rr.route(request(loads), cluster(loads, { decisions: d, exclude: [1] }), 0).pod), [0, 2, 0]);
});

test('random maps the host number onto the candidates uniformly', () => {
  const loads: PodLoad[] = [{}, {}, {}, {}];
  const r = createPolicy('random');
  assert.deepEqual([0, 0.26, 0.5, 0.99].map((x) => r.route(request(loads, { random: x }), cluster(loads), 0).pod), [0, 1, 2, 3]);
});

test('least-request takes the fewest in flight and rotates ties', () => {
  const loads: PodLoad[] = [{ inFlight: 3 }, { inFlight: 1 }, { inFlight: 1 }, { inFlight: 2 }];
  const p = createPolicy('least-request');
  assert.equal(p.route(request(loads), cluster(loads, { decisions: 0 }), 0).pod, 1);
  assert.equal(p.route(request(loads), cluster(loads, { decisions: 2 }), 0).pod, 2);
});

test('least-load takes the least pending prefill, then the fewest running', () => {
  const loads: PodLoad[] = [{ pendingPrefill: 5000, running: 0 }, { pendingPrefill: 1000, running: 9 }, { pendingPrefill: 1000, running: 2 }];
  const p = createPolicy('least-load');
  assert.equal(p.route(request(loads), cluster(loads), 0).pod, 2);
  // a single pending token outweighs any number of running requests
  loads[2].pendingPrefill = 1001;
  assert.equal(p.route(request(loads), cluster(loads), 0).pod, 1);
});

test('sticky keeps a session on its host however loaded, and re-homes it when the host leaves', () => {
  const loads: PodLoad[] = [{ pendingPrefill: 0 }, { pendingPrefill: 900000 }];
  const sessions = new Map([[42n, { host: 1 }]]);
  const p = createPolicy('sticky');
  const d = p.route(request(loads, { sessionKey: 42n }), cluster(loads, { sessions }), 0);
  assert.deepEqual(d, { pod: 1, reason: 'session-host' });
  const gone = p.route(request(loads, { sessionKey: 42n }), cluster(loads, { sessions, exclude: [1] }), 0);
  assert.equal(gone.pod, 0);
  assert.equal(p.route(request(loads, { sessionKey: 5n }), cluster(loads, { sessions }), 0).reason, 'new-session');
  assert.equal(p.route(request(loads), cluster(loads, { sessions }), 0).reason, 'no-session');
});
