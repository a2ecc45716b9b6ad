// ear and ear-proactive on hand-built clusters: every expectation below is worked out by hand from the rules in
// src/core/policies/ear.ts (defaults tHot 32768, tCool 60 s, minGain 8192; fixture pods: 10000 blocks of 16).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createPolicy, policyNames } from '../../../src/core/policies/index.js';
import { EAR_PROACTIVE_DEFAULTS, freeKvTokens, proactiveMoves, readEarProactiveKnobs, type IdleCandidate } from '../../../src/core/policies/ear.js';
import type { SessionInfo } from '../../../src/core/policy.js';
import { cluster, request, type PodLoad } from '../../fixtures/cluster.js';

const MIN = 60_000; // one tCool, in ms
const S = 42n;
const sess = (s: Partial<SessionInfo>): Map<bigint, Partial<SessionInfo>> => new Map([[S, s]]);

test('both are registered and validate their knobs', () => {
  assert.ok(policyNames().includes('ear'));
  assert.ok(policyNames().includes('ear-proactive'));
  assert.throws(() => createPolicy('ear', { tHot: -1 }), /policy "ear": knob "tHot" must be a number in \[0, ∞\]/);
  assert.throws(() => createPolicy('ear', { maxMovesPerPod: 3 }), /policy "ear": unknown knob "maxMovesPerPod"/);
  assert.throws(() => createPolicy('ear-proactive', { maxMovesPerPod: 0 }), /knob "maxMovesPerPod" must be an integer ≥ 1/);
  assert.equal(createPolicy('ear-proactive', { maxMovesPerPod: 3, tCool: 5 }).name, 'ear-proactive');
  assert.deepEqual(readEarProactiveKnobs({ tHot: 1000 }), { ...EAR_PROACTIVE_DEFAULTS, tHot: 1000 });
});

