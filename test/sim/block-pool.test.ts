import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { BlockPool } from '../../src/sim/block-pool.js';
import { SimEngine } from '../../src/sim/engine.js';
import { BlockHasher } from '../../src/sim/block-hash.js';
import { DigestTable } from '../../src/sim/digest-table.js';
import { req, tinyProfile } from './helpers.js';

test('the pool allocates least recently freed first, drops the hash of an evicted block, refuses duplicates', () => {
  const pool = new BlockPool(4);
  const h = new BlockHasher(2);
  const out: number[] = [];
  assert.equal(pool.allocate(3, out), true);
  assert.deepEqual(out, [0, 1, 2]);
  const d = h.extend([], [1, 2, 3, 4], null, null);
  assert.equal(pool.cache(0, d[0]), true);
  assert.equal(pool.cache(1, d[0]), false, 'one digest names one block');
  assert.equal(pool.lookup(d[0]), 0);
  pool.free([2, 1, 0]);
  assert.equal(pool.numFree, 4);
  pool.touch(0);
  assert.equal(pool.numFree, 3);
  pool.free([0]);
  const next: number[] = [];
  assert.equal(pool.allocate(4, next), true);
  // Queue: 3 (never used), 2, 1, 0 (freed last).
  assert.deepEqual(next, [3, 2, 1, 0]);
  assert.equal(pool.lookup(d[0]), -1);
  assert.deepEqual(pool.takeEvents().map((e) => e.type), ['BlockRemoved']);
  assert.equal(pool.allocate(1, next), false);
  pool.free(next);
  assert.throws(() => pool.free([1]), /freed twice/);
});

// Random arrivals (prompts sharing prefixes), steps, aborts, exports and releases on a cache small enough to
// force eviction and preemption: after every command the pool and the engine agree on every block.
test('property: the engine never leaks or double-frees a block, and every request completes', () => {
  const cmd = fc.oneof(
    fc.record({ op: fc.constant('add' as const), prefix: fc.integer({ min: 0, max: 3 }), len: fc.integer({ min: 1, max: 30 }), tail: fc.integer({ min: 0, max: 5 }), max: fc.integer({ min: 1, max: 12 }), exp: fc.boolean(), imp: fc.boolean() }),
    fc.record({ op: fc.constant('step' as const), n: fc.integer({ min: 1, max: 6 }) }),
    fc.record({ op: fc.constant('abort' as const), pick: fc.nat() }),
    fc.record({ op: fc.constant('release' as const), pick: fc.nat() }),
    fc.record({ op: fc.constant('reset' as const) })
  );
  const seen = { preemptions: 0, evictions: 0, imports: 0, expired: 0 };
  fc.assert(fc.property(fc.array(cmd, { minLength: 1, maxLength: 60 }), fc.integer({ min: 10, max: 24 }), (cmds, blocks) => {
    const e = new SimEngine({ profile: tinyProfile({ maxNumBatchedTokens: 16, maxNumSeqs: 4 }), numGpuBlocks: blocks, holdTimeout: 5 });
    let t = 0;
    let n = 0;
    const ids: string[] = [];
    const held: string[] = [];
    const done = new Set<string>();
    const step = (): void => {
      const next = e.nextStepTime(t);
      if (next === null) return;
      t = next;
      const r = e.step(t);
      t += r.duration;
      for (const o of r.outputs) if (o.finished !== null) { done.add(o.id); if (o.heldBlockIds !== undefined) held.push(o.id); }
    };
    for (const c of cmds) {
      if (c.op === 'add') {
        const id = `r${n++}`;
        const prompt = Array.from({ length: c.len }, (_, i) => (i < c.len - c.tail ? c.prefix * 100 + i : 1000 + n * 10 + i));
        const imp = c.imp && held.length > 0 ? { prefixTokenIds: prompt.slice(0, 8), sourceEngineId: 'x' } : null;
        try {
          e.addRequest(req(id, prompt, { maxTokens: c.max, kvExport: c.exp && imp === null, kvImport: imp }));
          ids.push(id);
        } catch (err) {
          assert.match((err as Error).message, /KV cache/);
        }
      } else if (c.op === 'step') {
        for (let i = 0; i < c.n; i++) step();
      } else if (c.op === 'abort' && ids.length > 0) {
        const id = ids[c.pick % ids.length];
        if (e.abortRequest(id)) done.add(id);
      } else if (c.op === 'release' && held.length > 0) {
        e.releaseHeld(held[c.pick % held.length]);
      } else if (c.op === 'reset') {
        e.resetPrefixCache();
      }
      e.check();
    }
    // Liveness: with holds expiring, everything finishes.
    for (let i = 0; i < 10000 && done.size < ids.length; i++) {
      if (e.nextStepTime(t) === null) t += 10; // only holds block progress: let them expire
      e.expireHolds(t);
      step();
      e.check();
    }
    assert.equal(done.size, ids.length);
    for (const id of held) e.releaseHeld(id);
    e.check();
    assert.equal(e.pool.numFree, blocks);
    seen.preemptions += e.stats().preemptions;
    seen.evictions += e.pool.evictions;
    seen.imports += e.importedTokens;
    seen.expired += e.expiredHolds;
  // Seeded: the coverage check below must not depend on the draw (an unseeded run once saw no expired hold).
  }), { numRuns: 150, seed: 20261122 });
  // The runs did exercise what they are meant to.
  for (const [k, v] of Object.entries(seen)) assert.ok(v > 0, `no ${k} in any run`);
});

test('property: the digest table agrees with a Map under random inserts and deletes (probe runs survive deletion)', () => {
  const h = new BlockHasher(1);
  const digests = Array.from({ length: 64 }, (_, i) => h.hashBlock(null, [i], 0, null));
  fc.assert(fc.property(fc.array(fc.tuple(fc.boolean(), fc.integer({ min: 0, max: 63 })), { maxLength: 300 }), (ops) => {
    const t = new DigestTable(40);
    const m = new Map<number, number>();
    let v = 0;
    for (const [ins, i] of ops) {
      if (ins && m.size < 40) {
        assert.equal(t.set(digests[i], v), !m.has(i));
        if (!m.has(i)) m.set(i, v);
        v++;
      } else {
        assert.equal(t.delete(digests[i]), m.delete(i));
      }
      assert.equal(t.size, m.size);
    }
    for (let i = 0; i < 64; i++) assert.equal(t.get(digests[i]), m.get(i) ?? -1);
  }), { numRuns: 300 });
});
