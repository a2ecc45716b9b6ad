// A migration in flight, through the routing host and the real shared tables: the session table records it
// (migratingFrom), a turn that comes meanwhile goes to the source and leaves the binding on the target, and
// migrationEnded closes it: ok keeps the session on the target; failed puts the session and the request back
// on the source (not counted as a move, the cool-down kept), unless the source no longer serves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Placement } from '../../src/core/routing-host.js';
import type { Policy } from '../../src/core/policy.js';
import { readEarProactiveKnobs } from '../../src/core/policies/ear.js';
import { ProactivePlanner } from '../../src/migration/proactive-planner.js';
import { MODEL, routingHost } from '../fixtures/host.js';

const NONE = new Set<number>();

/** Moves every session that has a host to the next pod (a stand-in for ear's hot trigger, to isolate the host). */
const mover: Policy = {
  name: 'mover',
  route (req, cluster) {
    const s = req.sessionKey === null ? null : cluster.sessions.get(req.sessionKey);
    if (!s || s.host < 0) return { pod: cluster.pods[0].index, reason: 'new' };
    const to = cluster.pods.find((p) => p.index !== s.host)!.index;
    return { pod: to, migrateFrom: s.host, reason: 'migrate' };
  }
};

function setup () {
  const { host, keysOf, request } = routingHost({ policy: mover, sessionTtlMs: 3_600_000 });
  const req = request({ sessionId: 's', promptTokens: 64, blockKeys: keysOf(Array.from({ length: 64 }, (_, i) => i + 1)) });
  const send = (now: number): Placement => {
    const p = host.route(req, NONE, now);
    host.dispatched(p, now);
    return p;
  };
  const end = (p: Placement, now: number) => host.finished(p, { promptTokens: 64, completionTokens: 4 }, now);
  return { host, send, end, key: host.sessionKey('s') };
}

test('a migration is recorded in flight; a turn that comes meanwhile goes to the source; ok ends it on the target', () => {
  const { host, send, end, key } = setup();
  end(send(0), 1);
  const moving = send(1000);
  assert.equal(moving.reason, 'migrate');
  assert.equal(moving.migrateFrom, 0);
  assert.equal(moving.transferFrom, 0);
  assert.equal(moving.pod, 1);
  assert.deepEqual([host.sessions.get(key)!.host, host.sessions.get(key)!.migratingFrom], [1, 0]);

  const during = send(1001);
  assert.equal(during.reason, 'migration-in-flight');
  assert.equal(during.pod, 0, 'the source still holds the KV');
  assert.equal(during.migrateFrom, null);
  assert.equal(host.sessions.get(key)!.host, 1, 'the binding stays on the target');
  assert.equal(host.sessions.get(key)!.migrations, 1, 'the turn to the source is no move');
  end(during, 1002);

  assert.equal(host.migrationEnded(moving, true, 1003), null);
  assert.equal(host.sessions.get(key)!.migratingFrom, -1);
  end(moving, 1004);
  // Ended: the policy decides again (the mover moves it back), as it would for any turn.
  const next = send(2000);
  assert.equal(next.reason, 'migrate');
  assert.equal(next.migrateFrom, 1);
  assert.deepEqual(host.migrationStats(), { started: 2, done: 1, failed: 0, stayedOnTarget: 0, turnsToSource: 1, proactive: 0 });
});

test('a failed transfer puts the session and its request back on the source, not counted as a move, cool-down kept', () => {
  const { host, send, end, key } = setup();
  end(send(0), 1);
  const moving = send(1000);
  const inFlightOnTarget = host.load.inFlight(1);
  assert.equal(inFlightOnTarget, 1);
  const back = host.migrationEnded(moving, false, 1010);
  assert.ok(back !== null);
  assert.equal(back.pod, 0);
  assert.equal(back.reason, 'migration-failed');
  assert.equal(back.migrateFrom, null);
  assert.equal(host.load.inFlight(1), 0, 'the request left the target unserved');
  host.dispatched(back, 1010);
  assert.equal(host.load.inFlight(0), 1);
  const s = host.sessions.get(key)!;
  assert.equal(s.host, 0);
  assert.equal(s.migrations, 0);
  assert.equal(s.migratingFrom, -1);
  assert.equal(s.lastMigration, 1000, 'the cool-down of the attempt stands');
  end(back, 1020);
  assert.equal(host.migrationStats().failed, 1);
});

test('a failed transfer whose source went down leaves the request on the target', () => {
  const { host, send, end, key } = setup();
  end(send(0), 1);
  const moving = send(1000);
  host.setPod(0, { id: 'p0', role: 'both', models: new Set([MODEL]), state: 'down' });
  assert.equal(host.migrationEnded(moving, false, 1010), null);
  assert.equal(host.sessions.get(key)!.host, 1);
  assert.equal(host.sessions.get(key)!.migratingFrom, -1);
  assert.equal(host.migrationStats().stayedOnTarget, 1);
});

test('a source released while the migration is in flight clears the mark: later turns follow the policy', () => {
  const { host, send, key } = setup();
  send(0);
  send(1000);
  assert.equal(host.sessions.get(key)!.migratingFrom, 0);
  host.retirePod(0);
  assert.equal(host.sessions.get(key)!.migratingFrom, -1);
  assert.equal(host.sessions.get(key)!.host, 1);
});

test('rebindIdle: a proactive move binds an idle session to its target, counted; a turn in flight or a moved host drops it; the planner sees serving pods only', () => {
  const { host, send, end, key } = setup();
  const first = send(0);
  assert.equal(host.rebindIdle(key, 0, 1, 5), false, 'a turn is in flight');
  end(first, 10);
  assert.equal(host.rebindIdle(key, 1, 0, 20), false, 'the session is not on the source named');
  assert.equal(host.rebindIdle(key, 0, 1, 30), true);
  const s = host.sessions.get(key)!;
  assert.deepEqual([s.host, s.migrations, s.lastMigration], [1, 1, 30]);
  host.setPod(0, { id: 'p0', role: 'both', models: new Set([MODEL]), state: 'down' });
  assert.equal(host.rebindIdle(key, 1, 0, 40), false, 'the target does not serve');
  assert.equal(host.migrationStats().proactive, 1);
  // The planner of the migration thread (and of the lab) sees only the pod that serves.
  const planner = new ProactivePlanner({ sessions: host.sessions, load: host.load, pods: host.pods }, readEarProactiveKnobs());
  planner.setBackends(new Map([[0, { id: 'p0', models: new Set([MODEL]) }], [1, { id: 'p1', models: new Set([MODEL]) }]]));
  assert.deepEqual(planner.clusterView(MODEL).pods.map((p) => p.index), [1]);
});
