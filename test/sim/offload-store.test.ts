import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { OffloadStore } from '../../src/sim/offload-store.js';
import { nextRandom } from '../../src/sim/token-generator.js';

const d = (i: number): Buffer => createHash('sha256').update(String(i)).digest();

test('the store evicts the least recently used block; a lookup hit counts as a use', () => {
  const s = new OffloadStore(3);
  s.save([d(1), d(2), d(3)], 0);
  assert.equal(s.lookup([d(1)], 1, 0), 1);
  s.save([d(4)], 0);
  // 2 was the least recently used: 1 was read after it.
  assert.deepEqual([1, 2, 3, 4].map((i) => s.has(d(i))), [true, false, true, true]);
  // Saving a block already held only refreshes it.
  s.save([d(3)], 0);
  s.save([d(5)], 0);
  assert.deepEqual([1, 3, 4, 5].map((i) => s.has(d(i))), [false, true, true, true]);
  assert.deepEqual(s.stats(), { capacity: 3, size: 3, stores: 5, lookups: 1, hits: 1, evictions: 2 });
  s.check();
});

test('a lookup counts the leading run from block 0, stops at the first miss, and honours maxBlocks', () => {
  const s = new OffloadStore(16);
  s.save([d(0), d(1), d(3)], 0);
  assert.equal(s.lookup([d(0), d(1), d(2), d(3)], 4, 0), 2);
  assert.equal(s.lookup([d(0), d(1), d(2), d(3)], 1, 0), 1);
  assert.equal(s.lookup([d(9), d(0)], 2, 0), 0, 'a missing first block hides the rest, as LMCache matches from token 0');
  assert.equal(s.lookup([], 5, 0), 0);
  assert.equal(s.hits, 3);
});

test('blocks saved at a step end are invisible to lookups before it', () => {
  const s = new OffloadStore(4);
  s.save([d(0), d(1)], 2.5);
  assert.equal(s.lookup([d(0), d(1)], 2, 2.4), 0);
  assert.equal(s.has(d(0), 2.4), false);
  assert.equal(s.lookup([d(0), d(1)], 2, 2.5), 2);
  // A later save of a held block keeps the earlier time.
  s.save([d(0)], 9);
  assert.equal(s.lookup([d(0)], 1, 3), 1);
});

test('random saves and lookups agree with a Map-based LRU oracle', () => {
  const rng = { rng: 12345 };
  const cap = 37;
  const s = new OffloadStore(cap);
  const oracle = new Map<number, true>();
  const use = (k: number): void => { oracle.delete(k); oracle.set(k, true); };
  let evictions = 0;
  for (let step = 0; step < 5000; step++) {
    const k = Math.floor(nextRandom(rng) * 100);
    if (nextRandom(rng) < 0.6) {
      s.save([d(k)], 0);
      if (!oracle.has(k) && oracle.size === cap) {
        oracle.delete(oracle.keys().next().value!);
        evictions++;
      }
      use(k);
    } else {
      const hit = s.lookup([d(k)], 1, 0);
      assert.equal(hit, oracle.has(k) ? 1 : 0);
      if (hit === 1) use(k);
    }
    if (step % 500 === 0) s.check();
  }
  s.check();
  assert.equal(s.size, oracle.size);
  assert.equal(s.evictions, evictions);
  for (let k = 0; k < 100; k++) assert.equal(s.has(d(k)), oracle.has(k), `key ${k}`);
});

test('a store needs a positive integer capacity', () => {
  assert.throws(() => new OffloadStore(0), /capacity must be a positive integer/);
  assert.throws(() => new OffloadStore(1.5), /capacity must be a positive integer/);
});