for (const name of ['ear', 'ear-proactive']) {
  test(`${name}: a new session goes to the least pending prefill`, () => {
    const loads: PodLoad[] = [{ pendingPrefill: 9000 }, { pendingPrefill: 3000 }, { pendingPrefill: 5000 }];
    const p = createPolicy(name);
    assert.deepEqual(p.route(request(loads, { sessionKey: 5n }), cluster(loads), 0), { pod: 1, reason: 'new-session' });
    assert.deepEqual(p.route(request(loads), cluster(loads), 0), { pod: 1, reason: 'no-session' });
    // a session with no host yet (−1) is new too
    assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: -1 }) }), 0), { pod: 1, reason: 'new-session' });
  });

  test(`${name}: ties on pending prefill go to the fewest requests, then in rotation`, () => {
    const p = createPolicy(name);
    // pods 1 and 2 tie on prefill; pod 2 has fewer requests (max of running and in flight: 3 vs 1)
    const loads: PodLoad[] = [{ pendingPrefill: 100 }, { pendingPrefill: 0, inFlight: 3 }, { pendingPrefill: 0, running: 1 }];
    assert.equal(p.route(request(loads, { sessionKey: 5n }), cluster(loads, { placements: 0 }), 0).pod, 2);
    assert.equal(p.route(request(loads, { sessionKey: 5n }), cluster(loads, { placements: 1 }), 0).pod, 2);
    // four idle pods: new sessions take them in turn by the placement counter, whatever the decision counter
    const idle: PodLoad[] = [{}, {}, {}, {}];
    assert.deepEqual([0, 1, 2, 3, 4, 5].map((k) => p.route(request(idle, { sessionKey: BigInt(100 + k) }), cluster(idle, { placements: k, decisions: 4 * k }), 0).pod),
      [0, 1, 2, 3, 0, 1]);
  });

  test(`${name}: a later turn goes to the session's host while the host is not hot`, () => {
    const p = createPolicy(name);
    // host 2 at exactly tHot (not above), pod 0 idle: stays
    const loads: PodLoad[] = [{}, { pendingPrefill: 500 }, { pendingPrefill: 32768 }];
    assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 2 }) }), 10 * MIN),
      { pod: 2, reason: 'session-host' });
  });

  test(`${name}: a hot host past the cool-down with a target that fits and gains enough migrates`, () => {
    // kvMargin 0: a target's room is its free KV less its pending prefill, the arithmetic below.
    const p = createPolicy(name, { kvMargin: 0 });
    // host 0: 40000 pending (> 32768). Pod 1: 20000 (gain 20000); pod 2: 25000 (gain 15000); pod 3: 1000 but full.
    const loads: PodLoad[] = [{ pendingPrefill: 40000 }, { pendingPrefill: 20000 }, { pendingPrefill: 25000 }, { pendingPrefill: 1000, kvUsage: 0.98 }];
    // need = max(context 50000, prompt 1600) = 50000; pod 3 has 160000 · 0.02 − 1000 = 2200 of room → excluded; pod 1 is lowest.
    const sessions = sess({ host: 0, contextTokens: 50000, lastMigration: 0 });
    assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions }), MIN), { pod: 1, migrateFrom: 0, reason: 'migrate' });
    // never moved (−Infinity) counts as cooled at any time
    assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 0, contextTokens: 100 }) }), 0),
      { pod: 3, migrateFrom: 0, reason: 'migrate' });
  });

  test(`${name}: within tCool of its last move the session stays`, () => {
    const p = createPolicy(name);
    const loads: PodLoad[] = [{ pendingPrefill: 40000 }, {}];
    const sessions = sess({ host: 0, lastMigration: 1000 });
    assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions }), 1000 + MIN - 1), { pod: 0, reason: 'hot-cooling' });
    assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions }), 1000 + MIN), { pod: 1, migrateFrom: 0, reason: 'migrate' });
    // a shorter tCool lets it move sooner
    assert.equal(createPolicy(name, { tCool: 1 }).route(request(loads, { sessionKey: S }), cluster(loads, { sessions }), 2000).reason, 'migrate');
  });

  test(`${name}: no target that holds the context → stay`, () => {
    const p = createPolicy(name, { kvMargin: 0 });
    // pod 1 free: 160000 · (1 − 0.75) = 40000 tokens; pod 2: 160000 · 0.8 = 128000 but gains only 40000 − 35000 = 5000
    const loads: PodLoad[] = [{ pendingPrefill: 40000 }, { kvUsage: 0.75 }, { pendingPrefill: 35000, kvUsage: 0.2 }];
    const at = (contextTokens: number, promptTokens = 1600): ReturnType<typeof p.route> =>
      p.route(request(loads, { sessionKey: S, promptTokens }), cluster(loads, { sessions: sess({ host: 0, contextTokens }) }), 0);
    assert.deepEqual(at(40001), { pod: 0, reason: 'hot-no-target' });
    assert.deepEqual(at(40000), { pod: 1, migrateFrom: 0, reason: 'migrate' });
    // the prompt counts when it is larger than the stored context
    assert.deepEqual(at(1000, 40001), { pod: 0, reason: 'hot-no-target' });
  });

  test(`${name}: a target must be strictly below the host and by at least minGain`, () => {
    const route = (loads: PodLoad[], config = {}): ReturnType<ReturnType<typeof createPolicy>['route']> =>
      createPolicy(name, config).route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 0 }) }), 0);
    assert.deepEqual(route([{ pendingPrefill: 40000 }, { pendingPrefill: 40000 }], { minGain: 0 }), { pod: 0, reason: 'hot-no-target' });
    assert.deepEqual(route([{ pendingPrefill: 40000 }, { pendingPrefill: 39999 }], { minGain: 0 }), { pod: 1, migrateFrom: 0, reason: 'migrate' });
    // default minGain 8192: 40000 − 31809 = 8191 is short by one, 31808 qualifies
    assert.deepEqual(route([{ pendingPrefill: 40000 }, { pendingPrefill: 31809 }]), { pod: 0, reason: 'hot-no-target' });
    assert.deepEqual(route([{ pendingPrefill: 40000 }, { pendingPrefill: 31808 }]), { pod: 1, migrateFrom: 0, reason: 'migrate' });
  });

  test(`${name}: a session whose host is gone is placed anew, not migrated`, () => {
    const p = createPolicy(name);
    const loads: PodLoad[] = [{ pendingPrefill: 7000 }, { pendingPrefill: 100 }, { pendingPrefill: 2000 }];
    const d = p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 1 }), exclude: [1] }), 0);
    assert.deepEqual(d, { pod: 2, reason: 'host-gone' });
    assert.equal('migrateFrom' in d, false);
  });
}

