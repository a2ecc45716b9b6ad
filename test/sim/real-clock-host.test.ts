import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SimEngine } from '../../src/sim/engine.js';
import { RealClockHost } from '../../src/sim/real-clock-host.js';
import { loadProfile } from '../../src/engine-model/profile.js';

// Sub-millisecond steps (a small time scale) once ran early, so modelled time outran the wall clock. Load can
// only make the host slower, so a lower bound on wall time is a test that cannot fail by noise.
test('at a small time scale a request still takes its modelled time × the scale on the wall clock', async () => {
  const scale = 0.05;
  const engine = new SimEngine({ profile: loadProfile('h100-llama-3.1-8b') });
  const host = new RealClockHost(engine, scale, () => {});
  const t0 = performance.now();
  const modelled = await new Promise<number>((resolve) => {
    host.submit({
      id: 'r', promptTokenIds: Array.from({ length: 512 }, (_, i) => 1000 + i), maxTokens: 200, minTokens: 0, ignoreEos: true,
      stopTokenIds: [], loraName: null, cacheSalt: null, seed: 1, arrivalTime: 0
    }, (out, _start, end) => { if (out.finished) resolve(end); });
  });
  const wallMs = performance.now() - t0;
  host.close();
  assert.ok(modelled > 0.5, `modelled ${modelled}`);
  assert.ok(wallMs >= 0.95 * modelled * scale * 1000, `wall ${wallMs.toFixed(1)} ms < modelled ${(modelled * scale * 1000).toFixed(1)} ms`);
});
