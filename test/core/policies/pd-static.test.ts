// pd-static on hand-built clusters; expectations worked out by hand from the rules in
// src/core/policies/pd-static.ts (fixture pods: block size 16, 10000 KV blocks = 160000 tokens; prompts of
// 100 blocks = 1600 tokens unless said otherwise).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy, policyNames } from '../../../src/core/policies/index.js';
import { pdPools } from '../../../src/core/policies/pd-static.js';
import type { ClusterView, PodRole, SessionInfo } from '../../../src/core/policy.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

const S = 42n;
const sess = (s: Partial<SessionInfo>): Map<bigint, Partial<SessionInfo>> => new Map([[S, s]]);
const idx = (pods: readonly { index: number }[]): number[] => pods.map((p) => p.index);

/** The fixture cluster with roles given per pod index. */
function withRoles (view: ClusterView, roles: PodRole[]): ClusterView {
  return { ...view, pods: view.pods.map((p) => ({ ...p, role: roles[p.index] })) };
}

test('pd-static is registered and validates prefillPods', () => {
  assert.ok(policyNames().includes('pd-static'));
  assert.equal(createPolicy('pd-static', { prefillPods: 4 }).name, 'pd-static');
  for (const bad of [0, -1, 1.5, '4', true, Infinity]) {
    assert.throws(() => createPolicy('pd-static', { prefillPods: bad }), /policy "pd-static": knob "prefillPods" must be an integer ≥ 1/, String(bad));
  }
  assert.throws(() => createPolicy('pd-static', { tHot: 1 }), /policy "pd-static": unknown knob "tHot"; known: prefillPods/);
});

test('pd-static: pools by role; pods of role both are in neither, and prefillPods is ignored', () => {
  const loads: PodLoad[] = [{}, {}, {}, {}, {}];
  const view = withRoles(cluster(loads), ['decode', 'prefill', 'both', 'decode', 'prefill']);
  const pools = pdPools(view.pods, 1);
  assert.deepEqual([idx(pools.prefill), idx(pools.decode)], [[1, 4], [0, 3]]);
  // Over many decisions on an idle cluster, P is always 1 or 4 and D always 0 or 3; pod 2 is never used.
  const p = createPolicy('pd-static', { prefillPods: 3 });
  const seen = new Set<string>();
  for (let d = 0; d < 8; d++) {
    const dec = p.route(request(loads), { ...view, decisions: d }, 0);
    assert.ok([0, 3].includes(dec.pod) && [1, 4].includes(dec.prefillOn!), JSON.stringify(dec));
    assert.equal(dec.reason, 'least-kv');
    seen.add(`${dec.prefillOn}>${dec.pod}`);
  }
  // the rotation spreads both legs over their pools
  assert.ok(seen.size >= 2, [...seen].join(' '));
});

test('pd-static: without roles the prefillPods lowest indexes are P (default half, at least one of each)', () => {
  const eight: PodLoad[] = Array.from({ length: 8 }, () => ({}));
  const split = (view: ClusterView, n: number): number[][] => {
    const pools = pdPools(view.pods, n);
    return [idx(pools.prefill), idx(pools.decode)];
  };
  assert.deepEqual(split(cluster(eight), 0), [[0, 1, 2, 3], [4, 5, 6, 7]]);
  assert.deepEqual(split(cluster(eight), 2), [[0, 1], [2, 3, 4, 5, 6, 7]]);
  // by index, not by the order the candidates come in
  const reversed = cluster(eight);
  assert.deepEqual(split({ ...reversed, pods: [...reversed.pods].reverse() }, 0), [[0, 1, 2, 3], [4, 5, 6, 7]]);
  // a missing P pod: the lowest D serves as P meanwhile, pools keep their sizes
  assert.deepEqual(split(cluster(eight, { exclude: [1] }), 4), [[0, 2, 3, 4], [5, 6, 7]]);
  // three pods: half rounded down is 1; asking for more than n − 1 leaves one D
  assert.deepEqual(split(cluster([{}, {}, {}]), 0), [[0], [1, 2]]);
  assert.deepEqual(split(cluster([{}, {}, {}]), 10), [[0, 1], [2]]);
  // through the policy: prefillPods=2 on four pods prefills on 0 or 1 and decodes on 2 or 3
  const four: PodLoad[] = [{}, {}, { kvUsage: 0.2 }, {}];
  assert.deepEqual(createPolicy('pd-static', { prefillPods: 2 }).route(request(four), cluster(four), 0), { pod: 3, prefillOn: 0, reason: 'least-kv' });
  assert.deepEqual(createPolicy('pd-static', { prefillPods: 3 }).route(request(four), cluster(four), 0), { pod: 3, prefillOn: 0, reason: 'least-kv' });
  assert.deepEqual(createPolicy('pd-static', { prefillPods: 1 }).route(request(four), cluster(four), 0), { pod: 1, prefillOn: 0, reason: 'least-kv' });
});

