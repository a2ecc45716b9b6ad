import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { SessionTable, type SessionRecord } from '../../src/core/session-table.js';
import { ReferenceSessionTable } from '../../src/core/reference/session-table.js';
import { smallRegion } from './fixtures/small-region.js';

type Op =
  | { t: 'upsert'; k: number; ttl: number }
  | { t: 'get'; k: number }
  | { t: 'host'; k: number; pod: number }
  | { t: 'inflight'; k: number; d: number }
  | { t: 'time'; k: number; field: 'attained' | 'criticalPath' | 'wait'; v: number; add: boolean }
  | { t: 'count'; k: number; field: 'contextTokens' | 'host'; v: number }
  | { t: 'update'; k: number; ctx: number; wait: number }
  | { t: 'remove'; k: number }
  | { t: 'expire' }
  | { t: 'unbind'; pod: number }
  | { t: 'tick'; dt: number };

function opArb (keys: number): fc.Arbitrary<Op> {
  const k = fc.integer({ min: 0, max: keys - 1 });
  return fc.oneof(
    fc.record({ t: fc.constant('upsert' as const), k, ttl: fc.constantFrom(5, 50, 1e9) }),
    fc.record({ t: fc.constant('get' as const), k }),
    fc.record({ t: fc.constant('host' as const), k, pod: fc.integer({ min: -1, max: 5 }) }),
    fc.record({ t: fc.constant('inflight' as const), k, d: fc.integer({ min: -2, max: 2 }) }),
    fc.record({ t: fc.constant('time' as const), k, field: fc.constantFrom('attained' as const, 'criticalPath' as const, 'wait' as const), v: fc.double({ min: 0, max: 1e6, noNaN: true }), add: fc.boolean() }),
    fc.record({ t: fc.constant('count' as const), k, field: fc.constantFrom('contextTokens' as const, 'host' as const), v: fc.integer({ min: 0, max: 1e6 }) }),
    fc.record({ t: fc.constant('update' as const), k, ctx: fc.nat(1e6), wait: fc.double({ min: 0, max: 1e3, noNaN: true }) }),
    fc.record({ t: fc.constant('remove' as const), k }),
    fc.constant({ t: 'expire' as const }),
    fc.record({ t: fc.constant('unbind' as const), pod: fc.integer({ min: 0, max: 5 }) }),
    fc.record({ t: fc.constant('tick' as const), dt: fc.integer({ min: 0, max: 20 }) })
  );
}

test('session table matches the reference on random operation sequences (collisions and backward shifts included)', () => {
  // Capacity 8 → 16 slots and at most 8 keys in play: long probe clusters, so deletions shift records often.
  for (const [capacity, nKeys] of [[8, 8], [64, 48]] as const) {
    const { region } = smallRegion({ sessions: capacity });
    const init = region.fn<(b: number, c: number) => void>('sessInit');
    const base = region.base('TABLE_SESSIONS');
    const slots = region.u32[(base + region.const('SESS_H_MASK')) >>> 2] + 1;
    const view = new SessionTable(region);
    fc.assert(fc.property(fc.array(fc.bigInt({ min: 1n, max: (1n << 64n) - 1n }), { minLength: nKeys, maxLength: nKeys }),
      fc.array(opArb(nKeys), { minLength: 100, maxLength: 300 }), (keyPool, ops) => {
        fc.pre(new Set(keyPool).size === keyPool.length);
        init(base, capacity);
        const unbound0 = view.stats().unbound;
        const ref = new ReferenceSessionTable(capacity);
        let now = 0;
        for (const op of ops) {
          if (op.t === 'tick') { now += op.dt; continue; }
          if (op.t === 'expire') {
            assert.equal(view.expire(now, 2 * slots + capacity), ref.expire(now));
            continue;
          }
          if (op.t === 'unbind') {
            assert.equal(view.unbindPod(op.pod), ref.unbindPod(op.pod));
            continue;
          }
          const key = keyPool[op.k];
          switch (op.t) {
            case 'upsert': assert.equal(view.upsert(key, now, op.ttl), ref.upsert(key, now, op.ttl)); break;
            case 'get': assert.deepEqual(view.get(key), ref.get(key)); break;
            case 'host': assert.equal(view.setHost(key, op.pod, now), ref.setHost(key, op.pod, now)); break;
            case 'inflight': assert.equal(view.addInFlight(key, op.d, now), ref.addInFlight(key, op.d, now)); break;
            case 'time': assert.equal(view.setTime(key, op.field, op.v, op.add), ref.setTime(key, op.field, op.v, op.add)); break;
            case 'count': assert.equal(view.setCount(key, op.field, op.v), ref.setCount(key, op.field, op.v)); break;
            case 'update': assert.equal(view.update(key, { contextTokens: op.ctx, wait: op.wait }), ref.update(key, { contextTokens: op.ctx, wait: op.wait })); break;
            case 'remove': assert.equal(view.remove(key), ref.remove(key)); break;
          }
          assert.equal(view.count, ref.count);
        }
        for (const key of keyPool) assert.deepEqual(view.get(key), ref.get(key));
        assert.equal(view.stats().expired, ref.expired);
        assert.equal(view.stats().evicted, 0);
        assert.equal(view.stats().unbound - unbound0, ref.unbound);
      }), { numRuns: 150 });
  }
});

