import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { RingConsumer } from '../../src/core/ring.js';
import type { HostRequest, PodSpec } from '../../src/core/routing-host.js';
import { NoCandidateError, type Policy, type RequestFeatures, type ClusterView } from '../../src/core/policy.js';
import { IndexFeeder } from '../../src/kvevents/index-feeder.js';
import { MODEL, routingHost } from '../fixtures/host.js';
import { SESSION_EXPIRY_BUDGET } from '../../src/core/defaults.js';


function setup (policy: string | Policy, pods = 3, sessionTtlMs = 60_000) {
  const { region, host, keysOf } = routingHost({ policy, pods, sessionTtlMs });
  // The index's writer, as the kv-events thread holds it: it applies the host's ring ops.
  const writer = new PrefixIndexWriter(region);
  const feeder = new IndexFeeder(writer, new RingConsumer(region), { assumedTtlMs: 60_000, expiryBudget: 4096 });
  return { region, host, writer, feeder, keysOf, models: new Set([MODEL]) };
}

function req (blockKeys: BigUint64Array, promptTokens: number, sessionId: string | null = null, parentSessionId: string | null = null): HostRequest {
  return { model: MODEL, sessionId, parentSessionId, promptTokens, blockKeys, maxTokens: null, user: null };
}

const NONE = new Set<number>();
const tokens = (n: number, from = 1): number[] => Array.from({ length: n }, (_, i) => i + from);

test('a decision is recorded: pending prefill until the first token, in flight until the end, keys assumed on the pod through the ring', () => {
  const { host, feeder, writer, keysOf } = setup('least-load');
  const keys = keysOf(tokens(160));
  const r = host.route(req(keys, 160), NONE, 1000);
  assert.equal(r.matchedBlocks, 0);
  assert.equal(r.expectedPrefill, 160);
  host.dispatched(r, 1000);
  assert.equal(host.load.pendingPrefill(r.pod), 160);
  assert.equal(host.load.inFlight(r.pod), 1);
  assert.equal(feeder.pump(), 10, 'the prompt\'s 10 blocks went to the index\'s writer as ring ops');
  const again = host.route(req(keys, 160), NONE, 1001);
  assert.equal(host.index.counts[r.pod], 10, 'the next identical prompt sees the assumed blocks on that pod');
  assert.notEqual(again.pod, r.pod, 'least-load avoids the pod with pending prefill');
  host.firstToken(r, 1010);
  host.firstToken(r, 1011); // idempotent
  assert.equal(host.load.pendingPrefill(r.pod), 0);
  host.finished(r, { promptTokens: 160, completionTokens: 10 }, 1020);
  assert.equal(host.load.inFlight(r.pod), 0);
  assert.equal(host.load.get(r.pod).decisions, 1);
});

test('a request that fails before its first token releases its pending prefill; sessions remember host, service and context', () => {
  const { host, keysOf } = setup('sticky');
  const keys = keysOf(tokens(64, 0));
  const r = host.route(req(keys, 64, 's7'), NONE, 0);
  host.dispatched(r, 0);
  host.finished(r, null, 5);
  assert.equal(host.load.pendingPrefill(r.pod), 0);
  const r2 = host.route(req(keys, 64, 's7'), NONE, 10);
  assert.equal(r2.pod, r.pod);
  assert.equal(r2.reason, 'session-host');
  host.dispatched(r2, 10);
  host.firstToken(r2, 15);
  host.finished(r2, { promptTokens: 64, completionTokens: 16 }, 40);
  const s = host.session('s7')!;
  assert.equal(s.host, `p${r.pod}`);
  assert.equal(s.attainedServiceMs, 35);
  assert.equal(s.contextTokens, 80);
  assert.equal(s.inFlight, 0);
  assert.equal(s.migrations, 0);
});

test('a retry on another pod rebinds the session without counting a migration; a policy\'s move does count', () => {
  const { host, keysOf } = setup('sticky');
  const keys = keysOf(tokens(32));
  const first = host.route(req(keys, 32, 'sess'), NONE, 0);
  host.dispatched(first, 0);
  host.finished(first, null, 1); // the pod failed it
  const retry = host.route(req(keys, 32, 'sess'), new Set([first.pod]), 2, 1);
  assert.notEqual(retry.pod, first.pod);
  assert.equal(retry.attempt, 1);
  const key = host.sessionKey('sess');
  assert.equal(host.sessions.get(key)!.host, retry.pod);
  assert.equal(host.sessions.get(key)!.migrations, 0);
  assert.equal(host.sessions.get(key)!.lastMigration, -Infinity, 'the migration cooldown was not reset');
  // The same change made by a first attempt is a move of the session.
  host.setPod(retry.pod, { id: `p${retry.pod}`, role: 'both', models: new Set([MODEL]), state: 'down' });
  const moved = host.route(req(keys, 32, 'sess'), NONE, 3);
  assert.notEqual(moved.pod, retry.pod);
  assert.equal(host.sessions.get(key)!.migrations, 1);
});

