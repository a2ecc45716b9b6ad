// The migration thread's planning glue over the real shared tables: the routing host writes them (as the main
// thread does), a ProactivePlanner reads them through its own views (as the migration thread does). What it
// builds for the policy's planner (pods, load, sessions), which sessions it offers (idle ones only), and its
// bounds: transfers in flight per source pod across ticks, and one attempt per idle period.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Region } from '../../src/core/region.js';
import type { RoutingHost } from '../../src/core/routing-host.js';
import { readEarProactiveKnobs } from '../../src/core/policies/ear.js';
import { LoadTable } from '../../src/core/load-table.js';
import { PodTable } from '../../src/core/pod-table.js';
import { SessionTable } from '../../src/core/session-table.js';
import { isIdle, ProactivePlanner, type PlannerBackend } from '../../src/migration/proactive-planner.js';
import { MODEL, routingHost } from '../fixtures/host.js';

const TTL = 3_600_000;
const KNOBS = { tHot: 1000, minGain: 1000, tCool: 60, maxMovesPerPod: 2 };

function cluster (pods: Array<{ id: string; role?: 'both' | 'prefill' | 'decode'; state?: 'ready' | 'down'; kv?: number }>) {
  const { region, host, rows } = routingHost({ policy: 'ear-proactive', knobs: KNOBS, sessionTtlMs: TTL,
    pods: pods.map((p) => ({ id: p.id, role: p.role, state: p.state, kvCapacityBlocks: p.kv })) });
  return { region, host, rows };
}

/** The migration thread's side: its own views of the same tables. */
function planner (region: Region, knobs: Record<string, unknown> = KNOBS, ids?: Map<number, string>) {
  const pl = new ProactivePlanner({ sessions: new SessionTable(region), load: new LoadTable(region), pods: new PodTable(region) }, readEarProactiveKnobs(knobs));
  if (ids) pl.setBackends(serving(ids));
  return pl;
}

/** Backends by row, each serving MODEL (or the models given). */
function serving (ids: Map<number, string>, models: Record<string, string[]> = {}): Map<number, PlannerBackend> {
  return new Map([...ids].map(([row, id]) => [row, { id, models: new Set(models[id] ?? [MODEL]) }]));
}

/** An idle session bound to `pod` with `context` tokens. */
function idle (host: RoutingHost, id: string, pod: number, context: number, now = 0): bigint {
  host.holdSession(id, pod, TTL, now);
  const key = host.sessionKey(id);
  host.sessions.setCount(key, 'contextTokens', context);
  return key;
}

const names = (n: number) => new Map(Array.from({ length: n }, (_, i) => [i, `p${i}`]));

test('planner: the ClusterView it builds holds the pods that serve, with the pod and load tables\' figures', () => {
  const { region, host, rows } = cluster([{ id: 'a', kv: 1000 }, { id: 'b', role: 'prefill' }, { id: 'c', state: 'down' }, { id: 'd', role: 'decode', kv: 50 }, { id: 'e' }]);
  // Row 4 ('e') is not in the thread's backend list: it cannot be reached, so it is left out.
  const pl = planner(region, KNOBS, new Map([[0, 'a'], [1, 'b'], [2, 'c'], [3, 'd']]));
  const view = pl.clusterView();
  assert.deepEqual(view.pods.map((p) => ({ ...p })), [
    { index: rows[0], id: 'a', role: 'both', blockSize: 16, kvCapacityBlocks: 1000 },
    { index: rows[3], id: 'd', role: 'decode', blockSize: 16, kvCapacityBlocks: 50 }
  ]);
  host.load.addPendingPrefill(rows[3], 777);
  host.load.setEngine(rows[0], { running: 3, waiting: 1, kvUsage: 0.25, time: 0 });
  assert.equal(view.load.pendingPrefill(rows[3]), 777);
  assert.equal(view.load.running(rows[0]), 3);
  assert.equal(view.load.kvUsage(rows[0]), 0.25);
  const key = idle(host, 's', rows[0], 640);
  assert.deepEqual(view.sessions.get(key), { host: rows[0], attainedService: 0, contextTokens: 640, lastMigration: -Infinity, inFlight: 0 });
  assert.equal(view.sessions.get(12345n), null);
  // The same pods array while nothing changes; a new one when a pod does.
  assert.equal(pl.clusterView().pods, view.pods);
  host.setPod(rows[3], { id: 'd', role: 'decode', models: new Set([MODEL]), state: 'down' });
  assert.deepEqual(pl.clusterView().pods.map((p) => p.id), ['a']);
});

