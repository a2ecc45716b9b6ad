// ZeroMQ's slow joiner against a real `ear sim` engine: the kv-events thread's SUB reaches the engine through a
// link that is down while the engine publishes a burst, and the engine stays quiet once the SUB has joined. The
// burst never comes live, and no later batch shows a gap: only the subscriber asking the replay at its join can
// learn it. No event of the engine's follows the join in these tests.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BLOCK, complete, eventSim, prompt, startRig } from './sim-rig.js';
import { TcpLink } from './tcp-link.js';
import { until } from '../fixtures/wait.js';

const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? String(x) : x));

test('a burst published before the SUB joined, then silence: the join asks the replay past the start replay\'s last batch', async () => {
  const rig = startRig();
  const s = await eventSim(0, { kvEventFormat: 'map' });
  const link = await TcpLink.to(s.spec.kvEvents);
  try {
    // Cached before the thread follows the engine: the start replay (not behind the link) brings it in, and once it
    // matches, that replay has been answered: everything published from here on is past it.
    const early = prompt(6 * BLOCK, 1);
    await complete(s.sim, early);
    await link.down();
    await rig.thread.setBackends([{ ...s.spec, kvEvents: link.endpoint }]);
    await until(() => rig.match(early, 0).pod === 6, 'the start replay');
    const burst = [0, 1, 2, 3, 4].map((i) => prompt(8 * BLOCK, 10 + i));
    for (const p of burst) await complete(s.sim, p);
    // The SUB cannot have joined (the link does not listen), and with no live batch yet no tail check is armed.
    for (const p of burst) assert.equal(rig.match(p, 0).pod, 0, 'nothing of the burst before the join');

    await link.up();
    let st = await rig.backend(0);
    await until(async () => burst.every((p) => rig.match(p, 0).pod === 8) || ((st = await rig.backend(0)), false),
      { what: () => `the burst, with no further event from the engine: ${json(st)}` });
    st = await rig.backend(0);
    assert.equal(st.joinChecks, 1, json(st));
    assert.equal(st.resyncs, 0, json(st));
    assert.equal(rig.match(early, 0).pod, 6, 'the start replay\'s blocks stay');
  } finally {
    await rig.close();
    await link.down();
    await s.sim.close();
  }
});

test('nothing applied before the join: the join asks the replay from 0', async () => {
  const rig = startRig();
  const s = await eventSim(0, { kvEventFormat: 'array', kvHashFormat: 'bytes' });
  const link = await TcpLink.to(s.spec.kvEvents);
  try {
    await link.down();
    await rig.thread.setBackends([{ ...s.spec, kvEvents: link.endpoint }]);
    // The start replay may be answered before or after the burst; either way the blocks must come once joined.
    const burst = [0, 1, 2].map((i) => prompt(5 * BLOCK, 20 + i));
    for (const p of burst) await complete(s.sim, p);
    await link.up();
    let st = await rig.backend(0);
    await until(async () => burst.every((p) => rig.match(p, 0).pod === 5) || ((st = await rig.backend(0)), false),
      { what: () => `the burst, with no further event from the engine: ${json(st)}` });
    // A start replay answered after the burst brings it before the join: wait for the join's check either way.
    await until(async () => (st = await rig.backend(0)).joinChecks >= 1, { what: () => `the join check: ${json(st)}` });
    assert.equal(st.joinChecks, 1, json(st));
    assert.equal(st.resyncs, 0, json(st));
    assert.equal(st.batches, st.replayedBatches, `the engine was quiet after the join: nothing came live ${json(st)}`);
  } finally {
    await rig.close();
    await link.down();
    await s.sim.close();
  }
});
