// A proactive move applied on the main thread: the routing host's compare-and-set (a turn that came while the
// KV moved drops the move), and with a shared store its casHost, so of two replicas whose migration threads
// move one session only one does; the other follows the winner. Two routing hosts over one MemoryStore stand
// for two replicas, as in test/store/shared-sessions-unit.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryStore } from '../../src/store/memory-store.js';
import { DEGRADED, type SessionStore } from '../../src/store/session-store.js';
import { SharedSessions } from '../../src/store/shared-sessions.js';
import { applyIdleMove } from '../../src/gateway/proactive-rebind.js';
import { routingHost } from '../fixtures/host.js';

const TTL = 60_000;

function replica (store: SessionStore | null, clock: { t: number }) {
  const { host } = routingHost({ policy: 'ear-proactive', pods: ['e0', 'e1'], sessionTtlMs: TTL });
  const shared = store === null ? null : new SharedSessions({ store, routing: () => ({ host }), sessionTtlMs: TTL, now: () => clock.t });
  const move = (id: string, from: number, to: number) => applyIdleMove(host, shared, { key: host.sessionKey(id), sessionId: id, from, to }, () => clock.t);
  return { host, shared, move };
}

test('rebind without a shared store: an idle session moves (a migration); a turn in flight drops the move', async () => {
  const clock = { t: 1000 };
  const { host, move } = replica(null, clock);
  host.holdSession('s', 0, TTL, clock.t);
  assert.equal(await move('s', 0, 1), true);
  const s = host.session('s')!;
  assert.deepEqual([s.host, s.migrations], ['e1', 1]);
  assert.equal(host.migrationStats().proactive, 1);
  // A turn came while the KV moved back: the session is busy, the move is dropped and changes nothing.
  const key = host.sessionKey('s');
  host.sessions.addInFlight(key, 1, clock.t);
  assert.equal(await move('s', 1, 0), false);
  assert.equal(host.session('s')!.host, 'e1');
  // A move whose source is no longer the host (the session went elsewhere meanwhile) is dropped too.
  host.sessions.addInFlight(key, -1, clock.t);
  assert.equal(await move('s', 0, 1), false);
  assert.equal(host.session('s')!.migrations, 1);
});

test('rebind with a shared store: the first replica moves the session (a shared migration); the second follows it', async () => {
  const clock = { t: 1000 };
  const store = new MemoryStore();
  const a = replica(store, clock);
  const b = replica(store, clock);
  for (const r of [a, b]) r.host.holdSession('s', 0, TTL, clock.t);
  await store.bind('s', 'e0');
  clock.t = 5000;
  assert.equal(await a.move('s', 0, 1), true);
  const rec = (await store.load('s'));
  assert.ok(rec.ok && rec.value !== null);
  assert.equal(rec.value.host, 'e1');
  assert.equal(rec.value.migrations, 1);
  assert.equal(rec.value.lastMigration, 5000);
  // B's thread planned the same move from its own (stale) view: its store CAS loses, and it follows A.
  b.host.holdSession('s', 0, TTL, clock.t);
  assert.equal(await b.move('s', 0, 1), false);
  assert.equal(b.host.session('s')!.host, 'e1');
  const again = await store.load('s');
  assert.ok(again.ok && again.value !== null);
  assert.equal(again.value.migrations, 1, 'one session, one move');
});

test('rebind with a store that does not answer: the local move stands (the store is a hint)', async () => {
  const clock = { t: 1000 };
  const down = new MemoryStore();
  down.casHost = async () => DEGRADED.down;
  const { host, move } = replica(down, clock);
  host.holdSession('s', 0, TTL, clock.t);
  assert.equal(await move('s', 0, 1), true);
  assert.equal(host.session('s')!.host, 'e1');
});
