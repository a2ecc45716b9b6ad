import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SimEngine } from '../../src/sim/engine.js';
import { OffloadStore } from '../../src/sim/offload-store.js';
import type { BlockStored } from '../../src/kvevents/types.js';
import { drain, range, req, tinyProfile } from './helpers.js';

const stored = (evs: unknown[]): Array<BlockStored<Uint8Array>> => evs.filter((e) => (e as { type: string }).type === 'BlockStored') as Array<BlockStored<Uint8Array>>;
// Tiny profile: 32 B of KV per token. Loading 1 MB/s with 1 ms setup is far cheaper than its prefill.
const profile = tinyProfile({ offload: { loadBytesPerSecond: 1e6, setup: 0.001 } });

test('a prompt computed on A is loaded on B: counted in cached tokens, timed by load bandwidth, published as BlockStored', () => {
  const store = new OffloadStore(1000);
  const a = new SimEngine({ profile, numGpuBlocks: 64, offloadStore: store });
  const b = new SimEngine({ profile, numGpuBlocks: 64, offloadStore: store });
  const prompt = range(1, 40);
  a.addRequest(req('a', prompt, { maxTokens: 2 }));
  const da = drain(a);
  // 40 prompt + 2 generated tokens, the last one's KV never computed: 41 tokens → 10 full blocks, all saved.
  const aHashes = stored(da.events).flatMap((e) => e.blockHashes);
  assert.equal(aHashes.length, 10);
  assert.equal(a.offloadSavedBlocks, 10);
  assert.equal(store.size, 10);
  assert.equal(a.offloadLoadedTokens, 0);

  const t0 = da.t;
  b.addRequest(req('b', prompt, { maxTokens: 2, arrivalTime: t0 }));
  const first = b.step(t0);
  assert.equal(first.outputs.length, 0, 'the request waits for the load');
  // 9 blocks (the 40th token is left to compute) × 4 tokens × 32 B at 1 MB/s + 1 ms.
  const load = 0.001 + (36 * 32) / 1e6;
  assert.ok(Math.abs(b.nextStepTime(t0)! - (t0 + load)) < 1e-12);
  const db = drain(b, t0);
  const out = db.finished.get('b')!;
  assert.equal(out.numCachedTokens, 36);
  // Then one prefill step of the last 4 tokens after 36 loaded ones: overhead + per token + attention pairs.
  const prefill4 = 0.01 + 0.001 * 4 + 1e-5 * 4 * (36 + 2);
  assert.ok(Math.abs(out.metrics!.firstTokenTime - t0 - (load + prefill4)) < 1e-9, `${out.metrics!.firstTokenTime - t0}`);
  assert.equal(b.offloadLoads, 1);
  assert.equal(b.offloadLoadedTokens, 36);
  assert.equal(b.offloadLoadedBytes, 36 * 32);
  // The loaded blocks enter B's prefix cache under A's hashes, published like any cached block.
  const loaded = stored(db.events)[0];
  assert.equal(loaded.medium, 'GPU');
  assert.equal(loaded.parentBlockHash, null);
  assert.deepEqual(loaded.blockHashes, aHashes.slice(0, 9));
  assert.deepEqual(loaded.tokenIds, prompt.slice(0, 36));
  // Local prefix-cache metrics count only local hits, as vLLM's do (connector hits are not prefix-cache hits).
  assert.equal(b.stats().prefixCacheQueries, 40);
  assert.equal(b.stats().prefixCacheHits, 0);
  // B saved only what it computed, and those blocks were in the store already.
  assert.equal(b.offloadSavedBlocks, 1);
  assert.equal(store.stores, 10);

  // The same prompt on an engine without the store prefills it all: much slower to the first token.
  const c = new SimEngine({ profile, numGpuBlocks: 64 });
  c.addRequest(req('c', prompt, { maxTokens: 2 }));
  const oc = drain(c).finished.get('c')!;
  assert.equal(oc.numCachedTokens, 0);
  const cold = oc.metrics!.firstTokenTime;
  assert.ok(Math.abs(cold - (0.01 + 0.001 * 40 + 1e-5 * 40 * 20)) < 1e-9);
  assert.ok(out.metrics!.firstTokenTime - t0 < cold / 2, `store ${out.metrics!.firstTokenTime - t0} s vs prefill ${cold} s`);
});

