// An engine restart seen on its /metrics: a real `ear sim` restarted on its port serves a new
// process_start_time_seconds, and the gateway drops what its prefix index holds for that engine's row. The backend
// publishes no KV events, so nothing else could tell: what EAR assumed from its own routing would otherwise stay
// for the assumed TTL (20 min in approximate mode).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getGlobalDispatcher, request } from 'undici';
import pino from 'pino';
import { buildConfig } from '../../src/config/index.js';
import { withTestThreads } from '../fixtures/http-threads-env.js';
import { startEar, type Ear } from '../../src/gateway/ear.js';
import { computeFeatures } from '../../src/features/features.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { until } from '../fixtures/wait.js';

const silent = pino({ level: 'silent' });

async function sim (port = 0): Promise<SimServer> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await startSim({ host: '127.0.0.1', port, timeScale: 0, tokenizer: 'character', servedModelName: ['m'], logger: silent });
    } catch (err) {
      // The old process's port is free a moment after close().
      if (port === 0 || attempt >= 100 || !/EADDRINUSE/.test(String(err))) throw err;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
}

async function metric (url: string, line: string): Promise<number | null> {
  const text = await (await request(`${url}/metrics`)).body.text();
  const m = text.split('\n').find((l) => l.startsWith(line + ' '));
  return m === undefined ? null : Number(m.slice(line.length + 1));
}

test('a new process_start_time_seconds on the engine\'s /metrics drops its row\'s entries; the same one keeps them', async () => {
  let s = await sim();
  let ear: Ear | null = null;
  try {
    const startText = await (await request(`${s.url}/metrics`)).body.text();
    assert.match(startText, /^# TYPE process_start_time_seconds gauge$/m, 'the sim serves prometheus_client\'s gauge');
    assert.match(startText, /^process_start_time_seconds \d+(\.\d+)?$/m);
    ear = await startEar(buildConfig(
      withTestThreads({ host: '127.0.0.1', port: 0, policy: 'ear', tokenizer: 'character', routeThreads: 1, healthIntervalMs: 100, metricsIntervalMs: 50 }),
      { backend: [`${s.url},id=sim-0`] }
    ));
    const url = `http://127.0.0.1:${ear.gateway.port}`;
    const prompt = 'the old process cached this prefix; '.repeat(8);
    const r = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 's1' }, body: JSON.stringify({ model: 'm', prompt, max_tokens: 1 }) });
    assert.equal(r.statusCode, 200, await r.body.text());
    const region = ear.routing.host.index.region;
    const keys = computeFeatures({ tokenizer: createTokenizerSync('character'), hasher: new BlockHasher(region, region.claimScratch()), blockSize: 16 }, 'completions',
      Buffer.from(JSON.stringify({ model: 'm', prompt, max_tokens: 1 }))).blockKeys;
    const backend = ear.gateway.fleet.backends[0];
    const assumed = (): number => ear!.routing.prefixOf(keys, backend)!.assumed;
    await until(() => assumed() === keys.length, 'the routed prompt assumed on sim-0');

    // Scrapes of the same process change nothing.
    await until(() => backend.startTime !== null, 'the start time read');
    const first = backend.startTime;
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(backend.restarts, 0);
    assert.equal(assumed(), keys.length, 'the same process keeps its entries');

    const port = s.port;
    await s.close();
    s = await sim(port);
    await until(async () => (await ear!.kvEvents.stats()).restartedRows === 1, 'the restart noted to the kv-events thread');
    assert.notEqual(backend.startTime, first);
    assert.equal(backend.restarts, 1);
    assert.equal(assumed(), 0, 'no entry of the old process is left on the row');
    assert.equal(await metric(url, 'ear_backend_restarts{backend="sim-0"}'), 1);
  } finally {
    await ear?.close();
    await s.close();
    await getGlobalDispatcher().close();
  }
});
