import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy } from '../../../src/core/policies/index.js';
import { buildRing } from '../../../src/core/policies/chwbl.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

/** Block keys of a prompt whose first `shared` blocks equal those of prompt `base`. */
function keys (base: number, variant = 0, shared = 100): bigint[] {
  return Array.from({ length: 100 }, (_, i) =>
    BigInt.asUintN(64, BigInt(base + 1) * 0x9e3779b97f4a7c15n + BigInt(i) * 0xc2b2ae3d27d4eb4fn + (i >= shared ? BigInt(variant) * 0x165667b19e3779f9n : 0n)));
}

const idle = (n: number): PodLoad[] => Array.from({ length: n }, () => ({}));

test('chwbl: the key is the prompt\'s first 256 tokens: prompts that differ later go to the same pod', () => {
  const loads = idle(4);
  const p = createPolicy('chwbl');
  // 256 tokens = 16 blocks of 16: block key 15 decides
  for (let b = 0; b < 20; b++) {
    const d = p.route(request(loads, { keys: keys(b) }), cluster(loads), 0);
    assert.equal(d.reason, 'ring-owner');
    assert.equal(p.route(request(loads, { keys: keys(b, 7, 16) }), cluster(loads), 0).pod, d.pod);
  }
  // prompts that differ within the first 16 blocks spread over every pod
  const owners = new Set<number>();
  for (let b = 0; b < 200; b++) owners.add(p.route(request(loads, { keys: keys(b, 1, 10) }), cluster(loads), 0).pod);
  assert.equal(owners.size, 4);
  // a prompt shorter than the prefix is keyed on all its full blocks
  const short = p.route(request(loads, { keys: keys(3).slice(0, 5), totalBlocks: 5 }), cluster(loads), 0);
  assert.equal(short.reason, 'ring-owner');
  // no block keys (or no full block): keyed on the session
  assert.equal(p.route(request(loads, { sessionKey: 5n }), cluster(loads), 0).reason, 'no-prefix-key');
  assert.equal(p.route(request(loads, { sessionKey: 5n, keys: [], totalBlocks: 0 }), cluster(loads), 0).reason, 'no-prefix-key');
});

test('chwbl: a pod over 125 % of the mean load (counting the new request) passes the request clockwise', () => {
  const n = 3;
  const loads = idle(n);
  const view = cluster(loads);
  const ring = buildRing(view.pods, 256);
  const p = createPolicy('chwbl');
  const req = request(loads, { keys: keys(11) });
  const owner = p.route(req, view, 0).pod;
  // the next distinct pod clockwise from the key's first point
  const key = keys(11)[15];
  let at = ring.points.findIndex((x) => x >= key);
  if (at < 0) at = 0;
  let next = -1;
  for (let s = 1; next < 0; s++) {
    const o = ring.owner[(at + s) % ring.points.length];
    if (view.pods[o].index !== owner) next = view.pods[o].index;
  }
  // owner 5 in flight, others 0: bound 1.25 · 6 / 3 = 2.5 < 5 + 1
  loads[owner].inFlight = 5;
  assert.deepEqual(p.route(req, cluster(loads), 0), { pod: next, reason: 'ring-walk' });
  // owner 1 in flight of 3, four pods: bound 1.25 · 4 / 4 = 1.25 < 1 + 1, so even one request over the mean moves it
  const four = idle(4);
  const owner4 = p.route(req, cluster(four), 0).pod;
  four[owner4].inFlight = 1;
  four[(owner4 + 1) % 4].inFlight = 1;
  four[(owner4 + 2) % 4].inFlight = 1;
  assert.notEqual(p.route(req, cluster(four), 0).pod, owner4);
  // a looser bound keeps it: 2 · 4 / 4 = 2 ≥ 2
  assert.equal(createPolicy('chwbl', { loadFactor: 2 }).route(req, cluster(four), 0).pod, owner4);
  // everyone over the bound (1, 1 of 2: bound 1.875 < 2): the owner anyway
  const two = idle(2);
  const owner2 = p.route(req, cluster(two), 0).pod;
  two[0].inFlight = 1;
  two[1].inFlight = 1;
  assert.deepEqual(p.route(req, cluster(two), 0), { pod: owner2, reason: 'all-over-bound' });
});

test('chwbl: the ring follows the candidates; removing a pod moves only its own keys', () => {
  const loads = idle(5);
  const p = createPolicy('chwbl');
  const before = Array.from({ length: 300 }, (_, b) => p.route(request(loads, { keys: keys(b) }), cluster(loads), 0).pod);
  const after = Array.from({ length: 300 }, (_, b) => p.route(request(loads, { keys: keys(b) }), cluster(loads, { exclude: [3] }), 0).pod);
  let moved = 0;
  for (let b = 0; b < 300; b++) {
    assert.notEqual(after[b], 3);
    if (before[b] !== 3) assert.equal(after[b], before[b], `key ${b} moved off pod ${before[b]}`);
    else moved++;
  }
  assert.ok(moved > 20 && moved < 100, `${moved} keys were on pod 3`);
  // and back: the same placement as before (the ring is rebuilt from the list, not patched)
  const again = Array.from({ length: 300 }, (_, b) => p.route(request(loads, { keys: keys(b) }), cluster(loads), 0).pod);
  assert.deepEqual(again, before);
  // 256 virtual nodes per pod by default: 1280 points
  assert.equal(buildRing(cluster(loads).pods, 256).points.length, 1280);
});

test('chwbl: knobs are checked', () => {
  assert.throws(() => createPolicy('chwbl', { loadFactor: 0.9 }), /knob "loadFactor" must be a number in \[1, ∞\]/);
  assert.throws(() => createPolicy('chwbl', { replication: 0 }), /an integer ≥ 1/);
  assert.throws(() => createPolicy('chwbl', { prefixChars: 100 }), /unknown knob "prefixChars"; known: prefixTokens, replication, loadFactor/);
});
