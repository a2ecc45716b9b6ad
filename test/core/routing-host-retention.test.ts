// Retention and KV room on the routing host (issue 31 parts 3 and 4): a turn that ended in a tool call keeps
// its prefix retained on its pod for the session's learnt gap, bounded per pod; ear places new sessions where
// their KV fits (retained prefixes count as taken) and moves a session whose host cannot hold it before its turn
// runs; program-ttl binds new sessions by room and never moves one.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { routingHost, type TestHost } from '../fixtures/host.js';
import { RetentionTable } from '../../src/core/retention.js';
import type { Placement } from '../../src/core/routing-host.js';

const NONE = new Set<number>();
/** Pods of 1,000 blocks of 16 tokens (16,000 tokens each). */
const CAPACITY = 1000;

/** shortCost off for ear: these pods are short of KV (16,000 tokens < 3 × the contexts here), where ear would place by cost. */
function kvHost (policy: string, knobs: Record<string, unknown> = {}): TestHost {
  return routingHost({
    policy, knobs: policy === 'ear' ? { shortCost: false, ...knobs } : knobs, sessionTtlMs: 3_600_000,
    pods: [{ id: 'p0', kvCapacityBlocks: CAPACITY }, { id: 'p1', kvCapacityBlocks: CAPACITY }]
  });
}

/** One whole turn of `session` with `prompt` tokens: routed, dispatched, computed and ended (a tool call unless told). */
function turn (t: TestHost, session: string, prompt: number, now: number, toolCall = true): Placement {
  const p = t.host.route(t.request({ sessionId: session, promptTokens: prompt, maxTokens: 16 }), NONE, now);
  t.host.dispatched(p, now);
  if (p.migrateFrom !== null) t.host.migrationEnded(p, true, now + 1);
  t.host.firstToken(p, now + 1);
  t.host.finished(p, { promptTokens: prompt, completionTokens: 16, toolCall }, now + 2);
  return p;
}

test('a turn that ended in a tool call retains its prefix on its pod for the learnt gap; the next turn ends it and teaches the gap', () => {
  const t = kvHost('sticky');
  const key = t.host.sessionKey('a');
  const first = turn(t, 'a', 3200, 0);
  const r = t.host.retention.of(key);
  assert.ok(r !== null, 'retained after a tool-call turn');
  assert.equal(r.pod, first.pod);
  assert.equal(r.blocks, Math.ceil((3200 + 16) / 16));
  assert.equal(t.host.retention.blocks(first.pod), r.blocks);
  // No gap learnt yet: the default gap × gapFactor.
  const o = t.host.retention.opts;
  assert.equal(r.until - r.since, o.defaultGapMs * o.gapFactor);
  // The next turn comes 3 s after the first ended: the record ends, the gap is learnt.
  turn(t, 'a', 3400, 2 + 3000, false);
  assert.equal(t.host.retention.of(key), null, 'a turn that did not end in a tool call retains nothing');
  assert.equal(t.host.retention.learntGap(key), 3000);
  assert.equal(t.host.retention.blocks(first.pod), 0);
  // A turn that ended in a tool call again: retained for the learnt gap × gapFactor, and expires after it.
  turn(t, 'a', 3600, 10_000);
  const again = t.host.retention.of(key)!;
  assert.equal(again.until - again.since, 3000 * o.gapFactor);
  assert.equal(t.host.expireRetention(again.until - 1), 0);
  assert.equal(t.host.expireRetention(again.until), 1);
  assert.equal(t.host.retention.of(key), null);
});

test('a hinted TTL wins over the learnt gap, as given (its bound is the door\'s); the learnt one within the bounds', () => {
  const r = new RetentionTable({ minTtlMs: 1000, maxTtlMs: 60_000, defaultGapMs: 50_000, gapFactor: 2 });
  assert.equal(r.retain(1n, 0, 10, 0, 100, 30_000).until, 30_000);
  assert.equal(r.retain(2n, 0, 10, 0, 100, 3_600_000).until, 3_600_000, '1 h hint: an hour (maxRetentionTtlMs bounds it at the door)');
  assert.equal(r.retain(3n, 0, 10, 0, 100, 10).until, 10, 'a short hint is as short as asked');
  assert.equal(r.retain(4n, 0, 10, 0, 100).until, 60_000, 'learnt: 50 s × 2, clamped to maxTtlMs');
  assert.equal(new RetentionTable({ minTtlMs: 1000, defaultGapMs: 100, gapFactor: 2 }).retain(5n, 0, 10, 0, 100).until, 1000, 'learnt: clamped to minTtlMs');
});

