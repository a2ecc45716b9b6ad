// A row's release as the kv-events thread sees it: purgePod stops following the backend's stream and purges
// every entry of the pod (confirmed from its events, assumed from the ring); ops stamped with the row's old
// lease are dropped however late they come; the counters of departed backends are bounded.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRegion } from '../../src/core/region.js';
import { PodTable } from '../../src/core/pod-table.js';
import { RingProducer } from '../../src/core/ring.js';
import { startKvEventsThread, type KvBackendSpec } from '../../src/kvevents/kv-events-thread.js';
import { BLOCK, complete, eventSim, prompt, startRig } from './sim-rig.js';
import { until } from '../fixtures/wait.js';

test('purgePod unfollows the backend and purges its confirmed and assumed entries; old-lease ops are dropped', async () => {
  const rig = startRig();
  const s = await eventSim(1);
  try {
    const pods = new PodTable(rig.region);
    const ring = new RingProducer(rig.region);
    const { assumed } = ring.layout.opcodes;
    pods.set(1, { state: 'ready', role: 'both', blockSize: BLOCK, kvBlocks: 0, model: 0 });
    await rig.thread.setBackends([s.spec]);
    const p = prompt(12 * BLOCK + 3, 5);
    await complete(s.sim, p);
    await until(() => rig.match(p, 1).pod === 12, 'the confirmed blocks');
    const hinted = [101n, 102n, 103n];
    ring.pushKeys(assumed, 1, hinted, Date.now());
    await until(() => hinted.every((k) => rig.index.lookup(k)?.includes(1)), 'the assumed blocks');
    // The row is released: lease first (0 → 1), then the purge.
    assert.equal(pods.release(1), 1);
    ring.pushKeys(assumed, 1, [104n], Date.now(), 0, 0); // decided before the release, pushed after it
    const changed = await rig.thread.purgePod(1);
    // The confirmed entries went as the stream was dropped (its applier clears them); the sweep took the assumed.
    assert.equal(changed, 3);
    assert.equal(rig.match(p, 1).deepest, 0, 'confirmed entries gone');
    for (const k of [...hinted, 104n]) assert.equal(rig.index.lookup(k), null, 'assumed entries gone');
    assert.equal(rig.index.stats().size, 0);
    let st = await rig.thread.stats();
    assert.deepEqual([st.stale, st.purgedPods, st.purged], [1, 1, 1]);
    assert.equal(st.backends.find((b) => b.id === s.spec.id)?.active, false, 'no longer followed');
    // The engine keeps storing blocks: nothing of it reaches the index any more.
    await complete(s.sim, prompt(8 * BLOCK, 6));
    // A late op of the old lease after the purge is dropped; the row's next backend (lease 1) records as usual.
    ring.pushKeys(assumed, 1, [105n], Date.now(), 0, 0);
    ring.pushKeys(assumed, 1, [106n], Date.now());
    await until(() => rig.index.lookup(106n) !== null, 'the next backend\'s op');
    assert.equal(rig.index.lookup(105n), null);
    st = await rig.thread.stats();
    assert.equal(st.stale, 2);
    assert.equal(rig.index.stats().size, 1);
    await assert.rejects(rig.thread.purgePod(256), RangeError);
    await assert.rejects(rig.thread.purgePod(-1), RangeError);
    assert.equal((await rig.thread.stats()).purgedPods, 1, 'the thread answered the bad rows and kept going');
  } finally {
    await rig.close();
    await s.sim.close();
  }
});

