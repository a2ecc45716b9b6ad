import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy, policyNames } from '../../../src/core/policies/index.js';
import type { ClusterView } from '../../../src/core/policy.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

/** Session keys as the host makes them (64-bit hashes of the ids): spread over the whole range. */
const sessions = Array.from({ length: 4000 }, (_, i) => BigInt.asUintN(64, BigInt(i + 1) * 0x9e3779b97f4a7c15n ^ 0x5bd1e995n));

const idle = (n: number): PodLoad[] => Array.from({ length: n }, () => ({}));

/** Where each session goes (pod index), on a cluster of these loads. */
function placements (view: ClusterView, loads: PodLoad[], policy = createPolicy('sticky-hash')): number[] {
  return sessions.map((sessionKey) => policy.route(request(loads, { sessionKey }), view, 0).pod);
}

test('sticky-hash is registered and pins a session to one engine, whatever the load', () => {
  assert.ok(policyNames().includes('sticky-hash'));
  const p = createPolicy('sticky-hash');
  const loads = idle(8);
  const d = p.route(request(loads, { sessionKey: sessions[0] }), cluster(loads), 0);
  assert.equal(d.reason, 'session-hash');
  // Its engine becomes the most loaded by every measure: the session stays (no look at load).
  const hot: PodLoad[] = loads.map((_, i) => (i === d.pod ? { inFlight: 500, pendingPrefill: 10 ** 7, running: 256, waiting: 900, kvUsage: 1 } : {}));
  for (let i = 0; i < 20; i++) assert.equal(p.route(request(hot, { sessionKey: sessions[0], random: i / 20 }), cluster(hot), i * 1000).pod, d.pod);
  // A new instance (another gateway replica, a restart) pins it to the same engine: the hash is of the id.
  assert.equal(createPolicy('sticky-hash').route(request(hot, { sessionKey: sessions[0] }), cluster(hot), 0).pod, d.pod);
});

test('sticky-hash spreads sessions over the engines about evenly (ketama: 160 points per engine)', () => {
  const loads = idle(8);
  const counts = new Array<number>(8).fill(0);
  for (const pod of placements(cluster(loads), loads)) counts[pod]++;
  const mean = sessions.length / 8;
  for (const c of counts) assert.ok(c > 0.75 * mean && c < 1.25 * mean, `per engine ${counts.join(', ')}`);
});

test('sticky-hash moves only the sessions of the arcs an engine takes or gives up (consistent hashing)', () => {
  const eight = idle(8);
  const before = placements(cluster(eight), eight);
  // An engine joins: the sessions that move all move to it, about 1/9 of them.
  const nine = idle(9);
  const after = placements(cluster(nine), nine);
  let moved = 0;
  for (let i = 0; i < sessions.length; i++) {
    if (after[i] === before[i]) continue;
    moved++;
    assert.equal(after[i], 8, `session ${i} moved ${before[i]} → ${after[i]}, not to the new engine`);
  }
  assert.ok(moved > sessions.length / 9 * 0.6 && moved < sessions.length / 9 * 1.4, `${moved} of ${sessions.length} moved`);
  // An engine leaves (or is no candidate, e.g. down): only its sessions move, spread over the others.
  const without3 = placements(cluster(eight, { exclude: [3] }), eight);
  const spreadTo = new Set<number>();
  for (let i = 0; i < sessions.length; i++) {
    if (before[i] !== 3) assert.equal(without3[i], before[i], `session ${i} moved though its engine stayed`);
    else spreadTo.add(without3[i]);
  }
  assert.ok(!spreadTo.has(3) && spreadTo.size >= 5, `engine 3's sessions went to ${[...spreadTo].join(', ')}`);
  // It comes back: every session is where it was (the ring depends on the candidates only).
  const p = createPolicy('sticky-hash');
  placements(cluster(eight, { exclude: [3] }), eight, p);
  assert.deepEqual(placements(cluster(eight), eight, p), before);
});

test('sticky-hash: a request without a session goes to a random engine; bad knobs are refused', () => {
  const loads = idle(4);
  const p = createPolicy('sticky-hash');
  const picks = [0, 0.3, 0.6, 0.99].map((random) => p.route(request(loads, { random }), cluster(loads), 0));
  assert.deepEqual(picks.map((d) => d.pod), [0, 1, 2, 3]);
  assert.ok(picks.every((d) => d.reason === 'no-session'));
  assert.throws(() => createPolicy('sticky-hash', { replication: 0 }), /replication/);
  assert.throws(() => createPolicy('sticky-hash', { tHot: 5 }), /unknown knob/);
  // Fewer ring points still pin and spread, only less evenly.
  const coarse = createPolicy('sticky-hash', { replication: 1 });
  assert.equal(coarse.route(request(loads, { sessionKey: 7n }), cluster(loads), 0).pod, coarse.route(request(loads, { sessionKey: 7n }), cluster(loads), 0).pod);
});
