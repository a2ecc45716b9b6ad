import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { createRegion, Region } from '../../src/core/region.js';
import { PrefixIndex, PrefixIndexWriter } from '../../src/core/prefix-index.js';
import { capacityOf, ENOUGH, keyOf, stablePods, type StressShape } from './prefix-index-stress-keys.js';

const WORKER = new URL('./prefix-index-stress-worker.js', import.meta.url);

function result (w: Worker): Promise<any> {
  return new Promise((resolve, reject) => {
    w.on('message', (m) => { if (!m.ready) resolve(m); });
    w.once('error', reject);
  });
}

async function stress (shape: StressShape, durationMs: number): Promise<void> {
  const shared = createRegion({ prefixIndexKeys: capacityOf(shape), scratchSlots: 8, scratchBytes: 1 << 20 });
  const region = new Region(shared);
  const ctrlPtr = region.claimScratch().ptr;
  const writer = new Worker(WORKER, { workerData: { shared, shape, role: 'writer', ctrlPtr, durationMs, seed: 1 } });
  const writerDone = result(writer);
  await new Promise<void>((resolve, reject) => {
    writer.once('message', (m) => (m.ready ? resolve() : reject(new Error('writer finished before ready'))));
    writer.once('error', reject);
  });
  assert.throws(() => new PrefixIndexWriter(region), /already has a writer/, 'a second writer thread must be refused');
  const readers = [2, 3, 4].map((seed) => result(new Worker(WORKER, { workerData: { shared, shape, role: 'reader', ctrlPtr, seed } })));
  const [w, ...rs] = await Promise.all([writerDone, ...readers]);
  if (process.env.STRESS_VERBOSE) console.log(JSON.stringify({ w, rs: rs.map((r) => ({ ...r, errors: r.errors.length })) }));

  for (const r of rs) {
    assert.deepEqual(r.errors, [], 'torn read or lost key');
    assert.ok(r.lookups > ENOUGH.lookups && r.prefixes > ENOUGH.prefixes, `reader did too little: ${JSON.stringify(r)}`);
    assert.ok(r.churnHits > 0, 'readers must see churn keys while they move');
  }
  assert.ok(w.ops > ENOUGH.writerOps, `writer did ${w.ops} ops`);
  const s = w.stats;
  assert.equal(s.evictions, 0);
  assert.ok(s.removes + s.expirations > ENOUGH.churnDeletes, `churn must delete keys: ${JSON.stringify(s)}`);
  assert.equal(s.size, s.inserts - s.removes - s.evictions - s.expirations);
  assert.equal(w.probe.junk, 0);
  new PrefixIndexWriter(region).release(); // the finished writer gave the role up
  const ix = new PrefixIndex(region);
  for (let i = 0; i < shape.chains * shape.chainLength; i++) assert.deepEqual(ix.lookup(keyOf(i)), stablePods(shape, i));
}

test('one writer at full speed, three lock-free readers, 65k slots: no torn read, no lost key', async () => {
  await stress({ chains: 80, chainLength: 50, churnKeys: 45152 }, 1200);
});

test('the same in a 128-slot table at load 0.75, where every delete shifts the stable keys around', async () => {
  await stress({ chains: 2, chainLength: 16, churnKeys: 64 }, 1200);
});