test('purgePods purges several released rows in one sweep, unfollowing those still followed; bad lists purge nothing', async () => {
  const rig = startRig();
  const s = await eventSim(2);
  try {
    const pods = new PodTable(rig.region);
    const ring = new RingProducer(rig.region);
    const { assumed } = ring.layout.opcodes;
    for (const row of [0, 2, 3, 5]) pods.set(row, { state: 'ready', role: 'both', blockSize: BLOCK, kvBlocks: 0, model: 0 });
    await rig.thread.setBackends([s.spec]);
    const p = prompt(6 * BLOCK, 7);
    await complete(s.sim, p);
    await until(() => rig.match(p, 2).pod === 6, 'row 2\'s confirmed blocks');
    // Keys shared by rows: a key goes only when its last row does.
    ring.pushKeys(assumed, 0, [201n, 202n], Date.now());
    ring.pushKeys(assumed, 3, [202n, 203n], Date.now());
    ring.pushKeys(assumed, 5, [203n, 204n], Date.now());
    await until(() => rig.index.lookup(204n) !== null && rig.index.lookup(201n) !== null, 'the assumed blocks');
    // Bad lists are refused whole, before anything is purged.
    await assert.rejects(rig.thread.purgePods([0, 256]), /pod row must be/);
    await assert.rejects(rig.thread.purgePods([0, 0]), /listed twice/);
    await assert.rejects(rig.thread.purgePods([]), /1 to/);
    assert.deepEqual(rig.index.lookup(201n), [0]);
    for (const row of [0, 2, 3]) pods.release(row);
    // Rows 0, 2 (followed: its stream is closed by the purge) and 3 in one message; row 5 stays.
    const changed = await rig.thread.purgePods([0, 2, 3]);
    assert.equal(changed, 3, 'keys 201, 202 (two rows, counted once) and 203 changed in the sweep');
    assert.equal(rig.match(p, 2).deepest, 0, 'row 2\'s confirmed entries gone');
    assert.deepEqual([201n, 202n, 203n, 204n].map((k) => rig.index.lookup(k)), [null, null, [5], [5]]);
    const st = await rig.thread.stats();
    assert.deepEqual([st.purgedPods, st.purgeSweeps, st.purged], [3, 1, 1]);
    assert.equal(st.backends.find((b) => b.id === s.spec.id)?.active, false, 'no longer followed');
  } finally {
    await rig.close();
    await s.sim.close();
  }
});

test('the counters of departed backends are bounded: the most recent are kept, the rest counted; forget drops one', async () => {
  const shared = createRegion({ prefixIndexKeys: 1 << 10, sessions: 16, heapJobs: 16, recordRingOps: 64, pods: 8, scratchSlots: 4, scratchBytes: 1 << 16 });
  const thread = startKvEventsThread(shared, { assumedTtlMs: 1000, maxRetiredBackends: 2, subscriber: { reconnectMinMs: 50, reconnectMaxMs: 200 } });
  try {
    // Nothing listens there: ZMQ connects lazily, so each is followed (and never hears a thing).
    const spec = (i: number): KvBackendSpec => ({ index: i, id: `b${i}`, model: 'm', kvEvents: `tcp://127.0.0.1:${9 + i}`, replay: null, topic: '' });
    await thread.setBackends([0, 1, 2, 3, 4].map(spec));
    assert.equal((await thread.stats()).backends.length, 5);
    await thread.setBackends([]);
    let st = await thread.stats();
    assert.deepEqual(st.backends.map((b) => b.id).sort(), ['b3', 'b4']);
    assert.equal(st.retiredDropped, 3);
    // A departure refreshes an id: b0 comes back and leaves again, and b3 is now the oldest.
    await thread.setBackends([spec(0)]);
    assert.equal(await thread.forget('b0'), false, 'a followed backend keeps its counters');
    await thread.setBackends([]);
    st = await thread.stats();
    assert.deepEqual(st.backends.map((b) => b.id).sort(), ['b0', 'b4']);
    assert.equal(st.retiredDropped, 4);
    assert.equal(await thread.forget('b4'), true);
    assert.equal(await thread.forget('b4'), false);
    assert.deepEqual((await thread.stats()).backends.map((b) => b.id), ['b0']);
  } finally {
    await thread.stop();
  }
});