test('local hits come first: only the stored blocks beyond them are loaded', () => {
  const store = new OffloadStore(1000);
  const a = new SimEngine({ profile, numGpuBlocks: 64, offloadStore: store });
  const b = new SimEngine({ profile, numGpuBlocks: 64, offloadStore: store });
  // B computes 3 blocks first (and saves them); A then loads those 3 and computes the rest.
  b.addRequest(req('warm', range(1, 13), { maxTokens: 1 }));
  const w = drain(b);
  assert.equal(store.size, 3);
  a.addRequest(req('a', range(1, 40), { maxTokens: 1 }));
  const da = drain(a, w.t);
  assert.equal(a.offloadLoadedTokens, 12);
  assert.equal(da.finished.get('a')!.numCachedTokens, 12);
  b.addRequest(req('b', range(1, 40), { maxTokens: 1 }));
  const db = drain(b, da.t);
  assert.equal(b.offloadLoadedTokens, 24, '9 blocks in the store, 3 of them already on B');
  assert.equal(db.finished.get('b')!.numCachedTokens, 36);
  assert.equal(b.stats().prefixCacheHits, 12);
  // A later turn on B hits its own cache and loads nothing.
  b.addRequest(req('b2', [...range(1, 40), 50, 51, 52], { maxTokens: 1 }));
  drain(b, db.t);
  assert.equal(b.offloadLoads, 1);
});

test('a request aborted while it loads frees its blocks; a full GPU waits for blocks before loading', () => {
  const store = new OffloadStore(1000);
  const a = new SimEngine({ profile, numGpuBlocks: 64, offloadStore: store });
  a.addRequest(req('a', range(1, 40), { maxTokens: 1 }));
  const t0 = drain(a).t;
  const b = new SimEngine({ profile, numGpuBlocks: 12, offloadStore: store });
  b.addRequest(req('x', range(1, 40), { maxTokens: 1 }));
  b.step(t0);
  assert.equal(b.stats().waiting, 1);
  assert.ok(b.stats().kvUsage > 0, 'blocks are taken for the load');
  assert.equal(b.abortRequest('x'), true);
  assert.equal(b.stats().kvUsage, 0);
  b.check();
  // A running request holds 8 of B's 12 blocks: the load of 9 waits until it finishes, then proceeds.
  b.addRequest(req('busy', range(500, 30), { maxTokens: 2 }));
  b.step(t0 + 1);
  b.addRequest(req('y', range(1, 40), { maxTokens: 1 }));
  const d = drain(b, t0 + 1.1);
  assert.equal(d.finished.get('y')!.numCachedTokens, 36);
  assert.ok(d.finished.get('y')!.metrics!.firstScheduledTime >= d.finished.get('busy')!.metrics!.finishTime);
});

test('sessions moving between three engines over a small shared store: invariants hold and every turn finishes', () => {
  const store = new OffloadStore(40);
  // 30 blocks each: two sessions on one engine do not fit at once, so loads wait for blocks and runs preempt.
  const engines = [0, 1, 2].map(() => new SimEngine({ profile, numGpuBlocks: 30, offloadStore: store }));
  const history = new Map<number, number[]>();
  let t = 0;
  let finished = 0;
  for (let round = 0; round < 12; round++) {
    const prompts = new Map<number, number[]>();
    for (let s = 0; s < 5; s++) {
      const prompt = [...(history.get(s) ?? range(s * 1000, 8)), ...range(10_000 + round * 100 + s * 7, 5)];
      prompts.set(s, prompt);
      engines[(round + s) % 3].addRequest(req(`s${s}r${round}`, prompt, { maxTokens: 3, seed: s }));
    }
    let end = t;
    for (const e of engines) {
      const d = drain(e, t);
      end = Math.max(end, d.t);
      for (const [id, out] of d.finished) {
        const s = Number(/^s(\d+)/.exec(id)![1]);
        assert.ok(out.numCachedTokens <= prompts.get(s)!.length - 1);
        history.set(s, [...prompts.get(s)!, ...d.tokens.get(id)!]);
        finished++;
      }
    }
    t = end;
  }
  assert.equal(finished, 60);
  store.check();
  assert.ok(store.evictions > 0, 'the store was small enough to evict');
  assert.ok(engines.some((e) => e.offloadLoads > 0), 'sessions moving between engines loaded from the store');
});