test('key 0 is refused and an absent session reads as absent', () => {
  const { region } = smallRegion();
  const s = new SessionTable(region);
  assert.throws(() => s.upsert(0n, 0, 10), /nonzero/);
  assert.equal(s.get(0n), undefined);
  assert.equal(s.get(42n), undefined);
  assert.equal(s.setHost(42n, 1, 0), false);
  assert.equal(s.addInFlight(42n, 1, 0), -1);
});

test('a full session table expires idle sessions first, then evicts by CLOCK, sparing sessions in flight', () => {
  const { region } = smallRegion({ sessions: 4 });
  const s = new SessionTable(region);
  for (let k = 1n; k <= 4n; k++) assert.equal(s.upsert(k, 0, 1000), true);
  // Three sessions have a request in flight: the CLOCK must take the fourth.
  for (const k of [1n, 2n, 4n]) s.addInFlight(k, 1, 0);
  assert.equal(s.upsert(5n, 10, 1000), true);
  assert.deepEqual([s.count, s.stats().evicted, s.stats().expired], [4, 1, 0]);
  assert.equal(s.get(3n), undefined, 'the only session without a request in flight is the one evicted');
  for (const k of [1n, 2n, 4n, 5n]) assert.ok(s.get(k), `session ${k} kept`);
  // Later, 1 and 5 are idle past their TTL: a new session expires them instead of evicting.
  s.addInFlight(1n, -1, 20);
  assert.equal(s.upsert(6n, 5000, 1000), true);
  const st = s.stats();
  assert.deepEqual([st.count, st.evicted, st.expired, st.inserted], [3, 1, 2, 6]);
  assert.equal(s.get(1n), undefined);
  assert.equal(s.get(5n), undefined);
  for (const k of [2n, 4n, 6n]) assert.ok(s.get(k));
  // Every session in flight: after two full sweeps the CLOCK evicts one anyway; the table stays within bounds.
  s.upsert(7n, 5001, 1000);
  for (const k of [6n, 7n]) s.addInFlight(k, 1, 5001);
  assert.equal(s.upsert(8n, 5002, 1000), true);
  assert.deepEqual([s.count, s.stats().evicted, s.stats().expired], [4, 2, 2]);
  assert.equal([2n, 4n, 6n, 7n].filter((k) => s.get(k)).length, 3, 'exactly one session in flight was evicted');
});

test('a migration is counted only when the host changes from another pod', () => {
  const { region } = smallRegion();
  const s = new SessionTable(region);
  s.upsert(9n, 0, 100);
  s.setHost(9n, 2, 1);
  s.setHost(9n, 2, 2);
  assert.deepEqual([s.get(9n)!.migrations, s.get(9n)!.lastMigration], [0, -Infinity]);
  s.setHost(9n, 3, 7);
  const r = s.get(9n) as SessionRecord;
  assert.deepEqual([r.host, r.migrations, r.lastMigration], [3, 1, 7]);
});