test('retained blocks per pod stay within maxShare of its KV, the oldest records dropped first', () => {
  const r = new RetentionTable({ maxShare: 0.5 });
  r.retain(1n, 0, 200, 0, 1000);
  r.retain(2n, 0, 200, 1, 1000);
  r.retain(9n, 1, 400, 1, 1000);
  assert.equal(r.blocks(0), 400);
  r.retain(3n, 0, 200, 2, 1000); // 600 > 500: the oldest on pod 0 goes
  assert.equal(r.of(1n), null);
  assert.ok(r.of(2n) !== null && r.of(3n) !== null);
  assert.equal(r.blocks(0), 400);
  assert.equal(r.blocks(1), 400, 'another pod is not touched');
  assert.equal(r.stats().overShare, 1);
});

test('ear places a new session where its KV fits without evicting a retained prefix', () => {
  const t = kvHost('ear');
  // Session a on p0 (the rotation's first), 7,200 tokens: ends in a tool call, 451 blocks retained there.
  const a = turn(t, 'a', 7200, 0);
  assert.equal(a.pod, 0);
  assert.equal(t.host.retention.blocks(0), 451);
  // p1 is the busier (pending prefill), so without KV room ear would place the next session on p0.
  t.host.load.addPendingPrefill(1, 1600);
  const b = t.host.route(t.request({ sessionId: 'b', promptTokens: 8000, maxTokens: 16 }), NONE, 10);
  assert.equal(b.reason, 'new-session');
  assert.equal(b.pod, 1, 'p0 would have to evict a\'s retained prefix; p1 has room');

  const old = kvHost('ear', { kvAware: false });
  assert.equal(turn(old, 'a', 7200, 0).pod, 0);
  old.host.load.addPendingPrefill(1, 1600);
  assert.equal(old.host.route(old.request({ sessionId: 'b', promptTokens: 8000, maxTokens: 16 }), NONE, 10).pod, 0, 'the ablation: least pending prefill only');
});

test('ear keeps a session on its host when its own retained prefix is what fills it, and moves it before its turn when the host cannot hold it', () => {
  const t = kvHost('ear');
  const first = turn(t, 'a', 7000, 0);
  assert.equal(first.pod, 0);
  assert.equal(t.host.retention.blocks(0), 439);
  // p0 has 20% of its KV in use: 800 − 439 retained = 361 blocks of room, below the 451 the next turn needs; but
  // the 439 are its own: the next turn stays.
  t.host.engineLoad(0, { running: 1, waiting: 0, kvUsage: 0.2, numGpuBlocks: CAPACITY }, 500);
  const second = turn(t, 'a', 7200, 1000);
  assert.equal(second.reason, 'session-host');
  assert.equal(second.pod, 0);
  // The host fills with other work (60% in use): 400 blocks and its own 451, below the 464 the next turn needs.
  t.host.engineLoad(0, { running: 3, waiting: 0, kvUsage: 0.6, numGpuBlocks: CAPACITY }, 1500);
  const third = turn(t, 'a', 7400, 2000);
  assert.equal(third.reason, 'kv-move');
  assert.equal(third.migrateFrom, 0);
  assert.equal(third.pod, 1);
  assert.equal(t.host.sessions.get(t.host.sessionKey('a'))!.host, 1);

  const old = kvHost('ear', { kvAware: false });
  turn(old, 'a', 7000, 0);
  old.host.engineLoad(0, { running: 3, waiting: 0, kvUsage: 0.6, numGpuBlocks: CAPACITY }, 1500);
  const stays = turn(old, 'a', 7400, 2000);
  assert.equal(stays.reason, 'session-host', 'the ablation watches pending prefill only');
});

test('ear leaves a session on its host when no other pod could hold it either', () => {
  const t = kvHost('ear');
  turn(t, 'a', 8000, 0);
  t.host.engineLoad(0, { running: 3, waiting: 0, kvUsage: 0.6, numGpuBlocks: CAPACITY }, 1500);
  t.host.engineLoad(1, { running: 3, waiting: 0, kvUsage: 0.7, numGpuBlocks: CAPACITY }, 1500);
  const p = turn(t, 'a', 8400, 2000);
  assert.equal(p.reason, 'kv-no-target');
  assert.equal(p.pod, 0);
  assert.equal(p.migrateFrom, null);
});

test('program-ttl binds a new session to the pod with most room after retained prefixes, and never moves a bound one', () => {
  const t = kvHost('program-ttl');
  const a = turn(t, 'a', 8000, 0);
  assert.equal(a.reason, 'program-new');
  const b = turn(t, 'b', 1600, 10);
  assert.equal(b.pod, 1 - a.pod, 'the other pod: a\'s retained prefix takes room on its own');
  // a's host gets hot and full: a stays (no migration in program-ttl).
  t.host.load.addPendingPrefill(a.pod, 100_000);
  t.host.engineLoad(a.pod, { running: 9, waiting: 9, kvUsage: 0.95, numGpuBlocks: CAPACITY }, 100);
  const again = turn(t, 'a', 8200, 200);
  assert.equal(again.reason, 'program-home');
  assert.equal(again.pod, a.pod);
  assert.equal(again.migrateFrom, null);
});
