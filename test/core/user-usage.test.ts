import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { UserUsage } from '../../src/core/user-usage.js';

test('user usage: weighted tokens in a window of aligned buckets, by hand', () => {
  const u = new UserUsage({ windowMs: 1000, buckets: 4 }); // buckets of 250 ms
  assert.equal(u.weigh(100, 10), 120);
  u.record(1n, 100, 10, 0); // bucket 0: 120
  u.record(1n, 50, 0, 240); // bucket 0: 170
  u.record(1n, 0, 5, 260); // bucket 1: 10
  u.record(2n, 1, 1, 999); // bucket 3: 3
  assert.equal(u.tokens(1n, 999), 180);
  assert.deepEqual(u.range(999), { active: 2, min: 3, max: 180 });
  // at 1000 (bucket 4) bucket 0 leaves: 10 left
  assert.equal(u.tokens(1n, 1000), 10);
  assert.deepEqual(u.range(1000), { active: 2, min: 3, max: 10 });
  // at 1250 (bucket 5) user 1 has nothing; user 2 still has bucket 3
  assert.deepEqual(u.range(1250), { active: 1, min: 3, max: 3 });
  assert.equal(u.tokens(1n, 1250), 0);
  assert.equal(u.tokens(99n, 1250), 0);
  // a record long after reuses ring slots without counting what they held
  u.record(1n, 7, 0, 1900); // bucket 7, slot 3 (held user 1's nothing); window 4..7
  assert.equal(u.tokens(1n, 1900), 7);
  assert.deepEqual(u.range(2000), { active: 1, min: 7, max: 7 });
  assert.throws(() => new UserUsage({ buckets: 0 }), /buckets/);
  assert.throws(() => new UserUsage({ windowMs: 0 }), /windowMs/);
  assert.throws(() => new UserUsage({ outputWeight: -1 }), /outputWeight/);
});

test('user usage: between bucket boundaries max is exact and min a lower bound, exact again at the boundary', () => {
  const u = new UserUsage({ windowMs: 1000, buckets: 4 });
  u.record(1n, 10, 0, 0);
  u.record(2n, 20, 0, 0);
  assert.deepEqual(u.range(1), { active: 2, min: 10, max: 20 });
  u.record(1n, 30, 0, 2); // user 1 now 40: the max follows, the min stays 10 (the true min is 20)
  assert.deepEqual(u.range(3), { active: 2, min: 10, max: 40 });
  assert.deepEqual(u.range(250), { active: 2, min: 20, max: 40 });
});

test('user usage: LRU eviction at the bound, counted', () => {
  const u = new UserUsage({ maxUsers: 2 });
  u.record(1n, 10, 0, 0);
  u.record(2n, 20, 0, 0);
  u.record(1n, 1, 0, 0); // 1 is now the most recent
  u.record(3n, 30, 0, 0); // evicts 2
  assert.equal(u.tokens(2n, 0), 0);
  assert.equal(u.tokens(1n, 0), 11);
  assert.deepEqual(u.stats(), { users: 2, active: 2, vtcActive: 0, evicted: 1 });
  assert.equal(u.range(0).active, 2);
});

test('user usage: VTC counters: charge, lift to the least active counter, idle', () => {
  const u = new UserUsage();
  assert.equal(u.counter(1n), 0);
  assert.equal(u.minCounter(), null);
  assert.equal(u.lift(1n), 0);
  assert.equal(u.charge(1n, 100), 100);
  assert.equal(u.lift(2n), 100, 'a newcomer starts at the least active counter');
  u.charge(2n, 50); // 150
  assert.equal(u.minCounter(), 100);
  assert.equal(u.lift(1n), 100, 'lifting an active user changes nothing');
  u.charge(3n, 500); // inactive user with a high counter
  assert.equal(u.lift(3n), 500, 'a counter above the least is kept');
  u.idle(1n);
  assert.equal(u.minCounter(), 150);
  assert.equal(u.isActive(1n), false);
  u.idle(2n);
  u.idle(3n);
  assert.equal(u.minCounter(), null);
  assert.equal(u.lift(4n), 500, 'with nobody active, the last user to go idle sets the floor');
  assert.throws(() => u.charge(1n, -1), /charge/);
});

