// A pod's KV capacity, as policies see it, comes from its engine (vLLM's vllm:cache_config_info, read at the
// gateway's first scrape, right at start) and else from the backend's configuration (kv-blocks=N).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { getGlobalDispatcher } from 'undici';
import { buildConfig } from '../../src/config/index.js';
import { withTestThreads } from '../fixtures/http-threads-env.js';
import { startEar } from '../../src/gateway/ear.js';
import { startSim } from '../../src/sim/server.js';

after(() => getGlobalDispatcher().close());

test('KV capacity: from the engine\'s cache_config_info when it exports it, else from kv-blocks', async () => {
  const sim = await startSim({ host: '127.0.0.1', port: 0, timeScale: 0, numGpuBlocksOverride: 4321, servedModelName: ['m'], logger: pino({ level: 'silent' }) });
  try {
    const ear = await startEar(buildConfig(
      withTestThreads({ host: '127.0.0.1', port: 0, routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 60_000 }),
      { backend: [`${sim.url},id=engine,kv-blocks=100`] }
    ));
    try {
      assert.equal(ear.routing.host.pod(0)?.kvCapacityBlocks, 4321, 'the engine\'s own figure, from the scrape at start');
      assert.equal(ear.routing.host.pods.get(0)?.kvBlocks, 4321);
    } finally {
      await ear.close();
    }
    const off = await startEar(buildConfig(
      withTestThreads({ host: '127.0.0.1', port: 0, routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 0 }),
      { backend: [`${sim.url},id=engine,kv-blocks=100`] }
    ));
    try {
      assert.equal(off.routing.host.pod(0)?.kvCapacityBlocks, 100, 'no scrape: the configured figure');
    } finally {
      await off.close();
    }
  } finally {
    await sim.close();
  }
});