test('planner: offers only idle sessions (nothing in flight, bound, not migrating)', () => {
  const { region, host, rows } = cluster([{ id: 'a' }, { id: 'b' }]);
  const pl = planner(region, KNOBS, names(2));
  idle(host, 'idle', rows[0], 100);
  const busy = idle(host, 'busy', rows[0], 100);
  host.sessions.addInFlight(busy, 1, 0);
  const unbound = idle(host, 'unbound', rows[0], 100);
  host.sessions.setCount(unbound, 'host', -1);
  const moving = idle(host, 'moving', rows[1], 100);
  host.sessions.setCount(moving, 'migratingFrom', rows[0]);
  assert.deepEqual(pl.idleSessions().map((s) => s.key), [host.sessionKey('idle')]);
  assert.equal(isIdle({ inFlight: 0, host: 0, migratingFrom: -1 }), true);
  assert.equal(isIdle({ inFlight: 0, host: 0, migratingFrom: 1 }), false);
});

test('planner: idle sessions on a hot host move to the cool pod; a cold host keeps them', () => {
  const { region, host, rows } = cluster([{ id: 'a' }, { id: 'b' }]);
  const pl = planner(region, KNOBS, names(2));
  const s = idle(host, 's', rows[0], 300);
  assert.deepEqual(pl.plan(10_000), [], 'no host is hot');
  host.load.addPendingPrefill(rows[0], 5000);
  const moves = pl.plan(10_000);
  assert.deepEqual(moves, [{ sessionKey: s, from: rows[0], to: rows[1], contextTokens: 300, lastActivity: 0, sourceBacklog: host.load.pendingPrefill(rows[0]),
    sourceRunning: host.load.running(rows[0]), sourceWaiting: host.load.waiting(rows[0]) }]);
  assert.equal(pl.stats().inFlight, 1);
  pl.end(moves[0]);
  assert.equal(pl.stats().inFlight, 0);
});

