// The routing host over a fleet that turns over: 10,000 pods join and leave a 256-row table through the host's
// own calls (addPod → routed requests → retirePod → releasePod → the index writer's purge → podPurged), with
// requests routed to them, sessions bound and keys recorded. After each release nothing of the pod is left in
// the load, session or index tables, and the table never fills up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { RingConsumer } from '../../src/core/ring.js';
import { IndexFeeder } from '../../src/kvevents/index-feeder.js';
import { MODEL, routingHost } from '../fixtures/host.js';

const CYCLES = 10_000;
const ROWS = 256;

test(`${CYCLES} pods join and leave ${ROWS} rows through the host: each leaves nothing behind`, () => {
  const { region, host, keysOf: keysOfTokens, request } = routingHost({
    pods: [], sessionTtlMs: 1 << 30, tables: { prefixIndexKeys: 1 << 14, sessions: 1 << 14, recordRingOps: 1 << 14, pods: ROWS }
  });
  const feeder = new IndexFeeder(new PrefixIndexWriter(region), new RingConsumer(region), { assumedTtlMs: 1 << 30, expiryBudget: 0 });
  const models = new Set([MODEL]);
  const keysOf = (n: number): BigUint64Array => keysOfTokens(Array.from({ length: 64 }, (_, i) => n * 100 + i));
  // A steady fleet of 200 live pods; each cycle one joins and the oldest leaves (the session table holds every
  // session of the run, so none is evicted at its bound before its pod leaves).
  const live: Array<{ id: string; row: number; keys: BigUint64Array; session: string }> = [];
  let maxRow = 0;
  const join = (n: number): void => {
    const id = `pod-${n}`;
    const row = host.addPod({ id, role: 'both', models, state: 'ready' });
    maxRow = Math.max(maxRow, row);
    const keys = keysOf(n);
    const session = `s-${n}`;
    // A request that can only go to this pod: every other row is excluded.
    const exclude = new Set(live.map((p) => p.row));
    const p = host.route(request({ sessionId: session, promptTokens: 64, blockKeys: keys, maxTokens: 1 }), exclude, n);
    assert.equal(p.pod, row);
    host.dispatched(p, n);
    feeder.pump();
    host.firstToken(p, n);
    host.finished(p, { promptTokens: 64, completionTokens: 1 }, n);
    live.push({ id, row, keys, session });
  };
  for (let n = 0; n < 200; n++) join(n);
  for (let n = 200; n < CYCLES; n++) {
    const gone = live.shift()!;
    host.retirePod(gone.row);
    assert.equal(host.sessions.get(host.sessionKey(gone.session))!.host, -1, 'its session was unbound');
    assert.equal(host.sessions.get(host.sessionKey(gone.session))!.migrations, 0);
    host.releasePod(gone.row);
    feeder.purgePod(gone.row);
    host.podPurged(gone.row);
    const load = host.load.get(gone.row);
    assert.deepEqual([load.inFlight, load.pendingPrefill, load.decisions, load.running], [0, 0, 0, 0]);
    join(n);
    if (n % 997 === 0) {
      // The departed pod's keys are nowhere in the index (its row now holds another pod's, not these).
      const probe = host.route(request({ promptTokens: 64, blockKeys: gone.keys, maxTokens: 1 }), new Set(), n);
      assert.equal(probe.matchedBlocks, 0);
      assert.equal(host.index.counts[gone.row], 0);
    }
  }
  assert.ok(maxRow < ROWS);
  assert.equal(host.rows.used, 200);
  assert.equal(host.rows.acquired, CYCLES);
  assert.equal(host.rows.released, CYCLES - 200);
});
