import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createRegion, Region } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { EventApplier } from '../../src/kvevents/event-applier.js';
import type { BlockStored, KvEvent } from '../../src/kvevents/types.js';

const small = { prefixIndexKeys: 1 << 12, sessions: 64, heapJobs: 16, recordRingOps: 1 << 8, pods: 8, scratchSlots: 8, scratchBytes: 1 << 16 };
const BS = 4;

function setup (maxMappedBlocks = 1000) {
  const region = new Region(createRegion(small));
  const w = new PrefixIndexWriter(region);
  const applier = new EventApplier(w, new BlockHasher(region), 2, 'm', { blockSize: BS, maxMappedBlocks });
  // The gateway's side: its own hasher, as src/gateway/features.ts uses it.
  const gw = new BlockHasher(region);
  const gatewayKeys = (tokens: number[], model = 'm', salt: string | null = null) => gw.hash(tokens, BS, gw.rootSeed(model, null, salt));
  const batch = (...events: KvEvent[]) => ({ ts: 1, events, dataParallelRank: 0 });
  return { w, applier, gatewayKeys, batch };
}

function stored (hashes: bigint[], parent: bigint | null, tokens: number[], over: Partial<BlockStored> = {}): BlockStored {
  return { type: 'BlockStored', blockHashes: hashes, parentBlockHash: parent, tokenIds: tokens, blockSize: BS, loraId: null, medium: 'GPU', loraName: null, extraKeys: null, groupIdx: 0, ...over };
}

const range = (from: number, n: number) => Array.from({ length: n }, (_, i) => from + i);

test('stored blocks get the keys the gateway computes for the same tokens, chained across events through the parent', () => {
  const { w, applier, gatewayKeys, batch } = setup();
  const tokens = range(100, 5 * BS);
  applier.apply(batch(stored([11n, 12n], null, tokens.slice(0, 2 * BS))), 1);
  applier.apply(batch(stored([13n, 14n, 15n], 12n, tokens.slice(2 * BS))), 1);
  const keys = gatewayKeys(tokens);
  assert.equal(w.longestPrefix(keys), 5);
  assert.equal(w.counts[2], 5);
  assert.equal(w.longestPrefix(keys, w.mask.confirmed), 5);
  assert.equal(w.longestPrefix(keys, w.mask.assumed), 0);
  assert.equal(applier.stats.blocksStored, 5);
  assert.deepEqual(applier.mapped(), { blocks: 5, confirmed: 5, offloaded: 0 });
  // other prompts (another model, a salt) do not match
  assert.equal(w.longestPrefix(gatewayKeys(tokens, 'other')), 0);
  assert.equal(w.longestPrefix(gatewayKeys(tokens, 'm', 's')), 0);
});

test('cache_salt from block 0\'s extra keys and the LoRA name seed the chain as the gateway seeds it', () => {
  const { w, applier, gatewayKeys, batch } = setup();
  const t = range(7, 2 * BS);
  applier.apply(batch(stored([1n, 2n], null, t, { extraKeys: [['tenant-a'], null] })), 1);
  assert.equal(w.longestPrefix(gatewayKeys(t, 'm', 'tenant-a')), 2);
  assert.equal(w.longestPrefix(gatewayKeys(t)), 0);
  // LoRA: the name is on every block; the gateway's model for such a request is the adapter's name
  applier.apply(batch(stored([3n, 4n], null, t, { loraName: 'ad', extraKeys: [['ad', 'tenant-b'], ['ad']] })), 1);
  assert.equal(w.longestPrefix(gatewayKeys(t, 'ad', 'tenant-b')), 2);
  // a multimodal item in block 1: block 0 is applied, block 1 and on are not
  applier.apply(batch(stored([5n, 6n], null, range(50, 2 * BS), { extraKeys: [null, [['img-hash', 0]]] })), 1);
  assert.equal(w.longestPrefix(gatewayKeys(range(50, 2 * BS))), 1);
  assert.equal(applier.stats.unsupportedExtras, 1);
  // an adapter known only by its id cannot be keyed like the gateway keys it: skipped, never taken for the base model
  applier.apply(batch(stored([8n, 9n], null, range(90, 2 * BS), { loraId: 3 })), 1);
  assert.equal(w.longestPrefix(gatewayKeys(range(90, 2 * BS))), 0);
  assert.equal(applier.stats.unsupportedExtras, 3);
});

