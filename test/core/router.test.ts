import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAndAttach } from '../../src/core/region.js';
import { BlockHasher, type KeySpan } from '../../src/core/block-keys.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { LoadTable } from '../../src/core/load-table.js';
import { SessionTable } from '../../src/core/session-table.js';
import { Router, type RouteRequest } from '../../src/core/router.js';
import { createPolicy } from '../../src/core/policies/index.js';
import type { Policy, PodView, RequestFeatures } from '../../src/core/policy.js';

function setup (policy: string) {
  const region = createAndAttach({ prefixIndexKeys: 1 << 12, sessions: 256, heapJobs: 16, recordRingOps: 64, pods: 8, scratchSlots: 8, scratchBytes: 1 << 16 });
  const index = new PrefixIndexWriter(region);
  const load = new LoadTable(region);
  const sessions = new SessionTable(region);
  const recorded: Array<{ pod: number; count: number }> = [];
  const router = new Router({ index, load, sessions }, createPolicy(policy), {
    sessionTtlMs: 60_000,
    record: (pod, keys, now) => { recorded.push({ pod, count: keys.count }); index.insertMany(keys, pod, index.kind.assumed, now); }
  });
  const hasher = new BlockHasher(region);
  const pods: PodView[] = [0, 1, 2].map((index) => ({ index, id: `p${index}`, role: 'both', blockSize: 16, kvCapacityBlocks: 1000 }));
  return { region, index, load, sessions, router, hasher, pods, recorded };
}

function req (keys: KeySpan, tokens: number, sessionKey: bigint | null = null): RouteRequest {
  return { model: 'm', sessionKey, parentSessionKey: null, promptTokens: tokens, keys, blockSize: 16, expectedOutputTokens: null };
}

test('a decision is recorded: pending prefill until the first token, in flight until the end, keys assumed on the pod', () => {
  const { router, hasher, pods, load, index, recorded } = setup('least-load');
  const tokens = Array.from({ length: 160 }, (_, i) => i + 1);
  const keys = hasher.hash(tokens, 16, hasher.rootSeed('m'));
  const r = router.route(req(keys, 160), pods, 1000, 0.5);
  assert.equal(r.matchedBlocks, 0);
  assert.equal(r.expectedPrefill, 160);
  router.dispatched(r, req(keys, 160), 1000);
  assert.equal(load.pendingPrefill(r.pod), 160);
  assert.equal(load.inFlight(r.pod), 1);
  assert.deepEqual(recorded, [{ pod: r.pod, count: 10 }]);
  // the next identical prompt sees the assumed blocks on that pod
  const again = router.route(req(keys, 160), pods, 1001, 0.5);
  assert.equal(index.counts[r.pod], 10);
  assert.notEqual(again.pod, r.pod, 'least-load avoids the pod with pending prefill');
  router.firstToken(r);
  assert.equal(load.pendingPrefill(r.pod), 0);
  router.finished(r, req(keys, 160), { sawFirstToken: true, contextTokens: 170, serviceMs: 20 }, 1020);
  assert.equal(load.inFlight(r.pod), 0);
  assert.equal(load.get(r.pod).decisions, 1);
});

test('a request that fails before its first token releases its pending prefill; sessions remember host, service and context', () => {
  const { router, hasher, pods, load, sessions } = setup('sticky');
  const keys = hasher.hash(Array.from({ length: 64 }, (_, i) => i), 16, hasher.rootSeed('m'));
  const r = router.route(req(keys, 64, 7n), pods, 0, 0.1);
  router.dispatched(r, req(keys, 64, 7n), 0);
  router.finished(r, req(keys, 64, 7n), { sawFirstToken: false, contextTokens: null, serviceMs: 5 }, 5);
  assert.equal(load.pendingPrefill(r.pod), 0);
  const r2 = router.route(req(keys, 64, 7n), pods, 10, 0.9);
  assert.equal(r2.pod, r.pod);
  assert.equal(r2.reason, 'session-host');
  router.dispatched(r2, req(keys, 64, 7n), 10);
  router.firstToken(r2);
  router.finished(r2, req(keys, 64, 7n), { sawFirstToken: true, contextTokens: 80, serviceMs: 30 }, 40);
  const s = sessions.get(7n)!;
  assert.equal(s.host, r.pod);
  assert.equal(s.attained, 35);
  assert.equal(s.contextTokens, 80);
  assert.equal(s.inFlight, 0);
});

test('round-robin reads its position from the decisions the tables counted', () => {
  const { router, pods } = setup('round-robin');
  const none = { ptr: 0, count: 0 };
  assert.deepEqual([0, 1, 2, 3].map((t) => router.route(req(none, 10), pods, t, 0).pod), [0, 1, 2, 0]);
});

test('policies see each block key and how much of a match sits only on the offload tier', () => {
  const { hasher, pods, index, load, sessions } = setup('sticky');
  const keys = hasher.hash(Array.from({ length: 160 }, (_, i) => i + 5), 16, hasher.rootSeed('m'));
  index.insertMany(keys, 1, index.kind.confirmed, 0);
  index.insertMany({ ptr: keys.ptr, count: 10 }, 2, index.kind.offloaded, 0);
  let seen: Record<string, unknown> | null = null;
  const spy: Policy = {
    name: 'spy',
    route (f: RequestFeatures) {
      seen = { key3: f.prefix.blockKey!(3), off1: f.prefix.offloadedBlocks!(1), off2: f.prefix.offloadedBlocks!(2), matched1: f.prefix.matched(1), matched2: f.prefix.matched(2) };
      return { pod: 0, reason: 'spy' };
    }
  };
  new Router({ index, load, sessions }, spy, { sessionTtlMs: 1000, record: () => {} }).route(req(keys, 160), pods, 0, 0);
  assert.deepEqual(seen, { key3: keys.keys[3], off1: 0, off2: 10, matched1: 10, matched2: 10 });
});

test('the load view reads the same figures field by field as the whole row', () => {
  const { load } = setup('least-load');
  load.addInFlight(2, 3);
  load.countDecision(2);
  load.countDecision(2);
  load.setEngine(2, { running: 5, waiting: 7, kvUsage: 0.25, time: 10 });
  const row = load.get(2);
  assert.deepEqual([load.running(2), load.waiting(2), load.kvUsage(2), load.decisions(2)], [row.running, row.waiting, row.kvUsage, row.decisions]);
  assert.deepEqual([row.running, row.waiting, row.kvUsage, row.decisions], [5, 7, 0.25, 2]);
  assert.throws(() => load.kvUsage(999), RangeError);
});