test('candidates: the model served, ready (not down or draining), not prefill-only, not excluded', () => {
  const seen: number[][] = [];
  const spy: Policy = { name: 'spy', route (_f: RequestFeatures, c: ClusterView) { seen.push(c.pods.map((p) => p.index)); return { pod: c.pods[0].index, reason: 'spy' }; } };
  const { host, keysOf } = setup(spy, 6);
  const pod = (i: number, over: Partial<PodSpec>): void => host.setPod(i, { id: `p${i}`, role: 'both', models: new Set([MODEL]), state: 'ready', ...over });
  pod(1, { state: 'down' });
  pod(2, { state: 'draining' });
  pod(3, { role: 'prefill' });
  pod(4, { models: new Set(['other']) });
  pod(5, { role: 'decode' });
  const keys = keysOf(tokens(16));
  host.route(req(keys, 16), NONE, 0);
  host.route(req(keys, 16), new Set([0]), 0, 1);
  assert.deepEqual(seen, [[0, 5], [5]]);
  assert.equal(host.hasCandidate(MODEL, new Set([0, 5])), false);
  assert.throws(() => host.route(req(keys, 16), new Set([0, 5]), 0, 2), NoCandidateError);
  assert.throws(() => host.route({ ...req(keys, 16), model: 'nope' }, NONE, 0), NoCandidateError);
});

test('engine reports reach the policies: load figures, and KV capacity from the engine over the configured one', () => {
  let cluster: ClusterView | null = null;
  let capacity: number[] = [];
  const spy: Policy = { name: 'spy', route (_f, c) { cluster = c; capacity = c.pods.map((p) => p.kvCapacityBlocks); return { pod: 0, reason: 'spy' }; } };
  const { host, keysOf, models } = setup(spy, 2);
  host.setPod(1, { id: 'p1', role: 'both', models, state: 'ready', kvCapacityBlocks: 500 });
  host.engineLoad(0, { running: 3, waiting: 4, kvUsage: 0.5, numGpuBlocks: 9000 }, 100);
  host.route(req(keysOf(tokens(16)), 16), NONE, 200);
  const c = cluster as unknown as ClusterView;
  assert.deepEqual([c.load.running(0), c.load.waiting(0), c.load.kvUsage(0)], [3, 4, 0.5]);
  assert.deepEqual(capacity, [9000, 500]);
  assert.equal(host.pods.get(0)!.kvBlocks, 9000, 'the pod table says it too, for other threads');
  assert.equal(host.load.get(0).lastScrape, 100);
  // A later report without the figure keeps what the engine said before.
  host.engineLoad(0, { running: 0, waiting: 0, kvUsage: 0 }, 300);
  assert.equal(host.pod(0)!.kvCapacityBlocks, 9000);
});

test('the parent session reaches the policy as a key; sessions expire while requests are routed', () => {
  let f: RequestFeatures | null = null;
  const spy: Policy = { name: 'spy', route (x) { f = x; return { pod: 0, reason: 'spy' }; } };
  const { host, keysOf } = setup(spy, 1, 1000);
  const keys = keysOf(tokens(16));
  const p = host.route(req(keys, 16, 'child', 'parent'), NONE, 0);
  assert.equal((f as unknown as RequestFeatures).parentSessionKey, host.sessionKey('parent'));
  host.dispatched(p, 0);
  host.finished(p, null, 1);
  assert.ok(host.session('child'));
  // Long after its TTL, routing other requests sweeps it out a few slots at a time.
  for (let t = 0; t < 64; t++) host.route(req(keys, 16), NONE, 10_000 + t);
  assert.equal(host.session('child'), null);
  assert.ok(host.sessions.stats().expired >= 1);
});