test('planner: at most maxMovesPerPod transfers in flight per source pod, across ticks', () => {
  const { region, host, rows } = cluster([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
  const pl = planner(region, { ...KNOBS, maxMovesPerPod: 2 }, names(3));
  for (let i = 0; i < 5; i++) idle(host, `s${i}`, rows[0], 100 + i);
  idle(host, 'c0', rows[2], 100);
  host.load.addPendingPrefill(rows[0], 9000);
  host.load.addPendingPrefill(rows[2], 5000);
  const first = pl.plan(10_000);
  assert.deepEqual(first.map((m) => [m.from, m.contextTokens]), [[rows[0], 100], [rows[0], 101], [rows[2], 100]]);
  assert.equal(pl.inFlightFrom(rows[0]), 2);
  // Both of a's transfers still run: its next sessions wait (the planner offers them again, they are deferred).
  assert.deepEqual(pl.plan(10_100), []);
  assert.ok(pl.stats().deferred >= 2);
  pl.end(first[0]);
  const second = pl.plan(10_200);
  assert.deepEqual(second.map((m) => [m.from, m.contextTokens]), [[rows[0], 102]]);
  assert.equal(pl.inFlightFrom(rows[0]), 2);
  for (const m of [...first.slice(1), ...second]) pl.end(m);
  assert.equal(pl.stats().inFlight, 0);
  assert.equal(pl.inFlightFrom(rows[0]), 0);
});

test('planner: a session tried once is not tried again until its next turn', () => {
  const { region, host, rows } = cluster([{ id: 'a' }, { id: 'b' }]);
  const pl = planner(region, KNOBS, names(2));
  const s = idle(host, 's', rows[0], 100);
  host.load.addPendingPrefill(rows[0], 5000);
  const [m] = pl.plan(10_000);
  pl.end(m); // say its transfer failed: it stays on a
  assert.deepEqual(pl.plan(10_100), [], 'the same idle period is not retried');
  // A turn (dispatch and end) changes its last activity: a new idle period.
  host.sessions.addInFlight(s, 1, 20_000);
  assert.deepEqual(pl.plan(20_050), [], 'a session with a turn in flight is not idle');
  host.sessions.addInFlight(s, -1, 20_100);
  assert.deepEqual(pl.plan(20_200).map((x) => x.sessionKey), [s]);
});

test('planner: the memo of tried sessions is bounded, oldest out, counted', () => {
  const { region, host, rows } = cluster([{ id: 'a' }, { id: 'b' }]);
  const pl = new ProactivePlanner({ sessions: new SessionTable(region), load: new LoadTable(region), pods: new PodTable(region) },
    readEarProactiveKnobs({ ...KNOBS, maxMovesPerPod: 1 }), { maxTried: 2 });
  pl.setBackends(serving(names(2)));
  for (let i = 0; i < 3; i++) idle(host, `s${i}`, rows[0], 100 + i);
  host.load.addPendingPrefill(rows[0], 5000);
  const seen: number[] = [];
  for (let t = 0; t < 3; t++) {
    const [m] = pl.plan(10_000 + t);
    seen.push(m.contextTokens);
    pl.end(m);
  }
  assert.deepEqual(seen, [100, 101, 102]);
  assert.equal(pl.stats().triedEvicted, 1);
  // s0 was forgotten at the bound: it may be tried again; s1 and s2 are still remembered.
  const [again] = pl.plan(10_100);
  assert.equal(again.contextTokens, 100);
});

test('planner: moves need two reachable pods; a host the thread cannot reach is not planned over', () => {
  const { region, host, rows } = cluster([{ id: 'a' }, { id: 'b' }]);
  const pl = planner(region, KNOBS, new Map([[rows[0], 'a']]));
  idle(host, 's', rows[0], 100);
  host.load.addPendingPrefill(rows[0], 5000);
  assert.deepEqual(pl.plan(10_000), []);
  pl.setBackends(serving(names(2)));
  assert.equal(pl.plan(10_000).length, 1);
});


test('planner: a session moves only to a pod serving its model; an unknown model is planned over every pod', () => {
  const { region, host, rows } = cluster([{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
  const pl = planner(region, { ...KNOBS, maxMovesPerPod: 3 });
  // a and b serve m; c serves only n, and is the coolest.
  pl.setBackends(serving(new Map([[rows[0], 'a'], [rows[1], 'b'], [rows[2], 'c']]), { a: ['m', 'n'], b: ['m'], c: ['n'] }));
  const sm = idle(host, 'sm', rows[0], 100);
  const sn = idle(host, 'sn', rows[0], 200);
  const su = idle(host, 'su', rows[0], 300);
  host.load.addPendingPrefill(rows[0], 9000);
  host.load.addPendingPrefill(rows[1], 3000);
  const models = new Map([[sm, 'm'], [sn, 'n']]);
  const moves = pl.plan(10_000, (k) => models.get(k));
  const to = new Map(moves.map((m) => [m.sessionKey, m.to]));
  assert.equal(to.get(sm), rows[1], 'm goes to b, the only other pod serving m');
  assert.equal(to.get(sn), rows[2], 'n goes to c');
  assert.equal(to.get(su), rows[2], 'a session of unknown model: every pod');
  assert.deepEqual(pl.clusterView('m').pods.map((p) => p.id), ['a', 'b']);
  assert.deepEqual(pl.clusterView('zzz').pods, []);
});