test('freeKvTokens: capacity · block size · (1 − usage); unknown capacity fits anything', () => {
  const load = cluster([{ kvUsage: 0.25 }]).load;
  assert.equal(freeKvTokens({ index: 0, id: 'a', role: 'both', blockSize: 16, kvCapacityBlocks: 1000 }, load), 12000);
  assert.equal(freeKvTokens({ index: 0, id: 'a', role: 'both', blockSize: 16, kvCapacityBlocks: 0 }, load), Infinity);
});

const idle = (key: bigint, host: number, contextTokens: number, over: Partial<IdleCandidate> = {}): IdleCandidate =>
  ({ key, host, contextTokens, lastMigration: -Infinity, inFlight: 0, ...over });

test('proactiveMoves: idle sessions only, off hot hosts only, to a target that gains enough', () => {
  const k = readEarProactiveKnobs();
  // pod 0 hot (50000), pod 1 warm but not hot (30000), pod 2 idle
  const view = cluster([{ pendingPrefill: 50000 }, { pendingPrefill: 30000 }, {}]);
  const moves = proactiveMoves([
    idle(1n, 0, 5000, { inFlight: 1 }), // busy: its turn is on the critical path already
    idle(2n, 0, 6000),
    idle(3n, 1, 100), // host not hot
    idle(4n, -1, 100) // unbound
  ], view, 0, k);
  assert.deepEqual(moves, [{ sessionKey: 2n, from: 0, to: 2 }]);
});

test('proactiveMoves: respects tCool and skips hosts that are not candidates', () => {
  const k = readEarProactiveKnobs();
  const view = cluster([{ pendingPrefill: 50000 }, {}, { pendingPrefill: 90000 }], { exclude: [2] });
  const now = 10 * MIN;
  const moves = proactiveMoves([
    idle(1n, 0, 100, { lastMigration: now - MIN + 1 }), // moved 59.999 s ago
    idle(2n, 0, 200, { lastMigration: now - MIN }), // exactly tCool ago: may move
    idle(3n, 2, 100) // host 2 is not a candidate (down): its next turn is placed anew
  ], view, now, k);
  assert.deepEqual(moves, [{ sessionKey: 2n, from: 0, to: 1 }]);
});

test('proactiveMoves: at most maxMovesPerPod per hot host, smallest contexts first, hottest host first', () => {
  const k = readEarProactiveKnobs({ maxMovesPerPod: 2 });
  const view = cluster([{ pendingPrefill: 40000 }, { pendingPrefill: 60000 }, {}, { pendingPrefill: 1000 }]);
  const sessions = [idle(1n, 0, 9000), idle(2n, 0, 3000), idle(3n, 0, 5000), idle(4n, 1, 7000), idle(5n, 1, 100), idle(6n, 1, 8000)];
  assert.deepEqual(proactiveMoves(sessions, view, 0, k), [
    { sessionKey: 5n, from: 1, to: 2 }, { sessionKey: 4n, from: 1, to: 2 },
    { sessionKey: 2n, from: 0, to: 2 }, { sessionKey: 3n, from: 0, to: 2 }
  ]);
  assert.equal(proactiveMoves(sessions, view, 0, readEarProactiveKnobs({ maxMovesPerPod: 1 })).length, 2);
});

test('proactiveMoves: KV promised to a target in the same call counts as used', () => {
  const k = readEarProactiveKnobs({ maxMovesPerPod: 5, kvMargin: 0 });
  // pod 1: 160000 · (1 − 0.9) = 16000 free tokens; pod 2 full. Sessions of 6000 each: two fit (12000), the third not.
  const view = cluster([{ pendingPrefill: 40000 }, { kvUsage: 0.9 }, { kvUsage: 1 }]);
  const moves = proactiveMoves([idle(1n, 0, 6000), idle(2n, 0, 6000), idle(3n, 0, 6000)], view, 0, k);
  assert.deepEqual(moves, [{ sessionKey: 1n, from: 0, to: 1 }, { sessionKey: 2n, from: 0, to: 1 }]);
});

test('proactiveMoves: nothing to do on a cool cluster', () => {
  const view = cluster([{ pendingPrefill: 32768 }, {}]);
  assert.deepEqual(proactiveMoves([idle(1n, 0, 10)], view, 0, readEarProactiveKnobs()), []);
});

