// The kv-events thread recovering from what real deployments do to a KV-event stream: an engine restart on
// the same addresses (sequence reset → resync), messages lost between PUB and SUB (replay fills them), and
// garbage on the wire (counted, never fatal).
import { test } from 'node:test';
import { tmpdir } from 'node:os';
import { rmSync } from 'node:fs';
import assert from 'node:assert/strict';
import { encode } from '@msgpack/msgpack';
import { Publisher, Subscriber } from 'zeromq';
import { encodeBatch } from '../../src/kvevents/codec.js';
import { buildPubMessage, seqFromBytes } from '../../src/kvevents/frames.js';
import { BLOCK, complete, eventSim, prompt, startRig } from './sim-rig.js';
import { until } from '../fixtures/wait.js';

const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? String(x) : x));

test('an engine restart on the same addresses resyncs: the old cache is forgotten, the new one learnt', async () => {
  const rig = startRig();
  // ipc endpoints: the engine binds them (vLLM binds ipc, connects tcp without a wildcard), so the restarted
  // engine takes the same addresses again.
  const base = `ipc://${tmpdir()}/ear-kv-restart-${process.pid}-${Date.now()}`;
  const ipc = { http: 0, pub: `${base}.pub`, replay: `${base}.replay` };
  let s = await eventSim(0, { kvEventFormat: 'map' }, ipc);
  try {
    await rig.thread.setBackends([s.spec]);
    const old = [0, 1, 2, 3, 4].map((i) => prompt(8 * BLOCK, 10 + i));
    for (const p of old) await complete(s.sim, p);
    await until(() => old.every((p) => rig.match(p, 0).pod === 8), 'the old prompts');
    const ports = { http: s.sim.port, pub: s.spec.kvEvents, replay: s.spec.replay! };
    await s.sim.close();
    s = await eventSim(0, { kvEventFormat: 'map' }, ports);
    // The first batches of the new engine may pass before the SUB has reconnected: keep the engine busy.
    const fresh = prompt(8 * BLOCK, 50);
    await complete(s.sim, fresh);
    for (let i = 0; rig.match(fresh, 0).pod !== 8; i++) {
      if (i >= 200) assert.fail(`the new engine's blocks never arrived: ${json(await rig.backend(0))}`);
      await complete(s.sim, prompt(2 * BLOCK, 200 + i));
      await new Promise((r) => setTimeout(r, 20));
    }
    for (const p of old) assert.equal(rig.match(p, 0).pod, 0, 'the restarted engine holds none of the old prefixes');
    const st = await rig.backend(0);
    assert.ok(st.resyncs >= 1, json(st));
  } finally {
    await rig.close();
    await s.sim.close();
    for (const f of [ipc.pub, ipc.replay]) rmSync(f.slice('ipc://'.length), { force: true });
  }
});

test('messages dropped by a lossy relay between PUB and SUB are recovered from the engine\'s replay buffer', async () => {
  const rig = startRig();
  const s = await eventSim(2, { kvEventFormat: 'array', kvHashFormat: 'bytes' });
  // The relay: SUB on the engine's PUB, PUB for the gateway; it drops every message whose seq is 1 mod 3.
  const relayIn = new Subscriber({ linger: 0 });
  const relayOut = new Publisher({ linger: 0 });
  relayIn.connect(s.spec.kvEvents);
  relayIn.subscribe('');
  await relayOut.bind('tcp://127.0.0.1:*');
  let forwarded = 0;
  let dropped = 0;
  const loop = (async () => {
    for await (const frames of relayIn) {
      if (seqFromBytes(frames[1]) % 3n === 1n) dropped++;
      else {
        await relayOut.send(frames);
        forwarded++;
      }
    }
  })().catch(() => {});
  try {
    await rig.thread.setBackends([{ ...s.spec, kvEvents: relayOut.lastEndpoint! }]);
    const prompts = Array.from({ length: 9 }, (_, i) => prompt(6 * BLOCK + i, 300 + i));
    for (const p of prompts) {
      await complete(s.sim, p);
      await new Promise((r) => setTimeout(r, 5));
    }
    await until(() => prompts.every((p) => rig.match(p, 2).pod === 6), 'every prompt');
    const st = await rig.backend(2);
    assert.ok(dropped > 0 && forwarded > 0, `relay dropped ${dropped}, forwarded ${forwarded}`);
    assert.ok(st.gaps >= 1 && st.replayedBatches >= 1, json(st));
    assert.equal(st.resyncs, 0, json(st));
    assert.equal(st.unplaceable, 0, json(st));
  } finally {
    await rig.close();
    relayIn.close();
    relayOut.close();
    await loop;
    await s.sim.close();
  }
});

