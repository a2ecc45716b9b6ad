import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAndAttach } from '../../../src/core/region.js';
import { BlockHasher } from '../../../src/core/block-keys.js';
import { PrefixIndexWriter } from '../../../src/core/prefix-index.js';
import { DesKvEventFeed, DEFAULT_KV_DELIVERY_DELAY_MS, type DesKvEventFeedOptions } from '../../../src/eval/drivers/des-kv-events.js';
import { DesHost } from '../../../src/sim/des.js';
import { encodeEngineBatch, simWireFormat } from '../../../src/sim/vllm-event-shape.js';
import { decodeBatch } from '../../../src/kvevents/codec.js';
import type { KvWireFormat } from '../../../src/kvevents/types.js';
import { range, req, tinyProfile } from '../../sim/helpers.js';

const BS = 4; // tinyProfile's block size

/** A DES with `engines` tiny engines, the driver's tables (region, index writer, prompt hasher), and a feed. */
function rig (o: { engines?: number; numGpuBlocks?: number; seed?: number; feed?: Partial<DesKvEventFeedOptions> } = {}) {
  const des = new DesHost({ seed: o.seed ?? 1 });
  for (let i = 0; i < (o.engines ?? 2); i++) des.addEngine({ profile: tinyProfile(), numGpuBlocks: o.numGpuBlocks ?? 40 });
  // As src/eval/drivers/des.ts builds them.
  const region = createAndAttach({ pods: 8, sessions: 1024, scratchSlots: 8 });
  const index = new PrefixIndexWriter(region);
  const keyHasher = new BlockHasher(region);
  const root = keyHasher.rootSeed('des');
  const feed = new DesKvEventFeed({ writer: index, blockSize: BS, ...o.feed }).attach(des);
  /** Per pod, the leading blocks of `tokens` the index holds confirmed for it (the router's prompt keys). */
  const confirmed = (tokens: number[]): number[] => {
    index.longestPrefix(keyHasher.hash(tokens, BS, root), index.mask.confirmed);
    return Array.from(index.counts.subarray(0, 4));
  };
  return { des, index, feed, confirmed };
}

test('an engine\'s stored blocks reach its pod row after the delivery delay, and not before', () => {
  const { des, index, feed, confirmed } = rig();
  const a = range(1, 20); // 5 blocks
  const b = range(1000, 24); // 6 blocks
  // A listener already on the host keeps seeing every batch (the feed chains after it).
  const firstStored: Array<number | undefined> = [];
  const checks: Array<[string, number[], number[]]> = [];
  const delay = DEFAULT_KV_DELIVERY_DELAY_MS / 1000;
  const prev = (engine: number, t: number, events: Parameters<NonNullable<DesHost['onKvEvents']>>[2]): void => {
    if (firstStored[engine] !== undefined || !events.some((e) => e.type === 'BlockStored')) return;
    firstStored[engine] = t;
    // Timers at the same instant as the delivery run in insertion order: before it (this one was set first).
    des.at(t + delay, () => checks.push([`engine ${engine} at due, before delivery`, confirmed(a), confirmed(b)]));
    des.at(t + delay - 1e-9, () => checks.push([`engine ${engine} just before due`, confirmed(a), confirmed(b)]));
    des.at(t + delay + 1e-9, () => checks.push([`engine ${engine} just after due`, confirmed(a), confirmed(b)]));
  };
  feed.detach();
  des.onKvEvents = prev;
  feed.attach(des);

  des.submit(0, req('a', a, { maxTokens: 2 }), 0);
  des.submit(1, req('b', b, { maxTokens: 2 }), 0.5);
  des.run();
  assert.ok(firstStored[0] !== undefined && firstStored[1] !== undefined);
  const at = (label: string) => checks.find((c) => c[0] === label)!;
  assert.deepEqual(at('engine 0 just before due').slice(1), [[0, 0, 0, 0], [0, 0, 0, 0]]);
  assert.deepEqual(at('engine 0 at due, before delivery').slice(1), [[0, 0, 0, 0], [0, 0, 0, 0]]);
  assert.deepEqual(at('engine 0 just after due').slice(1), [[5, 0, 0, 0], [0, 0, 0, 0]]);
  assert.deepEqual(at('engine 1 just before due').slice(1), [[5, 0, 0, 0], [0, 0, 0, 0]]);
  assert.deepEqual(at('engine 1 just after due').slice(1), [[5, 0, 0, 0], [0, 6, 0, 0]]);
  assert.deepEqual(confirmed(a), [5, 0, 0, 0]);
  assert.deepEqual(confirmed(b), [0, 6, 0, 0]);
  assert.deepEqual(des.engines.map((e) => e.pool.numCached), [5, 6]);

  const s = feed.stats();
  assert.equal(s.mode, 'precise');
  assert.equal(s.deliveryDelayMs, DEFAULT_KV_DELIVERY_DELAY_MS);
  assert.deepEqual(s.wire, simWireFormat());
  assert.equal(s.engines.length, 2);
  assert.equal(s.blocksStored, 11);
  assert.equal(s.decodeErrors + s.skippedEvents + s.unplaceable + s.blockSizeMismatch + s.malformed + s.unsupportedExtras, 0);
  assert.equal(s.pending, 0);
  assert.equal(s.batches, s.published);
  assert.ok(s.bytes > 11 * 8);
  assert.deepEqual(s.engines.map((e) => [e.engine, e.pod, e.blocksStored, e.confirmedBlocks]), [[0, 0, 5, 5], [1, 1, 6, 6]]);
  assert.equal(index.stats().size, s.indexedBlocks);
});