test('ear affinity knob: a boolean, default true; true routes exactly as the default', () => {
  assert.throws(() => createPolicy('ear', { affinity: 'false' }), /policy "ear": knob "affinity" must be true or false, got "false"/);
  assert.throws(() => createPolicy('ear', { affinity: 0 }), /knob "affinity" must be true or false/);
  assert.equal(readEarProactiveKnobs().affinity, true);
  assert.equal(readEarProactiveKnobs({ affinity: false }).affinity, false);
  const loads: PodLoad[] = [{ pendingPrefill: 40000 }, { pendingPrefill: 20000 }, { pendingPrefill: 5000 }];
  for (const host of [0, 1, 2]) {
    const req = request(loads, { sessionKey: S });
    const view = cluster(loads, { sessions: sess({ host }) });
    assert.deepEqual(createPolicy('ear', { affinity: true }).route(req, view, 0), createPolicy('ear').route(req, view, 0));
  }
});

test('ear affinity=false: every turn goes to the least pending prefill, moving the session from its host', () => {
  const p = createPolicy('ear', { affinity: false });
  // host 0 is far below tHot: ear keeps the session there, the ablation moves it to the least loaded pod
  const loads: PodLoad[] = [{ pendingPrefill: 5000 }, { pendingPrefill: 1000 }, { pendingPrefill: 3000 }];
  const turn = (s: Partial<SessionInfo>, now = 0, view = cluster(loads, { sessions: sess(s) })): ReturnType<typeof p.route> =>
    p.route(request(loads, { sessionKey: S }), view, now);
  assert.deepEqual(createPolicy('ear').route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 0 }) }), 0),
    { pod: 0, reason: 'session-host' });
  assert.deepEqual(turn({ host: 0 }), { pod: 1, migrateFrom: 0, reason: 'rebalance' });
  // no minGain: 2000 tokens of gain are enough; no tCool: it moved a millisecond ago
  assert.deepEqual(turn({ host: 2, lastMigration: 10 * MIN - 1 }, 10 * MIN), { pod: 1, migrateFrom: 2, reason: 'rebalance' });
  // the host is the least loaded: it stays, without migrateFrom
  const stay = turn({ host: 1 });
  assert.deepEqual(stay, { pod: 1, reason: 'host-least-load' });
  assert.equal('migrateFrom' in stay, false);
  // a context that does not fit the target's free KV does not stop the move (placed as a new session is)
  const full: PodLoad[] = [{ pendingPrefill: 5000 }, { pendingPrefill: 1000, kvUsage: 0.99 }];
  assert.deepEqual(p.route(request(full, { sessionKey: S }), cluster(full, { sessions: sess({ host: 0, contextTokens: 100000 }) }), 0),
    { pod: 1, migrateFrom: 0, reason: 'rebalance' });
});

test('ear affinity=false: new sessions, requests without one and sessions whose host is gone are placed as before', () => {
  const p = createPolicy('ear', { affinity: false });
  const loads: PodLoad[] = [{ pendingPrefill: 7000 }, { pendingPrefill: 100 }, { pendingPrefill: 2000 }];
  assert.deepEqual(p.route(request(loads), cluster(loads), 0), { pod: 1, reason: 'no-session' });
  assert.deepEqual(p.route(request(loads, { sessionKey: S }), cluster(loads), 0), { pod: 1, reason: 'new-session' });
  const gone = p.route(request(loads, { sessionKey: S }), cluster(loads, { sessions: sess({ host: 1 }), exclude: [1] }), 0);
  assert.deepEqual(gone, { pod: 2, reason: 'host-gone' });
  assert.equal('migrateFrom' in gone, false);
  // a host tied with the least loaded stays, whatever the rotation says: a move between equals gains nothing
  const idle: PodLoad[] = [{}, {}, {}];
  assert.deepEqual([0, 1, 2].map((d) => p.route(request(idle, { sessionKey: S }), cluster(idle, { decisions: d, sessions: sess({ host: 0 }) }), 0)),
    [{ pod: 0, reason: 'host-least-load' }, { pod: 0, reason: 'host-least-load' }, { pod: 0, reason: 'host-least-load' }]);
});