test('pd-static: P is the pod with the least prefill work ahead: longest prefix at equal load, least pending at equal prefix', () => {
  const p = createPolicy('pd-static', { prefillPods: 2 });
  const prefillOn = (loads: PodLoad[]): number | undefined => p.route(request(loads), cluster(loads), 0).prefillOn;
  // equal load: pod 1 holds 50 of the 100 blocks
  assert.equal(prefillOn([{}, { matched: 50 }, {}, {}]), 1);
  assert.equal(prefillOn([{ matched: 60 }, { matched: 50 }, {}, {}]), 0);
  // equal prefix: least pending prefill
  assert.equal(prefillOn([{ matched: 50, pendingPrefill: 500 }, { matched: 50, pendingPrefill: 100 }, {}, {}]), 1);
  // the match is weighed in tokens against the queue: pod 1 saves 800 tokens but has 1000 queued (1800 > 1600)
  assert.equal(prefillOn([{}, { matched: 50, pendingPrefill: 1000 }, {}, {}]), 0);
  assert.equal(prefillOn([{}, { matched: 50, pendingPrefill: 799 }, {}, {}]), 1);
  // a D pod's prefix does not attract the P leg
  assert.equal(prefillOn([{ pendingPrefill: 10 }, {}, { matched: 100 }, {}]), 1);
});

test('pd-static: D keeps the session on its host when the host is a D candidate', () => {
  const p = createPolicy('pd-static', { prefillPods: 2 });
  // host 3 holds more KV than pod 2, the session stays (its previous turns' KV is there)
  const loads: PodLoad[] = [{}, { pendingPrefill: 50 }, { kvUsage: 0.1 }, { kvUsage: 0.7 }];
  assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 3 }) }), 0),
    { pod: 3, prefillOn: 0, reason: 'session-host' });
  // host is a P pod (pools changed): no affinity, least KV on D
  assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 1 }) }), 0),
    { pod: 2, prefillOn: 0, reason: 'least-kv' });
  // host gone: placed anew, no migrateFrom
  const gone = p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 3 }), exclude: [3] }), 0);
  assert.deepEqual(gone, { pod: 2, prefillOn: 0, reason: 'least-kv' });
  // a new session (no host yet) and a request without a session
  assert.equal(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: -1 }) }), 0).reason, 'least-kv');
  assert.equal(p.route(request(loads), cluster(loads, { sessions: sess({ host: 3 }) }), 0).reason, 'least-kv');
});

test('pd-static: D balances KV: usage plus pending prefill over capacity, then fewer requests, then rotation', () => {
  const p = createPolicy('pd-static', { prefillPods: 1 });
  const d = (loads: PodLoad[], placements = 0): number => p.route(request(loads), cluster(loads, { placements, decisions: 3 * placements }), 0).pod;
  assert.equal(d([{}, { kvUsage: 0.5 }, { kvUsage: 0.3 }, { kvUsage: 0.4 }]), 2);
  // pending prefill is KV landing since the scrape: pod 2 0.3 + 48000 / 160000 = 0.6, pod 3 0.4 + 0.1 = 0.5, pod 1 0.55
  assert.equal(d([{}, { kvUsage: 0.55 }, { kvUsage: 0.3, pendingPrefill: 48000 }, { kvUsage: 0.4, pendingPrefill: 16000 }]), 3);
  // equal KV: fewer requests (max of engine running and gateway in flight)
  assert.equal(d([{}, { kvUsage: 0.2, running: 3 }, { kvUsage: 0.2, inFlight: 2 }, { kvUsage: 0.2, running: 1, inFlight: 4 }]), 2);
  // all equal: in turn by the placement counter (the decision counter, advanced by bound sessions' turns too, is not it)
  const idle: PodLoad[] = [{}, {}, {}, {}];
  assert.deepEqual([0, 1, 2, 3, 4, 5].map((k) => d(idle, k)), [1, 2, 3, 1, 2, 3]);
});

test('pd-static: with one pool empty there is no split: least pending prefill, no prefillOn', () => {
  const p = createPolicy('pd-static');
  const one: PodLoad[] = [{ pendingPrefill: 900 }];
  const d = p.route(request(one, { sessionKey: S }), cluster(one), 0);
  assert.deepEqual(d, { pod: 0, reason: 'no-pd-split' });
  assert.equal('prefillOn' in d, false);
  // two pods, one of them down
  assert.deepEqual(p.route(request([{}, {}]), cluster([{}, {}], { exclude: [0] }), 0), { pod: 1, reason: 'no-pd-split' });
  // roles of one kind only (and a both pod): no P pool
  const loads: PodLoad[] = [{ pendingPrefill: 300 }, { pendingPrefill: 200 }, { pendingPrefill: 100 }];
  assert.deepEqual(p.route(request(loads), withRoles(cluster(loads), ['decode', 'decode', 'both']), 0), { pod: 2, reason: 'no-pd-split' });
});