test('evictions on the engine take the blocks out of the index; the other engine keeps its own', () => {
  const { des, index, feed, confirmed } = rig({ numGpuBlocks: 24 });
  const a = range(1, 20);
  const b = range(1000, 20);
  des.submit(0, req('a', a, { maxTokens: 1 }), 0);
  des.submit(1, req('b', b, { maxTokens: 1 }), 0);
  des.run();
  assert.deepEqual(confirmed(a), [5, 0, 0, 0]);
  // Fill engine 0 with other prompts, one after another: its LRU free blocks (a's first) are reused.
  for (let i = 0; i < 6; i++) des.submit(0, req(`x${i}`, range(10_000 * (i + 1), 40), { maxTokens: 1 }), 1 + i);
  des.run();
  assert.deepEqual(confirmed(a), [0, 0, 0, 0]);
  assert.deepEqual(confirmed(b), [0, 5, 0, 0]);
  const s = feed.stats();
  assert.ok(s.engines[0].blocksRemoved >= 5, `removed ${s.engines[0].blocksRemoved}`);
  assert.equal(s.engines[1].blocksRemoved, 0);
  assert.equal(s.unknownRemoved, 0);
  // The index mirrors the engines' prefix caches, block for block.
  assert.deepEqual(s.engines.map((e) => e.confirmedBlocks), des.engines.map((e) => e.pool.numCached));
  assert.equal(index.stats().size, s.indexedBlocks);
});

test('every wire layout the simulator speaks lands the same keys; pod rows follow podOf', () => {
  const prompts = [range(1, 33), range(500, 17), range(1, 24)];
  const results: Array<number[][]> = [];
  const wires: KvWireFormat[] = [
    simWireFormat(), { batchLayout: 'array', eventLayout: 'map', hashFormat: 'int' }, { batchLayout: 'array', eventLayout: 'map', hashFormat: 'bytes' },
    { batchLayout: 'map', eventLayout: 'array', hashFormat: 'bytes' }
  ];
  for (const wire of wires) {
    const { des, feed, confirmed } = rig({ feed: { wire, podOf: (e) => e + 2 } });
    prompts.forEach((p, i) => des.submit(i % 2, req(`p${i}`, p, { maxTokens: 3 }), i * 0.1));
    des.run();
    results.push(prompts.map(confirmed));
    const s = feed.stats();
    assert.deepEqual(s.wire, wire);
    assert.deepEqual(s.engines.map((e) => e.pod), [2, 3]);
    assert.equal(s.decodeErrors, 0);
  }
  // p0: 8 full prompt blocks on engine 0 (pod 2); p1: 4 on engine 1 (pod 3); p2 = p0's first 6 blocks, on engine 0.
  assert.deepEqual(results[0], [[0, 0, 8, 0], [0, 0, 0, 4], [0, 0, 6, 0]]);
  for (const r of results) assert.deepEqual(r, results[0]);
});