// Short of KV (shortCost, kvPress, liveShare): the fixture's pods hold 10000 blocks of 16 = 160000 tokens each, the
// two pods 320000; live sessions of 250000 tokens are past the default liveShare (0.25 × 320000 = 80000), and past
// 0.5 of two or three pods (160000, 240000).
// Host 0 has 20000 tokens of pending prefill (below tHot, so ear keeps the session there); kv-load's cost, with a
// 100-block prompt matched nowhere: pod 0 = (100 + 1250) + 0 + 1250 + 100 = 2700, pod 1 = 100 + 100 = 200.
const shortLoads: PodLoad[] = [{ pendingPrefill: 20000 }, {}];
const bound = sess({ host: 0, contextTokens: 1000 });
const LIVE = 250000;

for (const name of ['ear', 'ear-proactive']) {
  test(`${name}: short of KV (some pod holds < kvPress × the largest context, live sessions > liveShare of the KV), every request goes by kv-load's pick`, () => {
    const p = createPolicy(name);
    const kvLoad = createPolicy('kv-load');
    // 3 × 60000 = 180000 > 160000: short.
    const view = cluster(shortLoads, { sessions: bound, maxContextTokens: 60000, liveContextTokens: LIVE });
    const turn = request(shortLoads, { sessionKey: S });
    assert.equal(kvLoad.route(turn, view, 0).pod, 1);
    // the turn leaves its host with no migrateFrom: recomputed where it goes; admission does not route it again
    assert.deepEqual(p.route(turn, view, 0), { pod: 1, reason: 'short-cost-leave', keepsRetained: false });
    assert.deepEqual(p.route(request(shortLoads, { sessionKey: 5n }), view, 0), { pod: kvLoad.route(request(shortLoads, { sessionKey: 5n }), view, 0).pod, reason: 'short-cost', keepsRetained: false });
    assert.deepEqual(p.route(request(shortLoads), view, 0), { pod: 1, reason: 'short-cost', keepsRetained: false });
    // where kv-load's cost is least on the host, the turn stays
    const hostCheap: PodLoad[] = [{ matched: 100 }, { pendingPrefill: 20000 }];
    const stay = cluster(hostCheap, { sessions: bound, maxContextTokens: 60000, liveContextTokens: LIVE });
    assert.equal(kvLoad.route(request(hostCheap, { sessionKey: S }), stay, 0).pod, 0);
    assert.deepEqual(p.route(request(hostCheap, { sessionKey: S }), stay, 0), { pod: 0, reason: 'short-cost-host', keepsRetained: false });
    // even a hot host past its cool-down: no migration, kv-load's pick
    const hot: PodLoad[] = [{ pendingPrefill: 40000 }, { pendingPrefill: 30000, matched: 100 }, { pendingPrefill: 1000 }];
    const hv = cluster(hot, { sessions: bound, maxContextTokens: 60000, liveContextTokens: LIVE });
    assert.deepEqual(p.route(request(hot, { sessionKey: S }), hv, 0), { pod: kvLoad.route(request(hot, { sessionKey: S }), hv, 0).pod, reason: 'short-cost-leave', keepsRetained: false });
  });

  test(`${name}: not short of KV, today's pick`, () => {
    const p = createPolicy(name);
    // 3 × 50000 = 150000 < 160000: not short; the host is cold, the session stays
    assert.deepEqual(p.route(request(shortLoads, { sessionKey: S }), cluster(shortLoads, { sessions: bound, maxContextTokens: 50000, liveContextTokens: LIVE }), 0),
      { pod: 0, reason: 'session-host' });
    // the largest context would be short, but the live sessions need at most half the fleet's KV (or are unknown)
    for (const live of [80000, 0, undefined]) {
      assert.deepEqual(p.route(request(shortLoads, { sessionKey: S }), cluster(shortLoads, { sessions: bound, maxContextTokens: 60000, ...(live === undefined ? {} : { liveContextTokens: live }) }), 0),
        { pod: 0, reason: 'session-host' }, `live ${live}`);
    }
    // no context seen (absent or 0): not short
    assert.deepEqual(p.route(request(shortLoads, { sessionKey: S }), cluster(shortLoads, { sessions: bound }), 0), { pod: 0, reason: 'session-host' });
    assert.deepEqual(p.route(request(shortLoads, { sessionKey: S }), cluster(shortLoads, { sessions: bound, maxContextTokens: 0 }), 0),
      { pod: 0, reason: 'session-host' });
    // shortCost=false: today's pick however short
    assert.deepEqual(createPolicy(name, { shortCost: false }).route(request(shortLoads, { sessionKey: S }), cluster(shortLoads, { sessions: bound, maxContextTokens: 150000, liveContextTokens: LIVE }), 0),
      { pod: 0, reason: 'session-host' });
  });

  test(`${name}: the thresholds are strict, and kvPress and liveShare move them`, () => {
    const at = (maxContextTokens: number, knobs: Record<string, unknown> = {}, liveContextTokens = LIVE): string =>
      createPolicy(name, knobs).route(request(shortLoads, { sessionKey: S }), cluster(shortLoads, { sessions: bound, maxContextTokens, liveContextTokens }), 0).reason;
    // kvPress 2: 2 × 80000 = 160000 is not less than the pod's 160000; one token more is
    assert.equal(at(80000, { kvPress: 2 }), 'session-host');
    assert.equal(at(80001, { kvPress: 2 }), 'short-cost-leave');
    // the default, 3: 53333 · 3 = 159999 asks less than the pod holds; 53334 · 3 = 160002 more
    assert.equal(at(53333), 'session-host');
    assert.equal(at(53334), 'short-cost-leave');
    // kvPress 4: 40001 · 4 > 160000
    assert.equal(at(40001, { kvPress: 4 }), 'short-cost-leave');
    assert.equal(at(40000, { kvPress: 4 }), 'session-host');
    // kvPress 0: never short
    assert.equal(at(1e9, { kvPress: 0 }), 'session-host');
    assert.throws(() => createPolicy(name, { kvPress: -1 }), /knob "kvPress" must be a number in \[0, ∞\]/);
    // the default liveShare, 0.25: 80000 of 320000 is not more than a quarter; 80001 is
    assert.equal(at(60000, {}, 80000), 'session-host');
    assert.equal(at(60000, {}, 80001), 'short-cost-leave');
    // liveShare 0.5: 160001 > 160000; liveShare 1: the whole fleet's 320000 and one more
    assert.equal(at(60000, { liveShare: 0.5 }, 160001), 'short-cost-leave');
    assert.equal(at(60000, { liveShare: 0.5 }, 160000), 'session-host');
    assert.equal(at(60000, { liveShare: 1 }, 320000), 'session-host');
    assert.equal(at(60000, { liveShare: 1 }, 320001), 'short-cost-leave');
    // liveShare 0: any live session counts (with the largest context past kvPress)
    assert.equal(at(60000, { liveShare: 0 }, 1), 'short-cost-leave');
    assert.throws(() => createPolicy(name, { liveShare: -0.1 }), /knob "liveShare" must be a number in \[0, ∞\]/);
    assert.throws(() => createPolicy(name, { shortCost: 1 }), /knob "shortCost"/);
  });

  test(`${name}: one pod short is enough; a pod of unknown capacity makes the fleet's KV unknown, never short`, () => {
    const base = cluster(shortLoads, { sessions: bound, maxContextTokens: 60000, liveContextTokens: 200001 });
    const withCapacity = (caps: number[]) => ({ ...base, pods: base.pods.map((pod, i) => ({ ...pod, kvCapacityBlocks: caps[i] })) });
    const p = createPolicy(name);
    // pod 1 holds 40000 blocks (640000 tokens), pod 0 10000 (160000 < 180000): short, with 200001 > 0.25 × 800000 live
    assert.equal(p.route(request(shortLoads, { sessionKey: S }), withCapacity([10000, 40000]), 0).reason, 'short-cost-leave');
    assert.equal(p.route(request(shortLoads, { sessionKey: S }), { ...withCapacity([10000, 40000]), liveContextTokens: 200000 }, 0).reason, 'session-host');
    // both unknown (0): not short
    assert.equal(p.route(request(shortLoads, { sessionKey: S }), withCapacity([0, 0]), 0).reason, 'session-host');
    // one unknown: the fleet's KV is unknown, not short (even though pod 0 alone is small)
    assert.equal(p.route(request(shortLoads, { sessionKey: S }), withCapacity([10000, 0]), 0).reason, 'session-host');
    assert.equal(p.route(request(shortLoads, { sessionKey: S }), withCapacity([0, 40000]), 0).reason, 'session-host');
  });
}