// An oracle: every record kept with its bucket, tokens summed over the window, min/max over users with tokens.
class Oracle {
  readonly events: Array<{ user: bigint; bucket: number; w: number }> = [];
  constructor (readonly bucketMs: number, readonly buckets: number) {}
  tokens (user: bigint, now: number): number {
    const e = Math.floor(now / this.bucketMs);
    let t = 0;
    for (const x of this.events) if (x.user === user && x.bucket > e - this.buckets && x.bucket <= e) t += x.w;
    return t;
  }

  range (users: bigint[], now: number): { active: number; min: number; max: number } {
    const ts = users.map((u) => this.tokens(u, now)).filter((t) => t > 0);
    return { active: ts.length, min: ts.length > 0 ? Math.min(...ts) : 0, max: ts.length > 0 ? Math.max(...ts) : 0 };
  }
}

test('user usage: tokens equal an oracle\'s; the range is a bound between boundaries and exact at each (property)', () => {
  fc.assert(fc.property(
    fc.integer({ min: 1, max: 8 }),
    fc.array(fc.record({ user: fc.bigInt({ min: 1n, max: 6n }), dt: fc.nat(400), input: fc.nat(1000), output: fc.nat(1000) }), { maxLength: 120 }),
    (buckets, ops) => {
      const u = new UserUsage({ windowMs: 1000, buckets, inputWeight: 1, outputWeight: 2 });
      const o = new Oracle(1000 / buckets, buckets);
      const users = [1n, 2n, 3n, 4n, 5n, 6n];
      let now = 0;
      for (const op of ops) {
        now += op.dt;
        const atBoundary = Math.floor(now / o.bucketMs) > Math.floor((now - op.dt) / o.bucketMs);
        const before = u.range(now);
        const exact = o.range(users, now);
        assert.equal(before.active, exact.active);
        assert.equal(before.max, exact.max);
        assert.ok(before.min <= exact.min, `min ${before.min} ≤ ${exact.min}`);
        if (atBoundary) assert.deepEqual(before, exact);
        u.record(op.user, op.input, op.output, now);
        o.events.push({ user: op.user, bucket: Math.floor(now / o.bucketMs), w: op.input + 2 * op.output });
        for (const x of users) assert.equal(u.tokens(x, now), o.tokens(x, now), `user ${x} at ${now}`);
      }
      // in the next bucket the range is exact (found by steps: (e + 1) · bucketMs may round into bucket e)
      let later = now;
      while (Math.floor(later / o.bucketMs) === Math.floor(now / o.bucketMs)) later += 1;
      assert.deepEqual(u.range(later), o.range(users, later));
    }), { numRuns: 1000 });
});

test('user usage: the least active counter equals an oracle\'s through lifts, charges, idles and evictions (property)', () => {
  fc.assert(fc.property(
    fc.array(fc.record({ kind: fc.constantFrom('lift', 'charge', 'idle'), user: fc.bigInt({ min: 1n, max: 10n }), w: fc.nat(1000) }), { maxLength: 200 }),
    (ops) => {
      const u = new UserUsage({ maxUsers: 8 });
      const counter = new Map<bigint, number>();
      const active = new Set<bigint>();
      const recent: bigint[] = []; // least recent first
      let lastIdle = 0;
      const use = (k: bigint) => {
        const i = recent.indexOf(k);
        if (i >= 0) recent.splice(i, 1);
        else if (recent.length >= 8) {
          const gone = recent.shift()!;
          counter.delete(gone);
          active.delete(gone);
        }
        recent.push(k);
      };
      const min = () => (active.size > 0 ? Math.min(...[...active].map((k) => counter.get(k) ?? 0)) : null);
      for (const op of ops) {
        if (op.kind === 'lift') {
          use(op.user);
          if (!active.has(op.user)) {
            const floor = min() ?? lastIdle;
            counter.set(op.user, Math.max(counter.get(op.user) ?? 0, floor));
            active.add(op.user);
          }
          assert.equal(u.lift(op.user), counter.get(op.user) ?? 0);
        } else if (op.kind === 'charge') {
          use(op.user);
          counter.set(op.user, (counter.get(op.user) ?? 0) + op.w);
          assert.equal(u.charge(op.user, op.w), counter.get(op.user));
        } else {
          if (active.has(op.user)) {
            lastIdle = counter.get(op.user) ?? 0;
            active.delete(op.user);
            use(op.user);
          }
          u.idle(op.user);
        }
        assert.equal(u.minCounter(), min());
        assert.equal(u.stats().vtcActive, active.size);
      }
    }), { numRuns: 300 });
});
