// A real `ear sim` engine restarted while the kv-events thread could not hear it, and fed until its new sequence
// passed the last one the thread applied: vLLM's events carry no epoch, so only the engine's bytes tell. The link
// between them goes down (a partition), the engine restarts on its addresses and serves, the link comes back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Subscriber } from 'zeromq';
import { seqFromBytes } from '../../src/kvevents/frames.js';
import { BLOCK, complete, eventSim, prompt, startRig } from './sim-rig.js';
import { TcpLink } from './tcp-link.js';
import { until } from '../fixtures/wait.js';

const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? String(x) : x));

test('an engine restarted behind a downed link, its sequence past ours: no match of the old process survives', async () => {
  const rig = startRig();
  let s = await eventSim(0, { kvEventFormat: 'map' });
  const link = await TcpLink.to(s.spec.kvEvents);
  const witness = new Subscriber({ linger: 0 });
  try {
    await rig.thread.setBackends([{ ...s.spec, kvEvents: link.endpoint }]);
    // The thread's SUB joins through the link a moment after setBackends (ZeroMQ's slow joiner; what the engine
    // publishes before then comes from the join check's replay). The cut below must find it joined.
    await until(async () => (await rig.backend(0)).joinChecks >= 1, 'the thread\'s SUB joining the engine through the link');
    const old = [0, 1, 2, 3].map((i) => prompt(8 * BLOCK, 10 + i));
    for (const p of old) await complete(s.sim, p);
    await until(() => old.every((p) => rig.match(p, 0).pod === 8), 'the old prompts');

    // A dropped connection to the same engine: the reconnect check finds the same process and forgets nothing.
    link.cut();
    await until(async () => (await rig.backend(0)).reconnectChecks >= 1, 'the reconnect check');
    const kept = await rig.backend(0);
    assert.equal(kept.resyncs, 0, json(kept));
    for (const p of old) assert.equal(rig.match(p, 0).pod, 8, 'a reconnect to the same engine keeps the index');

    // The link goes down; the engine restarts on the same addresses and serves until its sequence passes ours.
    const lastSeq = kept.lastSeq!;
    await link.down();
    const pubAddress = s.spec.kvEvents;
    // A wildcard host: the engine binds its PUB (vLLM connects to a tcp address without one).
    const ports = { http: s.sim.port, pub: pubAddress.replace('127.0.0.1', '*'), replay: s.spec.replay! };
    await s.sim.close();
    s = await eventSim(0, { kvEventFormat: 'map' }, ports);
    let newest = -1n;
    witness.connect(pubAddress);
    witness.subscribe('');
    void (async () => { for await (const f of witness) newest = seqFromBytes(f[1]); })().catch(() => {});
    const fresh: string[] = [];
    for (let i = 0; newest <= lastSeq + 2n; i++) {
      if (i >= 1000) assert.fail(`the new engine never passed seq ${lastSeq}: at ${newest}`);
      const p = prompt(4 * BLOCK, 500 + i);
      fresh.push(p);
      await complete(s.sim, p);
      await new Promise((r) => setTimeout(r, 10)); // the witness joins a moment after connect()
    }
    // Nothing reached the thread through the link. Its one tail check after the last live batch asks the replay
    // endpoint, which is not behind the link: on a slow machine it may meet the new process already, and then the
    // old one's blocks go with the restart it saw. Either the old blocks all match, or a restart was seen.
    const matched = old.map((p) => rig.match(p, 0).pod);
    const before = await rig.backend(0);
    if (before.restarts === 0 && before.resyncs === 0) assert.deepEqual(matched, [8, 8, 8, 8], json(before));
    else assert.ok(matched.every((n) => n === 8) || matched.every((n) => n === 0), `all or none of the old blocks: ${matched} ${json(before)}`);

    await link.up();
    let seen = kept;
    await until(async () => (seen = await rig.backend(0)).restarts >= 1, { what: () => `the restart: ${json(seen)}` });
    await until(() => fresh.slice(-3).every((p) => rig.match(p, 0).pod === 4), 'the new engine\'s latest prompts');
    for (const p of old) assert.equal(rig.match(p, 0).pod, 0, 'no block of the old process matches');
    const st = await rig.backend(0);
    assert.ok(st.lastSeq! > lastSeq, json(st));
  } finally {
    witness.close();
    await rig.close();
    await link.down();
    await s.sim.close();
  }
});
