// A fleet rolling 10,000 backends through a 256-row table, in one thread with the same kernels and views the
// gateway uses: each backend records index entries (assumed through ring ops stamped with its lease, confirmed
// and offloaded through the index writer), has sessions bound and load counted, then leaves through the
// release steps src/core/pod-rows.ts lists. After each release nothing of it is left in any table; its late
// ops are dropped and counted exactly; the tables never fill up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAndAttach } from '../../src/core/region.js';
import { PodTable } from '../../src/core/pod-table.js';
import { LoadTable } from '../../src/core/load-table.js';
import { SessionTable } from '../../src/core/session-table.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { RingConsumer, RingProducer } from '../../src/core/ring.js';
import { PodRows } from '../../src/core/pod-rows.js';
import { IndexFeeder } from '../../src/kvevents/index-feeder.js';

const CYCLES = 10_000;
const ROWS = 256;
const SESSION_POOL = 2048;
const SHARED_KEY = 0xfeedn; // every backend holds it: purging one must leave the others

/** xorshift32: the run is the same every time. */
function rng (seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13; s >>>= 0;
    s ^= s >>> 17;
    s ^= s << 5; s >>>= 0;
    return s / 0x100000000;
  };
}

interface Occupant {
  id: string;
  n: number;
  row: number;
  lease: number;
  /** Keys recorded as assumed (ring), confirmed and offloaded (writer). */
  assumed: bigint[];
  confirmed: bigint[];
  offloaded: bigint[];
  sessions: bigint[];
}