test('round-robin reads its position from the decisions the tables counted', () => {
  const { host } = setup('round-robin');
  const none = new BigUint64Array(0);
  assert.deepEqual([0, 1, 2, 3].map((t) => host.route(req(none, 10), NONE, t).pod), [0, 1, 2, 0]);
});

test('policies see each block key and how much of a match sits only on the offload tier', () => {
  let seen: Record<string, unknown> | null = null;
  const spy: Policy = {
    name: 'spy',
    route (f: RequestFeatures) {
      seen = { key3: f.prefix.blockKey!(3), off1: f.prefix.offloadedBlocks!(1), off2: f.prefix.offloadedBlocks!(2), matched1: f.prefix.matched(1), matched2: f.prefix.matched(2) };
      return { pod: 0, reason: 'spy' };
    }
  };
  const { host, writer, keysOf, region } = setup(spy);
  const keys = keysOf(tokens(160, 5));
  const area = region.claimScratch();
  new BigUint64Array(region.memory.buffer, area.ptr, keys.length).set(keys);
  writer.insertMany({ ptr: area.ptr, count: keys.length }, 1, writer.kind.confirmed, 0);
  writer.insertMany({ ptr: area.ptr, count: 10 }, 2, writer.kind.offloaded, 0);
  host.route(req(keys, 160), NONE, 0);
  assert.deepEqual(seen, { key3: keys[3], off1: 0, off2: 10, matched1: 10, matched2: 10 });
});

test('dispatch records the placement\'s own keys even when another request was routed in between', () => {
  const { host, feeder, writer, keysOf } = setup('round-robin');
  const a = keysOf(tokens(64, 1));
  const b = keysOf(tokens(64, 1000));
  const pa = host.route(req(a, 64), NONE, 0);
  const pb = host.route(req(b, 64), NONE, 0);
  host.dispatched(pa, 0);
  host.dispatched(pb, 0);
  feeder.pump();
  host.route(req(a, 64), NONE, 1);
  assert.equal(host.index.counts[pa.pod], 4);
  assert.equal(host.index.counts[pb.pod], 0);
});

test('the load view reads the same figures field by field as the whole row', () => {
  const { host } = setup('least-load');
  const load = host.load;
  load.addInFlight(2, 3);
  load.countDecision(2);
  load.countDecision(2);
  load.setEngine(2, { running: 5, waiting: 7, kvUsage: 0.25, time: 10 });
  const row = load.get(2);
  assert.deepEqual([load.running(2), load.waiting(2), load.kvUsage(2), load.decisions(2)], [row.running, row.waiting, row.kvUsage, row.decisions]);
  assert.deepEqual([row.running, row.waiting, row.kvUsage, row.decisions], [5, 7, 0.25, 2]);
  assert.throws(() => load.kvUsage(999), RangeError);
});

test('with no request routed, upkeep ticks expire idle sessions a bounded slice each: the count falls to the live ones', () => {
  // Room for 2^14 sessions is 2^15 slots: one tick's SESSION_EXPIRY_BUDGET slots cover an eighth of the table.
  const { host, request } = routingHost({ pods: 2, sessionTtlMs: 1000, sessionExpiryBudget: 0, tables: { sessions: 1 << 14 } });
  const slots = 2 * host.sessions.stats().capacity;
  const open = (id: string, t: number): void => {
    const p = host.route(request({ sessionId: id }), NONE, t);
    host.dispatched(p, t);
    host.finished(p, null, t);
  };
  for (let i = 0; i < 3000; i++) open(`old-${i}`, 0);
  for (let i = 0; i < 200; i++) open(`live-${i}`, 900);
  assert.equal(host.sessions.count, 3200);
  // At 1,500 ms the old sessions are past their TTL, the live ones are not; no request comes.
  const removed = host.expireSessions(1500);
  assert.ok(removed > 0 && removed < 3000, `one tick removes a bounded share: ${removed}`);
  const ticks = Math.ceil(slots / SESSION_EXPIRY_BUDGET);
  for (let t = 1; t <= ticks; t++) host.expireSessions(1500 + t);
  assert.equal(host.sessions.count, 200, 'only the live sessions are left');
  assert.equal(host.sessions.stats().expired, 3000);
  for (let i = 0; i < 200; i++) assert.ok(host.session(`live-${i}`));
  // Past theirs too, the table empties on ticks alone.
  for (let t = 0; t <= ticks; t++) host.expireSessions(2000 + t);
  assert.equal(host.sessions.count, 0);
});
