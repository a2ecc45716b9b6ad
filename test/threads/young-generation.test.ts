// A data-plane thread's young generation (src/threads/young-generation.ts): the production size unless the process's
// node flags size it, and the limit does reach the thread's heap (its new space grows past V8's default bound).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import { REQUEST_THREAD_SEMI_SPACE_MB, requestThreadLimits, youngGenerationFlagged } from '../../src/threads/young-generation.js';

test('the process\'s own young-generation flags are kept, from the command line or NODE_OPTIONS', () => {
  assert.equal(youngGenerationFlagged([], ''), false);
  assert.equal(youngGenerationFlagged(['--cpu-prof', '--max-old-space-size=512'], '--enable-source-maps'), false);
  assert.equal(youngGenerationFlagged(['--max-semi-space-size=32'], ''), true);
  assert.equal(youngGenerationFlagged([], '--max-semi-space-size=64'), true);
  assert.equal(youngGenerationFlagged(['--max_semi_space_size=8'], ''), true, 'V8 takes underscores too');
  assert.equal(youngGenerationFlagged([], '--min-semi-space-size=16 --inspect'), true);
  assert.equal(youngGenerationFlagged(['--max-young-generation-size=96'], ''), true);
  assert.equal(requestThreadLimits(true), undefined);
  assert.deepEqual(requestThreadLimits(false), { maxYoungGenerationSizeMb: 3 * REQUEST_THREAD_SEMI_SPACE_MB });
});

test('a thread started with the limits grows its new space past V8\'s default bound (16 MB a semi-space)', { timeout: 30_000 }, async () => {
  // Objects that live a while, so each scavenge keeps many and V8 grows the new space as far as it may.
  const code = `
    const v8 = require('node:v8');
    const ring = new Array(65536);
    let max = 0;
    for (let i = 0; i < 3e6; i++) {
      ring[i & 65535] = new Array(16).fill(i);
      if ((i & 65535) === 0) max = Math.max(max, v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size);
    }
    require('node:worker_threads').parentPort.postMessage(max);`;
  const w = new Worker(code, { eval: true, resourceLimits: requestThreadLimits(false) });
  const [max] = await once(w, 'message') as [number];
  await w.terminate();
  assert.ok(max > 2 * 16 * 2 ** 20, `new space reached ${(max / 2 ** 20).toFixed(0)} MB`);
  assert.ok(max <= 2 * REQUEST_THREAD_SEMI_SPACE_MB * 2 ** 20);
});