test('a reader thread never sees a torn record nor misses a present session while the writer churns', async (t) => {
  // A small, half-full table: long probe clusters, so removals keep shifting pinned records.
  const { shared, region } = smallRegion({ sessions: 16 });
  const s = new SessionTable(region);
  // Pinned sessions stay present throughout; churn sessions are inserted and removed around them, so removals
  // shift pinned records back under the reader's feet.
  const pinned = Array.from({ length: 8 }, (_, i) => BigInt(i + 1) * 0x9E3779B97F4A7C15n % (1n << 64n));
  const churn = Array.from({ length: 8 }, (_, i) => BigInt(i + 1000) * 0xC2B2AE3D27D4EB4Fn % (1n << 64n));
  // Every write keeps the record's fields tied to one value v, so a mixed copy is detectable.
  const write = (k: bigint, v: number) => s.update(k, { contextTokens: v, attained: 2 * v, criticalPath: 3 * v, wait: 5 * v, host: (v % 97) - 1 });
  for (const k of pinned) { s.upsert(k, 0, 1e9); write(k, 1); }
  // [0] stop, [1] the reader's hits so far.
  const stop = new Int32Array(new SharedArrayBuffer(8));
  const worker = new Worker(new URL('./fixtures/session-reader.js', import.meta.url), { workerData: { shared, pinned, churn, stop } });
  const result = new Promise<{ hits: number; torn: number; pinnedMisses: number }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  let v = 1;
  // 1.5 s, and on until the reader has made the progress asserted below (a slow machine runs longer, a minute at most).
  const t0 = Date.now();
  while (Date.now() - t0 < 1500 || (Atomics.load(stop, 1) <= 1000 && Date.now() - t0 < 60_000)) {
    for (let i = 0; i < 200; i++) {
      v++;
      const k = churn[v % churn.length];
      if (s.get(k) && v % 3 === 0) s.remove(k);
      else { s.upsert(k, v, 1e9); write(k, v); }
      write(pinned[v % pinned.length], v);
    }
    await new Promise((r) => setImmediate(r));
  }
  Atomics.store(stop, 0, 1);
  const r = await result;
  await worker.terminate();
  t.diagnostic(`reader: ${r.hits} hits; writer: ${v} writes`);
  assert.equal(r.torn, 0, 'torn records seen');
  assert.equal(r.pinnedMisses, 0, 'a present session was reported absent');
  assert.ok(r.hits > 1000, `reader made progress (${r.hits} hits)`);
});

test('unbindPod unbinds every session of a released row without counting a migration, and nothing else', () => {
  const { region } = smallRegion({ sessions: 64 });
  const s = new SessionTable(region);
  for (let k = 1n; k <= 40n; k++) {
    s.upsert(k, 0, 1e9);
    s.setHost(k, Number(k % 4n), 1);
  }
  s.setHost(8n, 1, 5); // 0 → 1: one migration before the release
  s.addInFlight(12n, 1, 6);
  const before = s.get(12n)!;
  assert.equal(s.unbindPod(0), 9, 'keys 4, 12, … 40 but 8');
  assert.equal(s.unbindPod(0), 0, 'a second sweep finds none');
  for (let k = 1n; k <= 40n; k++) {
    const r = s.get(k)!;
    assert.equal(r.host, k % 4n === 0n && k !== 8n ? -1 : Number(k === 8n ? 1n : k % 4n), `session ${k}`);
  }
  assert.deepEqual(s.get(12n), { ...before, host: -1 }, 'every other field kept: in flight, times, migrations');
  assert.deepEqual([s.get(8n)!.migrations, s.get(8n)!.lastMigration], [1, 5]);
  // The next pod on the row binds a session anew: from unbound, not a migration either.
  s.setHost(12n, 0, 9);
  assert.deepEqual([s.get(12n)!.host, s.get(12n)!.migrations], [0, 0]);
  assert.equal(s.stats().unbound, 9);
  assert.equal(s.count, 40);
  assert.throws(() => s.unbindPod(-1), RangeError);
});

test('scan: a reader walks every live session (the migration thread enumerates idle sessions this way)', () => {
  const { region } = smallRegion();
  const t = new SessionTable(region);
  const reader = new SessionTable(region);
  const live = new Set<bigint>();
  for (let i = 1n; i <= 40n; i++) { t.upsert(i * 7919n, 0, 1e9); live.add(i * 7919n); }
  for (let i = 1n; i <= 40n; i += 3n) { t.remove(i * 7919n); live.delete(i * 7919n); }
  t.setCount(7919n * 2n, 'migratingFrom', 3);
  const seen = new Map([...reader.scan()].map((r) => [r.key, r]));
  assert.deepEqual(new Set(seen.keys()), live);
  assert.equal(seen.get(7919n * 2n)!.migratingFrom, 3);
  assert.equal(seen.get(7919n * 3n)!.migratingFrom, -1, 'a new session migrates from nowhere');
  t.unbindPod(3);
  assert.equal(reader.get(7919n * 2n)!.migratingFrom, -1, 'a released source ends the mark');
});