function lcg (seed: number): () => number {
  let x = seed >>> 0;
  return () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0) / 2 ** 32;
}

test('fuzzed payloads and frames never crash the thread; a good batch afterwards is applied', async () => {
  const rig = startRig();
  const pub = new Publisher({ linger: 0, sendHighWaterMark: 100_000 });
  await pub.bind('tcp://127.0.0.1:*');
  const rnd = lcg(12345);
  const int = (n: number): number => Math.floor(rnd() * n);
  const bytes = (n: number): Uint8Array => Uint8Array.from({ length: n }, () => int(256));
  const tokens = Array.from(Buffer.from(prompt(4 * BLOCK, 1)));
  const good = (): Uint8Array => encodeBatch({
    ts: Date.now() / 1000, dataParallelRank: 0,
    events: [{ type: 'BlockStored', blockHashes: [1n, 2n, 3n, 4n], parentBlockHash: null, tokenIds: tokens, blockSize: BLOCK, loraId: null, medium: 'GPU', loraName: null, extraKeys: null, groupIdx: 0 }]
  }, { batchLayout: 'array', eventLayout: 'array', hashFormat: 'int' });
  const anyValue = (depth: number): unknown => {
    switch (int(depth > 2 ? 6 : 8)) {
      case 0: return null;
      case 1: return int(2 ** 31) - 2 ** 30;
      case 2: return ['BlockStored', 'BlockRemoved', 'AllBlocksCleared', 'GPU', 'CPU', 'x'][int(6)];
      case 3: return bytes(int(40));
      case 4: return rnd() * 1e6;
      case 5: return BigInt(int(2 ** 31)) * BigInt(int(2 ** 31)) * 8n;
      case 6: return Array.from({ length: int(14) }, () => anyValue(depth + 1));
      default: return { type: anyValue(3), block_hashes: anyValue(depth + 1), token_ids: anyValue(depth + 1), block_size: anyValue(3), parent_block_hash: anyValue(3), extra_keys: anyValue(depth + 1), medium: anyValue(3) };
    }
  };
  let seq = 0n;
  try {
    await rig.thread.setBackends([{ index: 3, id: 'fuzz', model: 'm', kvEvents: pub.lastEndpoint!, replay: null, topic: '' }]);
    // PUB/SUB joins asynchronously: send good batches until one has been applied.
    await until(async () => {
      await pub.send(buildPubMessage('', seq++, good()));
      return (await rig.backend(3)).batches > 0;
    }, 'the subscriber joined');
    const valid = good();
    for (let i = 0; i < 3000; i++) {
      const kind = int(5);
      let frames: Uint8Array[];
      if (kind === 0) frames = Array.from({ length: int(5) }, () => bytes(int(12)));
      else if (kind === 1) frames = [...buildPubMessage('', seq++, bytes(int(300)))];
      else if (kind === 2) {
        const m = valid.slice();
        for (let j = 0, n = 1 + int(4); j < n; j++) m[int(m.length)] = int(256);
        frames = [...buildPubMessage('', seq++, m)];
      } else if (kind === 3) {
        frames = [...buildPubMessage('', seq++, encode([rnd() * 2e9, Array.from({ length: int(4) }, () => anyValue(0)), 0], { useBigInt64: true }))];
      } else {
        frames = [...buildPubMessage('', seq++, encode([rnd() * 2e9, [['BlockStored', [1n, 2n], anyValue(2), anyValue(1), anyValue(2), null, anyValue(2), anyValue(2), anyValue(1)]], 0], { useBigInt64: true }))];
      }
      await pub.send(frames);
    }
    // The thread still answers, has counted the garbage, and applies a good batch.
    await until(async () => (await rig.backend(3)).lastSeq === seq - 1n, { what: 'the fuzz to be consumed', timeoutMs: 20_000 });
    await pub.send(buildPubMessage('', seq++, encodeBatch({ ts: Date.now() / 1000, dataParallelRank: 0, events: [{ type: 'AllBlocksCleared' }] }, { batchLayout: 'array', eventLayout: 'map', hashFormat: 'int' })));
    await pub.send(buildPubMessage('', seq++, good()));
    await until(() => rig.match(String.fromCharCode(...tokens), 3).pod === 4, 'the good batch');
    const st = await rig.backend(3);
    assert.ok(st.decodeErrors > 100, json(st));
    assert.equal(st.handlerErrors, 0, json(st));
  } finally {
    await rig.close();
    pub.close();
  }
});
