import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { PodRows, PodRowsFullError, type LeaseSource } from '../../src/core/pod-rows.js';
import { PodTable } from '../../src/core/pod-table.js';
import { smallRegion } from './fixtures/small-region.js';

/** A lease per row, bumped by release(): the pod table's rule, without a region. */
class Leases implements LeaseSource {
  readonly #l: number[];
  constructor (readonly capacity: number) { this.#l = new Array<number>(capacity).fill(0); }
  lease (row: number): number { return this.#l[row]; }
  release (row: number): number { return ++this.#l[row]; }
}

test('rows are leased lowest first, released only after retire and the lease moved, and reused under the new lease', () => {
  const leases = new Leases(3);
  const rows = new PodRows(leases);
  assert.deepEqual([rows.acquire('a'), rows.acquire('b'), rows.acquire('c')], [0, 1, 2]);
  assert.deepEqual([rows.used, rows.releasing, rows.capacity], [3, 0, 3]);
  assert.throws(() => rows.acquire('d'), (e: unknown) => e instanceof PodRowsFullError && e.code === 'EAR_ERR_POD_ROWS_FULL' && /all 3 pod rows are in use \(0 releasing\)/.test(e.message));
  assert.throws(() => rows.acquire('b'), /already holds pod row 1/);
  assert.throws(() => rows.release(1), /leased, not releasing/);
  rows.retire(1);
  assert.deepEqual([rows.state(1), rows.occupant(1), rows.rowOf('b'), rows.lease(1)], ['releasing', 'b', undefined, 0]);
  assert.throws(() => rows.acquire('d'), /\(1 releasing\)/, 'a releasing row is not reused');
  assert.throws(() => rows.release(1), /still has lease 0/, 'the pod table must release it first');
  assert.throws(() => rows.retire(1), /releasing, not leased/);
  // The same id may join again while its old row is being purged: it gets another row once there is one.
  leases.release(1);
  assert.equal(rows.lease(1), 0, 'a releasing row reports its occupant\'s lease (late ops carry it)');
  rows.release(1);
  assert.deepEqual([rows.state(1), rows.occupant(1), rows.lease(1), rows.used], ['free', undefined, 1, 2]);
  assert.throws(() => rows.release(1), /free, not releasing/);
  assert.equal(rows.acquire('b'), 1);
  assert.equal(rows.lease(1), 1);
  assert.deepEqual([rows.acquired, rows.released], [4, 1]);
  assert.throws(() => rows.state(3), RangeError);
  assert.throws(() => rows.lease(-1), RangeError);
  assert.throws(() => new PodRows(new Leases(0)), RangeError);
});

test('the pod table is a lease source: its release is what lets the row go', () => {
  const { region } = smallRegion({ pods: 4 });
  const pods = new PodTable(region);
  const rows = new PodRows(pods);
  assert.equal(rows.capacity, 4);
  const r = rows.acquire('x');
  pods.set(r, { state: 'ready', role: 'both', blockSize: 16, kvBlocks: 0, model: 0 });
  pods.setState(r, 'down');
  rows.retire(r);
  assert.throws(() => rows.release(r), /still has lease/, 'down is not released');
  pods.release(r);
  rows.release(r);
  assert.equal(rows.acquire('y'), r);
  assert.equal(rows.lease(r), 1);
});

type Step = { t: 'join'; id: number } | { t: 'retire'; pick: number } | { t: 'release'; pick: number };

test('the allocator agrees with a model on any sequence of joins, departures and releases (property)', () => {
  const step: fc.Arbitrary<Step> = fc.oneof(
    fc.record({ t: fc.constant('join' as const), id: fc.nat(30) }),
    fc.record({ t: fc.constant('retire' as const), pick: fc.nat() }),
    fc.record({ t: fc.constant('release' as const), pick: fc.nat() })
  );
  fc.assert(fc.property(fc.integer({ min: 1, max: 6 }), fc.array(step, { maxLength: 200 }), (cap, steps) => {
    const leases = new Leases(cap);
    const rows = new PodRows(leases);
    // The model: per row, state and occupant; the lowest free row is the one a join gets.
    const st: Array<{ s: 'free' | 'leased' | 'releasing'; id?: string; lease: number }> = Array.from({ length: cap }, () => ({ s: 'free', lease: 0 }));
    for (const s of steps) {
      if (s.t === 'join') {
        const id = `b${s.id}`;
        const held = st.findIndex((r) => r.s === 'leased' && r.id === id);
        const free = st.findIndex((r) => r.s === 'free');
        if (held >= 0) assert.throws(() => rows.acquire(id), /already holds/);
        else if (free < 0) assert.throws(() => rows.acquire(id), PodRowsFullError);
        else {
          assert.equal(rows.acquire(id), free);
          st[free] = { s: 'leased', id, lease: leases.lease(free) };
        }
      } else {
        const want = s.t === 'retire' ? 'leased' : 'releasing';
        const candidates = st.flatMap((r, i) => r.s === want ? [i] : []);
        if (candidates.length === 0) continue;
        const row = candidates[s.pick % candidates.length];
        if (s.t === 'retire') {
          rows.retire(row);
          st[row].s = 'releasing';
        } else {
          leases.release(row);
          rows.release(row);
          st[row] = { s: 'free', lease: leases.lease(row) };
        }
      }
      for (let i = 0; i < cap; i++) {
        assert.equal(rows.state(i), st[i].s);
        assert.equal(rows.occupant(i), st[i].id);
        assert.equal(rows.lease(i), st[i].lease);
        if (st[i].s === 'leased') assert.equal(rows.rowOf(st[i].id!), i);
      }
      assert.equal(rows.used, st.filter((r) => r.s !== 'free').length);
      assert.equal(rows.releasing, st.filter((r) => r.s === 'releasing').length);
    }
  }), { numRuns: 200 });
});
