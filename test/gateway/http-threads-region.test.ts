// The shared region holds every thread's scratch areas: any `httpThreads` up to its bound (64) with any
// `routeThreads` (1…64) fits beside the default tables, so `httpThreads: auto` starts on a host of any size; beside
// larger tables `auto` takes the threads that fit, and a number given that does not fit is refused with the
// settings named (prefix-index-keys.test.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildConfig, ConfigError, type GatewayConfig } from '../../src/config/index.js';
import { fitHttpThreads, sharedRegion } from '../../src/gateway/ear.js';
import { routeThreadsOf } from '../../src/gateway/http-threads.js';
import { Region } from '../../src/core/region.js';

test('the route threads are dealt out among the data-plane threads: at least one each, max(routeThreads, threads) in all', () => {
  for (let threads = 2; threads <= 64; threads++) {
    for (let routeThreads = 1; routeThreads <= 64; routeThreads++) {
      let sum = 0;
      for (let i = 1; i <= threads; i++) {
        const k = routeThreadsOf(i, routeThreads, threads);
        assert.ok(k >= 1 && k <= Math.ceil(routeThreads / threads) + 1);
        sum += k;
      }
      assert.equal(sum, Math.max(routeThreads, threads), `${threads} threads, ${routeThreads} route threads`);
    }
  }
});

test('the largest data-plane configurations fit the region beside the default tables, and every area claims', () => {
  // The most areas: 64 threads with any route threads, and one fewer route thread than threads at 63 (the ceiling
  // share gave those twice the route threads asked for, and 55…63 threads with more route threads did not fit).
  for (const [httpThreads, routeThreads] of [[64, 2], [64, 64], [63, 64], [55, 56], [2, 64]]) {
    const region = new Region(sharedRegion(buildConfig({ httpThreads, routeThreads })));
    // Each data-plane thread claims its own area and its route threads', the main thread and the kv-events and
    // migration threads 14 (ear.ts): all of them can be claimed.
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
    assert.ok(claimed >= httpThreads + Math.max(routeThreads, httpThreads) + 14, `${claimed} areas for ${httpThreads} threads and ${routeThreads} route threads`);
  }
});

/** A configuration as buildConfig makes it on a host of `cores` cores (auto) or with that number given. */
const onHost = (fields: Record<string, unknown>, cores: number, auto: boolean): Readonly<GatewayConfig> =>
  Object.freeze({ ...buildConfig(fields), httpThreads: cores, httpThreadsAuto: auto });

test('httpThreads auto beside the largest prefix index takes the threads that fit; a number given is kept, and refused', () => {
  assert.equal(buildConfig({ httpThreads: 'auto' }).httpThreadsAuto, true);
  assert.equal(buildConfig({ httpThreads: 4 }).httpThreadsAuto, false);
  assert.equal(buildConfig({}).httpThreadsAuto, false);
  for (const fields of [{ prefixIndexKeys: 3145728 }, { prefixIndexKeys: 3145728, maxPods: 16384, routeThreads: 8 }]) {
    const fitted = fitHttpThreads(onHost(fields, 64, true));
    const n = fitted.httpThreads;
    assert.ok(n >= 2 && n < 64, `${n} threads for ${JSON.stringify(fields)}`);
    assert.equal(fitted.httpThreadsAuto, true);
    assert.ok(Object.isFrozen(fitted));
    new Region(sharedRegion(fitted)); // fits
    assert.throws(() => sharedRegion(onHost(fields, n + 1, true)), ConfigError, 'one thread more would not have');
    // Given by number, the same 64 is refused rather than lowered.
    const given = onHost(fields, 64, false);
    assert.equal(fitHttpThreads(given), given);
    assert.throws(() => sharedRegion(given), (err: unknown) => err instanceof ConfigError && /httpThreads/.test(err.message));
  }
  // Beside the default tables every auto count fits: nothing changes.
  const roomy = onHost({}, 64, true);
  assert.equal(fitHttpThreads(roomy), roomy);
});
