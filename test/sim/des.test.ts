import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DesHost } from '../../src/sim/des.js';
import { OffloadStore } from '../../src/sim/offload-store.js';
import { range, req, tinyProfile } from './helpers.js';

// A closed loop of sessions over 3 engines: every turn extends the previous prompt with its output and a
// "tool result", sent after a random delay from the host's seeded stream.
function run (seed: number): string[] {
  const des = new DesHost({ seed });
  for (let i = 0; i < 3; i++) des.addEngine({ profile: tinyProfile(), numGpuBlocks: 40 });
  const log: string[] = [];
  let kvBatches = 0;
  des.onKvEvents = () => { kvBatches++; };
  for (let s = 0; s < 6; s++) {
    let prompt = range(s * 1000, 10);
    let outputs: number[] = [];
    const turn = (k: number, at: number): void => {
      des.submit(s % 3, req(`s${s}t${k}`, prompt, { maxTokens: 4 + s, seed: s }), at, {
        onTokens: (_t, out) => outputs.push(...out.newTokenIds),
        onFirstToken: (t) => log.push(`first s${s}t${k} ${t.toFixed(6)}`),
        onFinish: (t, out) => {
          log.push(`done s${s}t${k} ${t.toFixed(6)} cached=${out.numCachedTokens} ${out.finished}`);
          prompt = [...prompt, ...outputs, ...range(5000 + k * 10, 3)];
          outputs = [];
          if (k < 3) turn(k + 1, t + des.random() * 2);
        }
      });
    };
    turn(0, des.random());
  }
  des.run();
  log.push(`steps=${des.steps} kv=${kvBatches} now=${des.now.toFixed(6)}`);
  for (const e of des.engines) e.check();
  return log;
}

test('the DES host is deterministic for a seed, and every turn completes', () => {
  const a = run(42);
  assert.deepEqual(run(42), a);
  assert.notDeepEqual(run(43), a);
  assert.equal(a.filter((l) => l.startsWith('done')).length, 24);
  assert.equal(a.filter((l) => l.startsWith('first')).length, 24);
  // Later turns of a session hit the blocks of earlier ones.
  assert.ok(a.some((l) => /done s\d+t[1-3] .* cached=[1-9]/.test(l)));
});

test('virtual time advances by step durations; timers and aborts run at their times', () => {
  const des = new DesHost();
  const e = des.addEngine({ profile: tinyProfile(), numGpuBlocks: 200 });
  const seen: Array<[string, number]> = [];
  des.submit(e, req('a', range(1, 10), { maxTokens: 2 }), 1, { onFinish: (t) => seen.push(['a', t]) });
  des.submit(e, req('b', range(100, 10), { maxTokens: 500 }), 1, { onFinish: (t, o) => seen.push([`b ${o.finished}`, t]) });
  des.at(0.5, (t) => seen.push(['timer', t]));
  des.abort(e, 'b', 2);
  des.run(1.5);
  assert.equal(des.now, 1.5);
  des.run();
  // Prefill of both (0.01 + 2·(0.01 + 1e-5·10·5)), then one decode step of both (0.01 + 0.004 + 0.0001·22).
  const t1 = 1 + 0.01 + 2 * (0.01 + 1e-5 * 50);
  assert.deepEqual(seen.map((s) => s[0]), ['timer', 'a']);
  assert.ok(Math.abs(seen[1][1] - (t1 + 0.01 + 0.004 + 0.0001 * 22)) < 1e-9);
  assert.equal(des.engines[e].stats().running, 0);
  assert.equal(des.engines[e].stats().kvUsage, 0);
  assert.throws(() => des.submit(3, req('x', [1]), 0), /no engine 3/);
});

test('a KV move between two DES engines: the import waits for the transfer on the virtual clock', () => {
  const des = new DesHost();
  const src = des.addEngine({ profile: tinyProfile(), numGpuBlocks: 100 });
  const dst = des.addEngine({ profile: tinyProfile(), numGpuBlocks: 100 });
  const stored: Array<[number, number]> = [];
  des.onKvEvents = (engine, t, events) => { for (const e of events) if (e.type === 'BlockStored') stored.push([engine, t]); };
  const prompt = range(1, 40);
  let importDone = -1;
  let cached = -1;
  des.submit(src, req('x', prompt, { kvExport: true }), 0, {
    onFinish: (t) => {
      const held = des.engines[src].heldBlocks('x')!;
      assert.equal(held.length, 40);
      des.submit(dst, req('y', [...prompt, 41, 42], { maxTokens: 2, kvImport: { prefixTokenIds: held, sourceEngineId: 'src' } }), t, {
        onFinish: (t2, out) => {
          importDone = t2;
          cached = out.numCachedTokens;
          des.engines[src].releaseHeld('x');
        }
      });
    }
  });
  des.run();
  // 10 blocks × 4 tokens × 32 B at 1000 B/s + 0.5 s setup: the import cannot finish before ~1.78 s.
  assert.ok(importDone > 0.5 + 40 * 32 / 1000, `${importDone}`);
  assert.equal(cached, 40);
  assert.ok(stored.some(([e, t]) => e === dst && t > 1.78), 'the pulled blocks are published by the target when they land');
  assert.equal(des.engines[src].stats().kvUsage, 0);
  for (const e of des.engines) e.check();
});

