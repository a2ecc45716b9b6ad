// Evictions of retained prefixes (issue 31 part 3): the routing host watches a retained prefix's blocks in the prefix
// index (which the engines' KV events keep; here a writer stands for the kv-events thread) and counts a record whose
// first or deepest block its pod lost while the record was live; the record then ends. Nothing else is counted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { routingHost, type TestHost } from '../fixtures/host.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { WATCH_PENDING_MS } from '../../src/core/retention.js';

const NONE = new Set<number>();
const BLOCKS = 64;

interface Rig { t: TestHost; writer: PrefixIndexWriter }

function rig (): Rig {
  const t = routingHost({ policy: 'sticky', sessionTtlMs: 3_600_000, pods: [{ id: 'p0', kvCapacityBlocks: 10_000 }, { id: 'p1', kvCapacityBlocks: 10_000 }] });
  return { t, writer: new PrefixIndexWriter(t.region) };
}

/** A prompt of BLOCKS whole blocks, its tokens from `seed`. */
function keysFor (t: TestHost, seed: number): BigUint64Array {
  return t.keysOf(Array.from({ length: BLOCKS * 16 }, (_, i) => (seed * 7919 + i) % 50_000));
}

/** The engine on `pod` holds (computed) these blocks: what its BlockStored events tell the index. */
function stored (r: Rig, keys: BigUint64Array, pod: number, now: number): void {
  for (const k of keys) r.writer.insert(k, pod, r.writer.kind.confirmed, now);
}

function evicted (r: Rig, key: bigint, pod: number): void {
  r.writer.remove(key, pod, r.writer.mask.confirmed);
}

/** One turn of `session` with these keys, routed, computed and ended in a tool call (retained); returns its pod. */
function toolTurn (r: Rig, session: string, keys: BigUint64Array, now: number, toolCall = true): number {
  const { host } = r.t;
  const p = host.route(r.t.request({ sessionId: session, promptTokens: keys.length * 16, blockKeys: keys, maxTokens: 16 }), NONE, now);
  host.dispatched(p, now);
  host.firstToken(p, now + 1);
  host.finished(p, { promptTokens: keys.length * 16, completionTokens: 16, toolCall }, now + 2);
  return p.pod;
}

test('a retained prefix whose deepest block its engine evicted is counted once, and its record ends', () => {
  const r = rig();
  const { host } = r.t;
  const keys = keysFor(r.t, 1);
  const pod = toolTurn(r, 'a', keys, 0, false);
  stored(r, keys, pod, 1);
  toolTurn(r, 'a', keys, 100);
  const a = host.sessionKey('a');
  assert.ok(host.retention.of(a) !== null);
  host.expireRetention(200);
  assert.equal(host.retention.stats().evictions, 0, 'held, nothing evicted');
  evicted(r, keys[BLOCKS - 1], pod);
  host.expireRetention(300);
  assert.equal(host.retention.stats().evictions, 1);
  assert.equal(host.retention.of(a), null, 'the record ends: its blocks are not kept any more');
  assert.equal(host.retention.blocks(pod), 0);
  host.expireRetention(400);
  assert.equal(host.retention.stats().evictions, 1, 'counted once');
});

test('blocks lost elsewhere, another prompt\'s on the same pod, or the record\'s after it ended are not counted', () => {
  const r = rig();
  const { host } = r.t;
  const keys = keysFor(r.t, 2);
  const other = keysFor(r.t, 3);
  const pod = toolTurn(r, 'a', keys, 0, false);
  stored(r, keys, pod, 1);
  stored(r, keys, 1 - pod, 1);
  stored(r, other, pod, 1);
  toolTurn(r, 'a', keys, 100);
  // Another prompt's blocks on the retained prefix's pod, and the same prefix's on the other pod, go.
  for (const k of other) evicted(r, k, pod);
  for (const k of keys) evicted(r, k, 1 - pod);
  host.expireRetention(200);
  assert.equal(host.retention.stats().evictions, 0);
  assert.ok(host.retention.of(host.sessionKey('a')) !== null, 'still retained');
  // Its TTL ran out (the default gap × gapFactor); an eviction after it is the engine's right.
  const until = host.retention.of(host.sessionKey('a'))!.until;
  assert.equal(host.expireRetention(until), 1);
  evicted(r, keys[0], pod);
  host.expireRetention(until + 100);
  assert.deepEqual([host.retention.stats().evictions, host.retention.stats().expired], [0, 1]);
});

test('a prefix whose blocks the index learns after the turn ended is watched from then; its head evicted counts', () => {
  const r = rig();
  const { host } = r.t;
  const keys = keysFor(r.t, 4);
  const pod = toolTurn(r, 'a', keys, 0);
  host.expireRetention(100);
  // The engine's events come late: the watch was pending, and holds from the first look that sees the blocks.
  stored(r, keys, pod, 150);
  host.expireRetention(200);
  evicted(r, keys[0], pod);
  host.expireRetention(300);
  assert.equal(host.retention.stats().evictions, 1);
});

test('a pending watch whose blocks never show up (no KV events) gives up and counts nothing', () => {
  const r = rig();
  const { host } = r.t;
  const keys = keysFor(r.t, 5);
  const pod = toolTurn(r, 'a', keys, 0, false);
  toolTurn(r, 'a', keys, 10, true);
  host.expireRetention(WATCH_PENDING_MS + 100);
  // Blocks that show up after the watch gave up, then go: not watched any more.
  stored(r, keys, pod, WATCH_PENDING_MS + 150);
  host.expireRetention(WATCH_PENDING_MS + 200);
  evicted(r, keys[BLOCKS - 1], pod);
  host.expireRetention(WATCH_PENDING_MS + 300);
  assert.equal(host.retention.stats().evictions, 0);
});

test('an eviction between two looks is seen when the session\'s next turn comes, before its record ends', () => {
  const r = rig();
  const { host } = r.t;
  const keys = keysFor(r.t, 6);
  const pod = toolTurn(r, 'a', keys, 0, false);
  stored(r, keys, pod, 1);
  toolTurn(r, 'a', keys, 100);
  evicted(r, keys[BLOCKS - 1], pod);
  // No upkeep between the eviction and the next turn.
  toolTurn(r, 'a', keys, 150, false);
  const s = host.retention.stats();
  assert.deepEqual([s.evictions, s.resumed], [1, 1]);
});

test('a hinted TTL is kept as asked (bounded at the door by maxRetentionTtlMs): cache_control 1h is an hour', () => {
  const r = rig();
  const { host } = r.t;
  const keys = keysFor(r.t, 7);
  const p = host.route(r.t.request({ sessionId: 'h', promptTokens: keys.length * 16, blockKeys: keys, maxTokens: 16 }), NONE, 0);
  host.dispatched(p, 0);
  host.firstToken(p, 1);
  host.finished(p, { promptTokens: keys.length * 16, completionTokens: 16, toolCall: true, retainTtlMs: 3_600_000 }, 2);
  const rec = host.retention.of(host.sessionKey('h'))!;
  assert.equal(rec.until - rec.since, 3_600_000);
  assert.ok(host.retention.opts.maxTtlMs < 3_600_000, 'the learnt bound is shorter: it does not apply to a hint');
});