test(`${CYCLES} backends roll through ${ROWS} rows: every release leaves nothing behind, late ops are dropped and counted`, () => {
  const region = createAndAttach({ prefixIndexKeys: 1 << 13, sessions: SESSION_POOL, heapJobs: 16, recordRingOps: 1 << 14, pods: ROWS, scratchSlots: 8, scratchBytes: 1 << 16 });
  const pods = new PodTable(region);
  const load = new LoadTable(region);
  const sessions = new SessionTable(region);
  const writer = new PrefixIndexWriter(region);
  const ring = new RingProducer(region);
  const feeder = new IndexFeeder(writer, new RingConsumer(region), { assumedTtlMs: 1 << 30, expiryBudget: 0 });
  const rows = new PodRows(pods);
  const { assumed } = ring.layout.opcodes;
  const { confirmed, offloaded } = writer.kind;
  const fresh = load.get(0);
  const random = rng(0x5eed);
  const live = new Map<number, Occupant>();
  const byRow = new Map<number, Occupant>();
  const sessionKey = (i: number): bigint => BigInt(i + 1) * 0x9e3779b97f4a7c15n & 0xffffffffffffffffn;
  let now = 1_795_000_000_000;
  let joined = 0;
  let released = 0;
  /** Ops of a lease that was current when pushed, not yet applied: all become stale when the lease moves. */
  const pendingOps = new Map<number, number>();
  let expectStale = 0;
  let lateOps = 0;
  let peak = 0;

  const pump = (): void => {
    feeder.pump();
    pendingOps.clear();
  };
  const push = (o: Occupant, keys: bigint[], lease = o.lease): void => {
    assert.equal(ring.pushKeys(assumed, o.row, keys, now, 0, lease), keys.length, 'the ring never fills in this run');
    if (lease === pods.lease(o.row)) pendingOps.set(o.row, (pendingOps.get(o.row) ?? 0) + keys.length);
    else expectStale += keys.length;
  };

  const join = (): void => {
    const n = joined++;
    const id = `backend-${n}`;
    const row = rows.acquire(id);
    assert.equal(pods.get(row), undefined, 'a row comes back absent');
    pods.set(row, { state: 'ready', role: 'both', blockSize: 16, kvBlocks: 1000, model: 0 });
    const key = (kind: number, i: number): bigint => (BigInt(n) << 16n) | (BigInt(kind) << 8n) | BigInt(i + 1);
    const o: Occupant = {
      id, n, row, lease: rows.lease(row),
      assumed: Array.from({ length: 6 }, (_, i) => key(1, i)),
      confirmed: [SHARED_KEY, ...Array.from({ length: 4 }, (_, i) => key(2, i))],
      offloaded: Array.from({ length: 2 }, (_, i) => key(3, i)),
      sessions: Array.from({ length: 3 }, () => sessionKey(Math.floor(random() * SESSION_POOL)))
    };
    assert.equal(o.lease, pods.lease(row));
    // Routing decisions: ring ops (the kv-events thread applies them later), load counted, sessions bound.
    push(o, o.assumed);
    for (const k of o.sessions) {
      sessions.upsert(k, now, 1e12);
      sessions.setHost(k, row, now); // a session another backend hosts moves here: that is a migration
    }
    load.countDecision(row);
    load.addInFlight(row, 1 + Math.floor(random() * 3));
    load.addPendingPrefill(row, 1000);
    load.setEngine(row, { running: 2, waiting: 1, kvUsage: 0.25, time: now });
    // Engine events: confirmed and offloaded blocks, through the index's writer.
    for (const k of o.confirmed) writer.insert(k, row, confirmed, now);
    for (const k of o.offloaded) writer.insert(k, row, offloaded, now);
    live.set(row, o);
    byRow.set(row, o);
  };

  const leave = (o: Occupant): void => {
    const row = o.row;
    // 2. Leaving: no new work; its sessions unbound (not counted as migrations).
    rows.retire(row);
    const migrations = o.sessions.map((k) => sessions.get(k)!.migrations);
    const hostedHere = new Set(o.sessions.filter((k) => sessions.get(k)!.host === row));
    assert.equal(sessions.unbindPod(row), hostedHere.size);
    o.sessions.forEach((k, i) => {
      const s = sessions.get(k)!;
      assert.equal(s.host, hostedHere.has(k) ? -1 : s.host);
      assert.notEqual(s.host, row);
      assert.equal(s.migrations, migrations[i], 'unbinding is not a migration');
    });
    // A request still finishing on the row records a touch: under its own lease, still current.
    if (random() < 0.5) push(o, [o.assumed[0]]);
    // 3. The lease moves: every op of the old lease not yet applied is stale from here.
    pods.release(row);
    expectStale += pendingOps.get(row) ?? 0;
    pendingOps.delete(row);
    // Late ops decided before the release, pushed after it (and before the purge).
    if (random() < 0.5) {
      push(o, [o.assumed[1], o.assumed[2]]);
      lateOps += 2;
    }
    load.resetRow(row);
    assert.deepEqual(load.get(row), fresh);
    // The index's writer drops the backend's stream (its applier) and purges the row.
    feeder.purgePod(row);
    pendingOps.clear(); // purgePod drained the ring
    for (const k of [...o.assumed, ...o.confirmed, ...o.offloaded]) {
      assert.ok(!(writer.lookup(k) ?? []).includes(row), `${o.id}: key ${k} still on row ${row}`);
    }
    // Keys only this backend held are gone altogether; the shared key stays with the others.
    for (const k of [...o.assumed, ...o.offloaded, ...o.confirmed.slice(1)]) assert.equal(writer.lookup(k), null);
    // 4. The purge is confirmed: the row is free.
    rows.release(row);
    live.delete(row);
    released++;
    // Even later: an op of the departed backend after its purge, perhaps after the row's next backend joined.
    if (random() < 0.3) {
      if (random() < 0.5) join();
      push(o, [o.assumed[3]]);
      lateOps++;
    }
  };

  while (released < CYCLES) {
    // Grow to a full table now and then, else churn around 3/4 full.
    const target = released % 2000 < 300 ? ROWS : (ROWS * 3) >> 2;
    if (live.size < target && rows.used < ROWS && joined - released < CYCLES + ROWS) join();
    else {
      const rowsLive = [...live.keys()];
      leave(live.get(rowsLive[Math.floor(random() * rowsLive.length)])!);
    }
    peak = Math.max(peak, rows.used);
    if (random() < 0.2) pump();
    now += 1;
    // The shared key is held by exactly the rows live and confirmed (a lookup per 64 steps keeps it cheap).
    if ((joined + released) % 64 === 0) {
      const holders = [...live.keys()].sort((a, b) => a - b);
      assert.deepEqual(writer.lookup(SHARED_KEY, writer.mask.confirmed) ?? [], holders);
    }
  }
  pump();

  assert.equal(released, CYCLES);
  assert.equal(peak, ROWS, 'the table was full at times, and never refused a backend');
  assert.ok(lateOps > 1000, `late ops ${lateOps}`);
  assert.equal(feeder.stats.stale, expectStale, 'every op of an old lease, and nothing else, was dropped');
  assert.equal(feeder.stats.purgedPods, CYCLES);
  assert.equal(ring.stats().dropped, 0);
  // What is left is exactly the live backends' entries: no key of a departed one, nothing evicted at the bound.
  const ix = writer.stats();
  assert.equal(ix.evictions, 0);
  const liveKeys = new Set<bigint>();
  for (const o of live.values()) for (const k of [...o.assumed, ...o.confirmed, ...o.offloaded]) liveKeys.add(k);
  assert.equal(ix.size, liveKeys.size);
  for (const o of live.values()) {
    for (const k of o.assumed) assert.ok(writer.lookup(k, writer.mask.assumed)!.includes(o.row));
    assert.equal(pods.lease(o.row), o.lease);
  }
  assert.equal(writer.probeStats().junk, 0);
  // No session is bound to a row whose backend left.
  for (let i = 0; i < SESSION_POOL; i++) {
    const s = sessions.get(sessionKey(i));
    if (s && s.host >= 0) assert.ok(live.has(s.host), `session ${i} bound to row ${s.host}, which is ${rows.state(s.host)}`);
  }
  assert.equal(sessions.stats().evicted, 0);
  assert.equal(byRow.size, ROWS, 'every row was used');
});