// A session computed on engine 0, then re-routed to engine 1 (the shared-store connector's "just re-route").
function migrate (shared: boolean, handoffAt: number | null): { cached: number; ttft: number; loaded: number } {
  const des = new DesHost();
  const profile = tinyProfile({ offload: { loadBytesPerSecond: 1e6, setup: 0.001 } });
  const store = shared ? new OffloadStore(1000) : null;
  const a = des.addEngine({ profile, numGpuBlocks: 100, offloadStore: store });
  const b = des.addEngine({ profile, numGpuBlocks: 100, offloadStore: store });
  const prompt = range(1, 60);
  const result = { cached: -1, ttft: -1, loaded: 0 };
  const toB = (t: number): void => {
    des.submit(b, req('b', [...prompt, 61, 62], { maxTokens: 2 }), t, {
      onFirstToken: (t2) => { result.ttft = t2 - t; },
      onFinish: (_t, out) => { result.cached = out.numCachedTokens; }
    });
  };
  des.submit(a, req('a', prompt, { maxTokens: 2 }), 0, { onFinish: (t) => { if (handoffAt === null) toB(t); } });
  if (handoffAt !== null) des.at(handoffAt, toB);
  des.run();
  result.loaded = des.engines[b].offloadLoadedTokens;
  for (const e of des.engines) e.check();
  return result;
}

test('DES engines sharing an offload store: B loads what A computed, and its TTFT is the load, not the prefill', () => {
  const viaStore = migrate(true, null);
  const cold = migrate(false, null);
  // 62 tokens: 15 blocks of 4 are loadable (the last token stays to compute); A stored 15 full blocks of its 61.
  assert.equal(viaStore.cached, 60);
  assert.equal(viaStore.loaded, 60);
  assert.equal(cold.cached, 0);
  const load = 0.001 + 60 * 32 / 1e6;
  const prefill2 = 0.01 + 0.001 * 2 + 1e-5 * 2 * (60 + 1);
  assert.ok(Math.abs(viaStore.ttft - (load + prefill2)) < 1e-9, `${viaStore.ttft}`);
  assert.ok(Math.abs(cold.ttft - (0.01 + 0.001 * 62 + 1e-5 * 62 * 31)) < 1e-9, `${cold.ttft}`);
  assert.ok(viaStore.ttft * 3 < cold.ttft);
  // Sent to B while A is still computing the prompt (A's prefill step ends at 0.088 s): nothing is in the store yet.
  const early = migrate(true, 0.02);
  assert.equal(early.cached, 0);
  assert.equal(early.loaded, 0);
});

test('a driver passes each request\'s priority on the request it submits; a priority engine serves by it, an fcfs one by arrival', () => {
  const order = (policy: 'fcfs' | 'priority'): string[] => {
    const des = new DesHost({ seed: 1 });
    des.addEngine({ profile: tinyProfile({ maxNumSeqs: 1 }), schedulingPolicy: policy });
    const done: string[] = [];
    const cb = { onFinish: (_t: number, out: { id: string }) => { done.push(out.id); } };
    des.submit(0, req('first', range(1, 8), { maxTokens: 20 }), 0, cb);
    // Queued behind it at the same virtual instant, in this order.
    des.submit(0, req('lazy', range(100, 8), { priority: 4 }), 0.01, cb);
    des.submit(0, req('plain', range(200, 8)), 0.01, cb);
    des.submit(0, req('urgent', range(300, 8), { priority: -4 }), 0.01, cb);
    des.run();
    return done;
  };
  assert.deepEqual(order('priority'), ['first', 'urgent', 'plain', 'lazy']);
  assert.deepEqual(order('fcfs'), ['first', 'lazy', 'plain', 'urgent']);
});
