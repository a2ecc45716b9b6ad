// The kv-events thread against real `ear sim` engines: what an engine stores is found by longestPrefix with the
// keys the gateway computes for the same prompt, in both event layouts and both hash formats; what it evicts
// goes; a backend removed from the list is purged.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BLOCK, complete, eventSim, prompt, startRig, type EventSim } from './sim-rig.js';
import { until } from '../fixtures/wait.js';

const COMBOS = [
  { kvEventFormat: 'array', kvHashFormat: 'int' },
  { kvEventFormat: 'array', kvHashFormat: 'bytes' },
  { kvEventFormat: 'map', kvHashFormat: 'int' },
  { kvEventFormat: 'map', kvHashFormat: 'bytes' }
] as const;

test('stored blocks are found, per engine, in every layout and hash format; prefixes stored before we joined come from the replay', async () => {
  const rig = startRig();
  const sims: EventSim[] = [];
  try {
    for (const [pod, c] of COMBOS.entries()) sims.push(await eventSim(pod, c));
    // Warmed before the thread follows the engines (a gateway restart): the start replay brings it in.
    const early = prompt(10 * BLOCK + 5, 99);
    await complete(sims[0].sim, early);
    await rig.thread.setBackends(sims.map((s) => s.spec));
    await until(() => rig.match(early, 0).pod === 10, 'the early prompt');
    for (const [pod, s] of sims.entries()) {
      const p = prompt(12 * BLOCK + 3, pod);
      await complete(s.sim, p);
      await until(() => rig.match(p, pod).pod === 12, `pod ${pod}'s prompt`);
      const m = rig.match(p, pod);
      assert.equal(m.deepest, 12);
      for (let other = 0; other < COMBOS.length; other++) if (other !== pod) assert.equal(rig.index.counts[other], 0);
      // a longer turn of the same conversation extends the chain through the parent's mapping
      const next = `${p}${prompt(4 * BLOCK, 100 + pod)}`;
      await complete(s.sim, next);
      await until(() => rig.match(next, pod).pod === 16, `pod ${pod}'s next turn`);
      const st = await rig.backend(pod);
      assert.equal(st.unplaceable + st.malformed + st.decodeErrors + st.resyncs + st.blockSizeMismatch, 0, JSON.stringify(st, (_, v) => typeof v === 'bigint' ? String(v) : v));
      assert.ok(st.blocksStored >= 16);
    }
    // a prompt no engine has seen
    assert.equal(rig.match(prompt(8 * BLOCK, 555), 0).deepest, 0);
    // a cache_salt seeds block 0: salted and unsalted prompts are different caches
    const salted = prompt(6 * BLOCK, 7);
    await complete(sims[2].sim, salted, { cache_salt: 'tenant-a' });
    const keys = rig.keys(salted);
    await until(async () => (await rig.backend(2)).blocksStored >= 22, 'the salted blocks');
    assert.equal(rig.match(salted, 2).pod, 0, 'unsalted keys do not match salted blocks');
    assert.equal(keys.length, 6);
    // removed from the list: purged
    await rig.thread.setBackends(sims.slice(1).map((s) => s.spec));
    assert.equal(rig.match(early, 0).deepest, 0);
    assert.equal((await rig.thread.stats()).purged, 1);
  } finally {
    await rig.close();
    await Promise.all(sims.map((s) => s.sim.close()));
  }
});

test('blocks the engine evicts leave the index (small KV cache)', async () => {
  const rig = startRig();
  // 24 blocks: each 12-block prompt evicts most of the one before.
  const s = await eventSim(1, { numGpuBlocksOverride: 24, maxModelLen: 300 });
  try {
    await rig.thread.setBackends([s.spec]);
    const prompts = [0, 1, 2, 3].map((i) => prompt(12 * BLOCK, 40 + i));
    await complete(s.sim, prompts[0]);
    await until(() => rig.match(prompts[0], 1).pod === 12, 'the first prompt');
    for (const p of prompts.slice(1)) await complete(s.sim, p);
    await until(() => rig.match(prompts[3], 1).pod === 12, 'the last prompt');
    await until(() => rig.match(prompts[0], 1).pod < 12, 'the first prompt evicted');
    const st = await rig.backend(1);
    assert.ok(st.blocksRemoved > 0);
    // The index holds exactly what the engine's events say it holds: no more than its KV cache.
    assert.ok(st.indexedBlocks <= 24, `indexed ${st.indexedBlocks}`);
    assert.equal(rig.index.stats().size, st.indexedBlocks);
  } finally {
    await rig.close();
    await s.sim.close();
  }
});
