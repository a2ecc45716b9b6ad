// SharedSessions and RoutingHost.adoptShared in one process: two routing hosts (two regions) stand for two
// replicas, over one MemoryStore (the store contract's executable statement; the redis store is the same contract,
// tested against a real server in test/store, and end to end in shared-sessions.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryStore } from '../../src/store/memory-store.js';
import { DEGRADED, type SessionStore } from '../../src/store/session-store.js';
import { HostSessions, SharedSessions, type LocalFigures, type LocalSessions } from '../../src/store/shared-sessions.js';
import type { SharedSession } from '../../src/store/session-store.js';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { MODEL, routingHost } from '../fixtures/host.js';

const NONE = new Set<number>();
const TTL = 60_000;

/**
 * The local table as a data-plane thread has it (gateway/owner-sessions.ts): another thread's, applied in the order
 * asked (so before the thread's next decision), its figures answered a turn later.
 */
class OwnerSide implements LocalSessions {
  readonly remote = true;
  readonly asked: string[] = [];
  constructor (readonly table: HostSessions) {}
  ready (backendId: string): boolean { return this.table.ready(backendId); }
  adopt (sessionId: string, s: SharedSession): boolean {
    this.asked.push('adopt');
    return this.table.adopt(sessionId, s);
  }

  figures (sessionId: string): Promise<LocalFigures | undefined> {
    this.asked.push('figures');
    const f = this.table.figures(sessionId);
    return new Promise((resolve) => setImmediate(() => resolve(f)));
  }
}

