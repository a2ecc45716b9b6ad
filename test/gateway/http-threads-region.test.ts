// The shared region holds every thread's scratch areas: `httpThreads` up to its bound (64) fits beside the default
// tables, whatever the route threads, so `httpThreads: auto` starts on a host of any size; a configuration that does
// not fit is refused with the settings named (prefix-index-keys.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildConfig } from '../../src/config/index.js';
import { sharedRegion } from '../../src/gateway/ear.js';
import { Region } from '../../src/core/region.js';

test('64 data-plane threads, with 2 or 64 route threads, fit the region beside the default tables', () => {
  for (const routeThreads of [2, 64]) {
    const region = new Region(sharedRegion(buildConfig({ httpThreads: 64, routeThreads })));
    // Each data-plane thread claims two areas (its route worker's and its own), the main thread and the kv-events
    // and migration threads 14 (ear.ts): all of them can be claimed.
    let claimed = 0;
    for (;;) {
      try {
        const a = region.claimScratch();
        assert.equal(a.bytes, 4 << 20);
        claimed++;
      } catch (err) {
        assert.match((err as Error).message, /scratch areas are claimed/);
        break;
      }
    }
    assert.ok(claimed >= 64 * 2 + 14, `${claimed} areas for 64 threads and ${routeThreads} route threads`);
  }
});
