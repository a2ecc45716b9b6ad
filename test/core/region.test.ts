import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { createRegion, Region } from '../../src/core/region.js';

test('a region is found from another thread through its directory, and scratch claims never overlap', async () => {
  const shared = createRegion({ scratchSlots: 4, scratchBytes: 1 << 16 });
  const here = new Region(shared);
  const mine = here.claimScratch();
  const src = `
    const { parentPort, workerData } = require('node:worker_threads');
    import(workerData.url).then(({ Region }) => {
      const r = new Region(workerData.shared);
      parentPort.postMessage(r.claimScratch());
    });`;
  const url = new URL('../../src/core/region.js', import.meta.url).href;
  const theirs = await new Promise<{ ptr: number; bytes: number }>((resolve, reject) => {
    const w = new Worker(src, { eval: true, workerData: { shared, url } });
    w.once('message', resolve);
    w.once('error', reject);
  });
  assert.equal(theirs.bytes, mine.bytes);
  assert.ok(Math.abs(theirs.ptr - mine.ptr) >= mine.bytes, 'scratch areas overlap');
  here.claimScratch();
  here.claimScratch();
  assert.throws(() => here.claimScratch(), /scratch areas are claimed/);
});

test('attaching to a memory that holds no region fails with a clear error', async () => {
  const { createSharedMemory, coreModule } = await import('../../src/core/wasm.js');
  assert.throws(() => new Region({ memory: createSharedMemory(), module: coreModule() }), /no EAR region/);
});
