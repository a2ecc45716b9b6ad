import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRegion, Region } from '../../src/core/region.js';
import { PrefixIndex } from '../../src/core/prefix-index.js';
import { IndexWarmer } from '../../src/kvevents/index-warmer.js';

test('the index warmer reads every page of the index slots, a slice per step, and always makes progress', () => {
  // 2^16 keys: 2^17 slots of 128 bytes, 4,096 pages.
  const region = new Region(createRegion({ prefixIndexKeys: 1 << 16, sessions: 64, heapJobs: 16, recordRingOps: 1 << 10, pods: 8, scratchSlots: 8, scratchBytes: 1 << 16 }));
  const index = new PrefixIndex(region);
  const pages = Math.ceil((index.stats().slots * region.const('IX_ENTRY_BYTES') + region.const('IX_HEADER_BYTES')) / 4096);
  const warmer = new IndexWarmer(region, index);
  let steps = 0;
  // A deadline already past still reads one batch: the warmer finishes however short its slices are.
  while (warmer.step(0)) steps++;
  assert.ok(warmer.done);
  assert.equal(steps + 1, Math.ceil(pages / 64));
  // With time to spare, one step reads them all.
  const again = new IndexWarmer(region, index);
  assert.equal(again.step(performance.now() + 60_000), false);
  assert.ok(again.done);
});