test('keys line up only under the routed model\'s root: rootSeed(model) is block -1 of both', () => {
  for (const [model, expect] of [[undefined, 5], ['des', 5], ['another-model', 0]] as const) {
    const { des, feed, confirmed } = rig({ feed: model === undefined ? {} : { model } });
    des.submit(0, req('a', range(1, 20), { maxTokens: 1 }), 0);
    des.run();
    assert.equal(feed.model, model ?? 'des');
    assert.equal(feed.stats().blocksStored, 5);
    assert.deepEqual(confirmed(range(1, 20)), [expect, 0, 0, 0], String(model));
  }
});

test('the bytes are the simulator server\'s: encodeEngineBatch decodes to the engine\'s events, ts being virtual seconds', () => {
  const des = new DesHost();
  des.addEngine({ profile: tinyProfile(), numGpuBlocks: 40 });
  const seen: Array<{ t: number; bytes: Uint8Array; n: number }> = [];
  des.onKvEvents = (engine, t, events) => seen.push({ t, bytes: encodeEngineBatch(events, t, engine, simWireFormat()), n: events.length });
  des.submit(0, req('a', range(1, 12), { maxTokens: 1 }), 2);
  des.run();
  assert.ok(seen.length > 0);
  for (const s of seen) {
    const b = decodeBatch(s.bytes);
    assert.equal(b.ts, s.t);
    assert.equal(b.events.length, s.n);
    assert.equal(b.dataParallelRank, 0);
    assert.ok(b.ts >= 2 && b.ts < 3);
  }
});

/** A random two-engine workload with evictions; returns what a report and the index would show. */
function randomRun (seed: number): unknown {
  const { des, index, feed, confirmed } = rig({ seed, numGpuBlocks: 30, feed: { deliveryDelayMs: 3 } });
  const prompts: number[][] = [];
  for (let s = 0; s < 8; s++) {
    let prompt = range(s * 1000, 8 + Math.floor(des.random() * 16));
    const turn = (k: number, at: number): void => {
      prompts.push(prompt);
      des.submit(Math.floor(des.random() * 2), req(`s${s}t${k}`, prompt, { maxTokens: 3, seed: s }), at, {
        onFinish: (t) => {
          prompt = [...prompt, ...range(5000 + s * 100 + k * 10, 1 + Math.floor(des.random() * 9))];
          if (k < 4) turn(k + 1, t + des.random());
        }
      });
    };
    turn(0, des.random() * 2);
  }
  // Wall clocks are off limits: the feed must run on the virtual clock alone.
  const dateNow = Date.now;
  const perfNow = performance.now;
  Date.now = () => { throw new Error('Date.now() called during the DES run'); };
  performance.now = () => { throw new Error('performance.now() called during the DES run'); };
  try {
    des.run();
  } finally {
    Date.now = dateNow;
    performance.now = perfNow;
  }
  const s = feed.stats();
  assert.ok(s.blocksRemoved > 0, 'the run evicts');
  assert.deepEqual(s.engines.map((e) => e.confirmedBlocks), des.engines.map((e) => e.pool.numCached));
  assert.equal(s.unknownRemoved + s.unplaceable + s.decodeErrors, 0);
  return { feed: s, index: index.stats(), prompts: prompts.map(confirmed), now: des.now };
}

test('a run is deterministic for a seed (no wall clock read), and another seed differs', () => {
  const a = randomRun(11);
  assert.deepEqual(randomRun(11), a);
  assert.notDeepEqual(randomRun(12), a);
});

test('options are checked; publish needs a host; attach is once', () => {
  const region = createAndAttach({ pods: 8, sessions: 1024, scratchSlots: 8 });
  const writer = new PrefixIndexWriter(region);
  assert.throws(() => new DesKvEventFeed({ writer, blockSize: 0 }), /blockSize/);
  assert.throws(() => new DesKvEventFeed({ writer, blockSize: 4, deliveryDelayMs: -1 }), /deliveryDelayMs/);
  assert.throws(() => new DesKvEventFeed({ writer, blockSize: 4, maxMappedBlocks: 0 }), /maxMappedBlocks/);
  const feed = new DesKvEventFeed({ writer, blockSize: 4 });
  assert.throws(() => feed.publish(0, 0, [{ type: 'AllBlocksCleared' }]), /attach/);
  const des = new DesHost();
  feed.attach(des);
  assert.throws(() => feed.attach(des), /already attached/);
  feed.detach();
  assert.equal(des.onKvEvents, null);
});
