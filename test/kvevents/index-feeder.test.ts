import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRegion, Region } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { PrefixIndex } from '../../src/core/prefix-index.js';
import { RingProducer } from '../../src/core/ring.js';
import { startKvEventsThread } from '../../src/kvevents/kv-events-thread.js';
import { until } from '../fixtures/wait.js';

const small = { prefixIndexKeys: 1 << 12, sessions: 64, heapJobs: 16, recordRingOps: 1 << 12, pods: 8, scratchSlots: 8, scratchBytes: 1 << 16 };

test('record ops pushed on the main thread reach the index through the kv-events thread, and age out', async () => {
  const shared = createRegion(small);
  const region = new Region(shared);
  const hasher = new BlockHasher(region);
  const reader = new PrefixIndex(region);
  const ring = new RingProducer(region);
  const thread = startKvEventsThread(shared, { assumedTtlMs: 3000 });
  try {
    await thread.stats(); // the thread is up: ops pushed from here are applied well within their TTL
    const keys = hasher.hash(Array.from({ length: 320 }, (_, i) => i * 7), 16, hasher.rootSeed('m'));
    const now = performance.timeOrigin + performance.now();
    assert.equal(ring.pushKeysAt(ring.layout.opcodes.assumed, 3, keys.ptr, keys.count, now), 20);
    await until(() => reader.longestPrefix(keys) === 20, 'the 20 keys in the index');
    assert.equal(reader.counts[3], 20);
    assert.equal(reader.counts[2], 0);
    // forgetting the pod clears it everywhere
    ring.push(ring.layout.opcodes.forgetPod, 3, 0n, 0n, 0n);
    await until(() => reader.longestPrefix(keys) === 0, 'the forgotten pod\'s keys to go');
    // assumed entries expire after their TTL without any further op
    ring.pushKeysAt(ring.layout.opcodes.assumed, 1, keys.ptr, keys.count, performance.timeOrigin + performance.now());
    await until(() => reader.longestPrefix(keys) === 20, 'the 20 keys in the index');
    // expiry works in slices from a cursor: wait until every key, not just block 0, has aged out
    await until(() => [...keys.keys].every((k) => reader.lookup(k) === null), 'every key to age out');
    const stats = await thread.stats();
    assert.equal(stats.forgotten, 1);
    assert.ok(stats.expired >= 20, JSON.stringify(stats));
  } finally {
    const s = await thread.stop();
    assert.equal(s.applied, 41);
  }
});

test('warmIndex: the kv-events thread makes the whole index resident in slices, and applies ops meanwhile', async () => {
  // 2^16 keys: 2^17 slots of 128 bytes, 16 MB, four of the warm-up's slices
  const shared = createRegion({ ...small, prefixIndexKeys: 1 << 16 });
  const region = new Region(shared);
  const hasher = new BlockHasher(region);
  const reader = new PrefixIndex(region);
  const ring = new RingProducer(region);
  const thread = startKvEventsThread(shared, { assumedTtlMs: 60_000, warmIndex: true });
  try {
    const keys = hasher.hash(Array.from({ length: 320 }, (_, i) => i * 11), 16, hasher.rootSeed('m'));
    assert.equal(ring.pushKeysAt(ring.layout.opcodes.assumed, 2, keys.ptr, keys.count, performance.timeOrigin + performance.now()), 20);
    await until(() => reader.longestPrefix(keys) === 20, 'the 20 keys in the index');
    const slots = reader.stats().slots;
    assert.equal(slots, 1 << 17);
    await until(async () => (await thread.stats()).warmedSlots === slots, 'every slot warmed');
    assert.equal(reader.longestPrefix(keys), 20);
    assert.equal(reader.counts[2], 20);
  } finally {
    await thread.stop();
  }
  // Without it, nothing is warmed.
  const cold = startKvEventsThread(createRegion(small), { assumedTtlMs: 60_000 });
  try {
    assert.equal((await cold.stats()).warmedSlots, 0);
  } finally {
    await cold.stop();
  }
});