function replica (store: SessionStore, clock: { t: number }, thread = false) {
  const { host, request } = routingHost({ pods: ['e0', 'e1'], sessionTtlMs: TTL });
  const owner = thread ? new OwnerSide(new HostSessions(() => ({ host }), TTL, () => clock.t)) : null;
  const shared = owner === null
    ? new SharedSessions({ store, routing: () => ({ host }), sessionTtlMs: TTL, now: () => clock.t })
    : new SharedSessions({ store, local: owner, now: () => clock.t });
  const input = (sessionId: string | null) => request({ sessionId, promptTokens: 32 });
  const place = (sessionId: string | null, exclude: ReadonlySet<number> = NONE, attempt = 0) => {
    const p = host.route(input(sessionId), exclude, clock.t, attempt);
    return { p, backend: { id: host.pod(p.pod)!.id } };
  };
  /** One whole turn through the hooks, as server.ts calls them; the backend it was sent to. */
  const turn = async (sessionId: string, serviceMs = 10): Promise<string> => {
    const t = shared.turn(input(sessionId))!;
    await t.load();
    const placed = await t.placed(place(sessionId), 0, () => place(sessionId));
    host.dispatched(placed.p, clock.t);
    clock.t += serviceMs;
    host.finished(placed.p, { promptTokens: 32, completionTokens: 4 }, clock.t);
    t.completed(clock.t);
    return placed.backend.id;
  };
  return { host, shared, place, turn, input, owner };
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

test('adoptShared: max of the figures, the host only when its row holds a ready pod, never a migration; creates the session', () => {
  const clock = { t: 1000 };
  const { host } = replica(new MemoryStore(), clock);
  assert.equal(host.adoptShared('s', { hostRow: 1, attainedMs: 50, criticalPathMs: 7, lastMigration: -Infinity, contextTokens: 40 }, 1000, TTL), true);
  let s = host.sessions.get(host.sessionKey('s'))!;
  assert.deepEqual([s.host, s.attained, s.criticalPath, s.contextTokens, s.migrations], [1, 50, 7, 40, 0]);
  // Lower shared figures lower nothing; another ready host is taken, without counting a migration.
  host.adoptShared('s', { hostRow: 0, attainedMs: 20, criticalPathMs: 3, lastMigration: 900, contextTokens: 10 }, 1001, TTL);
  s = host.sessions.get(host.sessionKey('s'))!;
  assert.deepEqual([s.host, s.attained, s.criticalPath, s.contextTokens, s.lastMigration, s.migrations], [0, 50, 7, 40, 900, 0]);
  // A row that is not ready (down here), or none, leaves the local binding as it is.
  host.setPod(1, { id: 'e1', role: 'both', models: new Set([MODEL]), state: 'down' });
  assert.equal(host.adoptShared('s', { hostRow: 1, attainedMs: 60, criticalPathMs: 0, lastMigration: -Infinity, contextTokens: 0 }, 1002, TTL), false);
  assert.equal(host.adoptShared('s', { hostRow: 5, attainedMs: 0, criticalPathMs: 0, lastMigration: -Infinity, contextTokens: 0 }, 1002, TTL), false);
  assert.equal(host.adoptShared('s', { hostRow: null, attainedMs: 0, criticalPathMs: 0, lastMigration: -Infinity, contextTokens: 0 }, 1002, TTL), false);
  s = host.sessions.get(host.sessionKey('s'))!;
  assert.deepEqual([s.host, s.attained], [0, 60]);
});

test('turns alternating between two replicas follow one binding; attained service is the sum on both', async () => {
  const clock = { t: 1000 };
  const store = new MemoryStore();
  const a = replica(store, clock);
  const b = replica(store, clock);
  a.place(null); // replica A's rotation is one decision ahead: alone, the replicas would disagree on a new session
  const served = [await a.turn('s', 10)];
  await flush();
  for (let i = 1; i < 6; i++) {
    served.push(await (i % 2 === 0 ? a : b).turn('s', 10));
    await flush();
  }
  assert.equal(new Set(served).size, 1, served.join(','));
  await a.shared.refresh('s');
  await b.shared.refresh('s');
  assert.equal(a.host.session('s')!.attainedServiceMs, 60);
  assert.equal(b.host.session('s')!.attainedServiceMs, 60);
  assert.equal((await store.load('s') as { ok: true; value: { attainedMs: number } }).value.attainedMs, 60);
});

test('the race: both replicas load nothing and decide apart; the bind that loses follows the winner (routed again)', async () => {
  const clock = { t: 1000 };
  const store = new MemoryStore();
  const a = replica(store, clock);
  const b = replica(store, clock);
  a.place(null);
  const ta = a.shared.turn(a.input('new'))!;
  const tb = b.shared.turn(b.input('new'))!;
  await Promise.all([ta.load(), tb.load()]);
  const pa = a.place('new');
  const pb = b.place('new');
  assert.notEqual(pa.backend.id, pb.backend.id, 'alone they disagree');
  const [xa, xb] = await Promise.all([ta.placed(pa, 0, () => a.place('new')), tb.placed(pb, 0, () => b.place('new'))]);
  assert.equal(xa.backend.id, pa.backend.id, 'the first bind wins');
  assert.equal(xb.backend.id, pa.backend.id, 'the second follows it');
  assert.equal(b.host.session('new')!.host, pa.backend.id);
  assert.deepEqual([a.shared.follows.bind, b.shared.follows.bind, b.shared.rerouted], [0, 1, 1]);
  const rec = await store.load('new') as { ok: true; value: { host: string; migrations: number } };
  assert.deepEqual([rec.value.host, rec.value.migrations], [pa.backend.id, 0]);
});

test('a data-plane thread\'s turns: figures by message (a bind\'s seed asked at the load), the route again a promise; the same bindings and service', async () => {
  const clock = { t: 1000 };
  const store = new MemoryStore();
  const a = replica(store, clock);
  const b = replica(store, clock, true);
  a.place(null);
  // The race, replica B on a data-plane thread: its bind loses and it follows A's binding, routed again by message.
  const ta = a.shared.turn(a.input('new'))!;
  const tb = b.shared.turn(b.input('new'))!;
  await Promise.all([ta.load(), tb.load()]);
  assert.deepEqual(b.owner!.asked, ['figures'], 'no record: the seed is asked with the load, before the decision');
  const pa = a.place('new');
  const pb = b.place('new');
  assert.notEqual(pa.backend.id, pb.backend.id, 'alone they disagree');
  const [xa, xb] = await Promise.all([ta.placed(pa, 0, () => a.place('new')), tb.placed(pb, 0, () => new Promise<typeof pb>((resolve) => setImmediate(() => resolve(b.place('new')))))]);
  assert.deepEqual([xa.backend.id, xb.backend.id], [pa.backend.id, pa.backend.id], 'the second follows the first bind');
  assert.deepEqual(b.owner!.asked, ['figures', 'adopt'], 'the winner adopted before the route again');
  assert.deepEqual([b.shared.follows.bind, b.shared.rerouted], [1, 1]);
  // Then alternating turns: the service reaches the store after B's figures answer, and both agree.
  for (let i = 0; i < 4; i++) {
    assert.equal(await (i % 2 === 0 ? b : a).turn('new', 10), pa.backend.id);
    await flush();
    await flush();
  }
  assert.ok(b.owner!.asked.filter((x) => x === 'figures').length >= 3, 'each completed turn of B asks the owner its figures');
  await a.shared.refresh('new');
  await b.shared.refresh('new');
  assert.equal(a.host.session('new')!.attainedServiceMs, 40);
  assert.equal(b.host.session('new')!.attainedServiceMs, 40);
  assert.equal((await store.load('new') as { ok: true; value: { attainedMs: number } }).value.attainedMs, 40);
});

test('a retry on another backend and a host that is not ready here move the binding by casHost, not as migrations', async () => {
  const clock = { t: 1000 };
  const store = new MemoryStore();
  const a = replica(store, clock);
  const b = replica(store, clock);
  const first = await a.turn('s');
  const row = a.host.rows.rowOf(first)!;
  // A retry: the same request again on the other backend.
  const t = a.shared.turn(a.input('s'))!;
  await t.load();
  const retry = await t.placed(a.place('s', new Set([row]), 1), 1, () => a.place('s', new Set([row]), 1));
  assert.notEqual(retry.backend.id, first);
  let rec = (await store.load('s') as { ok: true; value: { host: string; migrations: number } }).value;
  assert.deepEqual([rec.host, rec.migrations], [retry.backend.id, 0]);
  // Replica B sees that host down: it places the session elsewhere and moves the binding, not as a migration.
  const down = b.host.rows.rowOf(retry.backend.id)!;
  b.host.setPod(down, { id: retry.backend.id, role: 'both', models: new Set([MODEL]), state: 'down' });
  const moved = await b.turn('s');
  assert.equal(moved, first);
  rec = (await store.load('s') as { ok: true; value: { host: string; migrations: number } }).value;
  assert.deepEqual([rec.host, rec.migrations], [first, 0]);
});

test('a failed migration\'s revert to the source moves the shared binding back, not as a migration', async () => {
  const clock = { t: 1000 };
  const store = new MemoryStore();
  const a = replica(store, clock);
  const source = await a.turn('s');
  const sourceRow = a.host.rows.rowOf(source)!;
  // The next turn migrates (here: placed away from the source, as ear's migrate decision would): the cas wins.
  const t = a.shared.turn(a.input('s'))!;
  await t.load();
  const moved = await t.placed(a.place('s', new Set([sourceRow])), 0, () => a.place('s', new Set([sourceRow])));
  assert.notEqual(moved.backend.id, source);
  let rec = (await store.load('s') as { ok: true; value: { host: string; migrations: number; lastMigration: number } }).value;
  assert.deepEqual([rec.host, rec.migrations], [moved.backend.id, 1]);
  const lastMigration = rec.lastMigration;
  // Its transfer failed: server.ts reports the request's return to the source.
  t.reverted(source);
  await flush();
  rec = (await store.load('s') as { ok: true; value: { host: string; migrations: number; lastMigration: number } }).value;
  assert.deepEqual([rec.host, rec.migrations, rec.lastMigration], [source, 1, lastMigration], 'back on the source; the move\'s cool-down stands');
  t.reverted(source); // nothing to do a second time
  await flush();
  assert.equal((await store.load('s') as { ok: true; value: { host: string } }).value.host, source);
});

test('a store that does not answer leaves the request to the local table', async () => {
  const clock = { t: 1000 };
  const degraded: SessionStore = Object.assign(new MemoryStore(), {
    load: async () => DEGRADED.timeout, bind: async () => DEGRADED.down, casHost: async () => DEGRADED.down, addService: async () => DEGRADED.error
  });
  const a = replica(degraded, clock);
  const served = [await a.turn('s'), await a.turn('s'), await a.turn('s')];
  assert.equal(new Set(served).size, 1);
  assert.equal(a.host.session('s')!.attainedServiceMs, 30);
});

test('config: sessionStore is memory or redis://HOST[:PORT][/DB], named in the error', () => {
  assert.equal(buildConfig({}).sessionStore, 'memory');
  assert.equal(buildConfig({}, { sessionStore: 'redis://10.0.0.5:6380/2' }).sessionStore, 'redis://10.0.0.5:6380/2');
  assert.equal(buildConfig({ sessionStoreTimeoutMs: 200 }).sessionStoreTimeoutMs, 200);
  for (const bad of ['redis', 'redis://h:0', 'redis://u:p@h', 'redis://h/x', 'memcached://h', '']) {
    assert.throws(() => buildConfig({ sessionStore: bad }), (err: Error) => err instanceof ConfigError && /^config sessionStore: /.test(err.message) && !/config sessionStore: config/.test(err.message), bad);
  }
  assert.throws(() => buildConfig({ sessionStoreTimeoutMs: 0 }), /config sessionStoreTimeoutMs: must be an integer in \[1, 60000\]/);
});