test('BlockRemoved per tier, tier-only stores, AllBlocksCleared, unplaceable and other block sizes', () => {
  const { w, applier, gatewayKeys, batch } = setup();
  const t = range(1, 3 * BS);
  const keys = gatewayKeys(t);
  applier.apply(batch(stored([1n, 2n, 3n], null, t)), 1);
  // offload of blocks 1 and 2 to CPU (no tokens): they gain the offloaded tier
  applier.apply(batch(stored([2n, 3n], null, [], { medium: 'cpu' })), 1);
  assert.equal(w.longestPrefix(keys, w.mask.offloaded), 0, 'block 0 is not offloaded');
  assert.deepEqual(w.lookup(keys.keys[2], w.mask.offloaded), [2]);
  // GPU eviction of block 2: still offloaded there, so still mapped
  applier.apply(batch({ type: 'BlockRemoved', blockHashes: [3n], medium: 'GPU', groupIdx: 0 }), 1);
  assert.equal(w.longestPrefix(keys, w.mask.confirmed), 2);
  assert.equal(w.longestPrefix(keys), 3);
  applier.apply(batch({ type: 'BlockRemoved', blockHashes: [3n], medium: 'CPU', groupIdx: null }), 1);
  assert.equal(w.longestPrefix(keys), 2);
  assert.deepEqual(applier.mapped(), { blocks: 2, confirmed: 2, offloaded: 1 });
  applier.apply(batch({ type: 'BlockRemoved', blockHashes: [99n], medium: 'GPU', groupIdx: 0 }), 1);
  assert.equal(applier.stats.unknownRemoved, 1);
  // a parent never seen: cannot be placed
  applier.apply(batch(stored([40n], 77n, range(0, BS))), 1);
  assert.equal(applier.stats.unplaceable, 1);
  // other block size, other KV group, self-contradicting token count
  applier.apply(batch(stored([41n], null, range(0, 8), { blockSize: 8 })), 1);
  applier.apply(batch(stored([42n], null, range(0, BS), { groupIdx: 1 })), 1);
  applier.apply(batch(stored([43n], null, range(0, BS + 1))), 1);
  assert.equal(applier.stats.blockSizeMismatch, 1);
  assert.equal(applier.stats.otherGroups, 1);
  assert.equal(applier.stats.malformed, 1);
  // AllBlocksCleared: the engine holds nothing, so what EAR's routing assumed it holds goes too (issue 28 #9),
  // for a reader at once (voided, no sweep); another pod's assumed entry of the same block stays, and what is
  // routed to the engine after the clear counts again
  w.insert(keys.keys[0], 2, w.kind.assumed, 1);
  w.insert(keys.keys[0], 3, w.kind.assumed, 1);
  applier.apply(batch({ type: 'AllBlocksCleared' }), 2);
  assert.equal(w.longestPrefix(keys, w.mask.confirmed | w.mask.offloaded), 0);
  assert.equal(w.longestPrefix(keys, w.mask.assumed, 3), 1);
  assert.equal(w.counts[2], 0, 'the cleared pod keeps no assumed entry');
  assert.equal(w.counts[3], 1);
  assert.deepEqual(w.lookup(keys.keys[0], w.mask.all, 3), [3]);
  w.insert(keys.keys[0], 2, w.kind.assumed, 4);
  assert.deepEqual(w.lookup(keys.keys[0], w.mask.all, 5), [2, 3]);
  assert.equal(applier.mapped().blocks, 0);
});

test('the mapping is bounded: the least recently stored goes, and its key leaves the index', () => {
  const { w, applier, gatewayKeys, batch } = setup(4);
  const t = range(1, 6 * BS);
  applier.apply(batch(stored([1n, 2n, 3n, 4n, 5n, 6n], null, t)), 1);
  assert.equal(applier.stats.mapDrops, 2);
  assert.equal(applier.mapped().blocks, 4);
  const keys = gatewayKeys(t);
  assert.equal(w.lookup(keys.keys[0]), null);
  assert.deepEqual(w.lookup(keys.keys[5]), [2]);
});

test('property: after any sequence of stores and removals the index holds exactly the mapped blocks', () => {
  fc.assert(fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 5 }), fc.integer({ min: 1, max: 4 }), fc.boolean()), { maxLength: 40 }), (ops) => {
    const { w, applier, gatewayKeys, batch } = setup(8);
    // prompt p's block i has engine hash p*100+i
    for (const [store, p, nb, cpu] of ops) {
      const tokens = range(p * 1000, nb * BS);
      const hashes = range(0, nb).map((i) => BigInt(p * 100 + i));
      const medium = cpu ? 'CPU' : 'GPU';
      if (store) applier.apply(batch(stored(hashes, null, tokens, { medium })), 1);
      else applier.apply(batch({ type: 'BlockRemoved', blockHashes: hashes, medium, groupIdx: 0 }), 1);
    }
    // every present key is a mapped one and vice versa, tier by tier
    const m = applier.mapped();
    assert.equal(w.stats().size, m.blocks);
    let confirmed = 0;
    let offloaded = 0;
    for (let p = 0; p <= 5; p++) {
      for (const key of gatewayKeys(range(p * 1000, 4 * BS)).keys) {
        if ((w.lookup(key, w.mask.confirmed)?.length ?? 0) > 0) confirmed++;
        if ((w.lookup(key, w.mask.offloaded)?.length ?? 0) > 0) offloaded++;
      }
    }
    assert.deepEqual({ confirmed, offloaded }, { confirmed: m.confirmed, offloaded: m.offloaded });
  }), { numRuns: 200 });
});
