// ear through the routing host and the real shared tables: a migrate decision is recorded as a move of the
// session (migration count, lastMigration), and the recorded lastMigration is what holds the next move back.
// The placement names the pod the session moved from (migrateFrom), for the migration mechanics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { routingHost } from '../fixtures/host.js';
import { createPolicy } from '../../src/core/policies/index.js';
import type { Policy } from '../../src/core/policy.js';

const NONE = new Set<number>();

test('ear on the routing host: a hot host moves the session once, the cool-down holds it, then it may move again', () => {
  const { host, keysOf, request } = routingHost({ policy: 'ear', pods: 3, sessionTtlMs: 3_600_000 });
  const req = request({ sessionId: 's', promptTokens: 64, blockKeys: keysOf(Array.from({ length: 64 }, (_, i) => i + 1)) });
  const key = host.sessionKey('s');
  const turn = (now: number) => {
    const p = host.route(req, NONE, now);
    host.dispatched(p, now);
    // The target's first token: the transfer is done (the adapters end a migration there).
    if (p.migrateFrom !== null) host.migrationEnded(p, true, now + 1);
    host.firstToken(p, now + 1);
    host.finished(p, { promptTokens: 64, completionTokens: 8 }, now + 2);
    return p;
  };

  const first = turn(0);
  assert.equal(first.reason, 'new-session');
  const a = first.pod;
  host.load.addPendingPrefill(a, 40000); // the host turns hot (> tHot 32768)
  const second = turn(1000);
  assert.equal(second.reason, 'migrate');
  assert.equal(second.migrateFrom, a);
  assert.equal(first.migrateFrom, null);
  const b = second.pod;
  assert.notEqual(b, a);
  assert.equal(host.sessions.get(key)!.host, b);
  assert.equal(host.sessions.get(key)!.migrations, 1);
  assert.equal(host.sessions.get(key)!.lastMigration, 1000);

  host.load.addPendingPrefill(b, 50000); // the new host is hotter still
  const third = turn(1000 + 59_999);
  assert.equal(third.reason, 'hot-cooling');
  assert.equal(third.pod, b);
  assert.equal(host.sessions.get(key)!.migrations, 1);

  const fourth = turn(1000 + 60_000);
  assert.equal(fourth.reason, 'migrate');
  assert.equal(fourth.pod, 3 - a - b, 'the one pod left, with no pending prefill');
  assert.equal(host.sessions.get(key)!.migrations, 2);
});

test('the host gives policies the largest session context it has seen (a routed prompt, a finished context)', () => {
  const seen: Array<number | undefined> = [];
  const policy = createPolicy('sticky');
  const spy: Policy = { name: 'spy', route: (req, cluster, now) => { seen.push(cluster.maxContextTokens); return policy.route(req, cluster, now); } };
  const { host, request } = routingHost({ policy: spy, pods: 2 });
  const turn = (r: ReturnType<typeof request>, context: { promptTokens: number; completionTokens: number } | null, now: number) => {
    const p = host.route(r, NONE, now);
    host.dispatched(p, now);
    host.firstToken(p, now + 1);
    host.finished(p, context, now + 2);
  };
  turn(request({ sessionId: 'a', promptTokens: 5000 }), { promptTokens: 5000, completionTokens: 300 }, 0);
  // no session: its prompt is no session's context
  turn(request({ promptTokens: 90000 }), { promptTokens: 90000, completionTokens: 10 }, 10);
  turn(request({ sessionId: 'b', promptTokens: 2000 }), null, 20);
  turn(request({ sessionId: 'b', promptTokens: 7000 }), null, 30);
  turn(request({ sessionId: 'a', promptTokens: 100 }), null, 40);
  assert.deepEqual(seen, [5000, 5300, 5300, 7000, 7000]);
});

test('the largest session context is forgotten once two session TTLs pass without it (one huge session does not keep a fleet short)', () => {
  const seen: Array<number | undefined> = [];
  const policy = createPolicy('sticky');
  const spy: Policy = { name: 'spy', route: (req, cluster, now) => { seen.push(cluster.maxContextTokens); return policy.route(req, cluster, now); } };
  const ttl = 60_000;
  const { host, request } = routingHost({ policy: spy, pods: 2, sessionTtlMs: ttl });
  const turn = (session: string, promptTokens: number, now: number) => {
    const p = host.route(request({ sessionId: session, promptTokens }), NONE, now);
    host.dispatched(p, now);
    host.finished(p, null, now + 1);
  };
  turn('big', 100_000, 0);
  turn('small', 2000, ttl + 10); // the next window: the big one still counts
  turn('small', 2000, 2 * ttl + 20); // the window after: only what the last one saw
  turn('small', 2000, 4 * ttl + 30); // two windows with nothing: only this prompt
  assert.deepEqual(seen, [100_000, 100_000, 2000, 2000]);
});

test('the host gives policies the live sessions\' contexts: the last of each session seen within the live window', () => {
  const seen: Array<number | undefined> = [];
  const policy = createPolicy('sticky');
  const spy: Policy = { name: 'spy', route: (req, cluster, now) => { seen.push(cluster.liveContextTokens); return policy.route(req, cluster, now); } };
  const { host, request } = routingHost({ policy: spy, pods: 2 });
  const turn = (session: string | null, promptTokens: number, context: number | null, now: number) => {
    const p = host.route(request({ ...(session === null ? {} : { sessionId: session }), promptTokens }), NONE, now);
    host.dispatched(p, now);
    host.finished(p, context === null ? null : { promptTokens: promptTokens, completionTokens: context - promptTokens }, now + 1);
  };
  turn('a', 5000, 5300, 0);
  turn(null, 90000, 90010, 10); // no session: nobody's context
  turn('b', 2000, null, 20);
  turn('a', 6000, null, 30); // a's prompt replaces its finished 5300
  turn('b', 3000, null, 60_030); // a, last seen at 30, is still live 60 s on
  turn('b', 3000, null, 60_031); // and gone 1 ms later
  assert.deepEqual(seen, [5000, 5300, 7300, 8000, 9000, 3000]);
});
