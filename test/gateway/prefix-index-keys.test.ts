// prefixIndexKeys sizes the gateway's prefix index: past it CLOCK evicts (ear_table_dropped_total{table="prefix_index"})
// and the index never holds more; a size that with the other tables does not fit the shared region is refused at start.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getGlobalDispatcher, request } from 'undici';
import pino from 'pino';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { startEar, type Ear } from '../../src/gateway/ear.js';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { until } from '../fixtures/wait.js';
import { metric } from '../fixtures/processes.js';

async function indexGauges (url: string): Promise<{ entries: number; dropped: number }> {
  return { entries: await metric(url, 'ear_table_entries', '{table="prefix_index"}'), dropped: await metric(url, 'ear_table_dropped_total', '{table="prefix_index"}') };
}

test('an index of 4,096 keys: five prompts of 1,000 blocks fill it, CLOCK evicts, and it never holds more', async () => {
  const sim: SimServer = await startSim({ host: '127.0.0.1', port: 0, timeScale: 0, tokenizer: 'character', servedModelName: ['m'], logger: pino({ level: 'silent' }) });
  let ear: Ear | null = null;
  try {
    ear = await startEar(buildConfig(
      { host: '127.0.0.1', port: 0, tokenizer: 'character', routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 0 },
      { backend: [`${sim.url},id=sim-0`], prefixIndexKeys: '4096' }
    ));
    const url = `http://127.0.0.1:${ear.gateway.port}`;
    for (let s = 0; s < 5; s++) {
      // 16,000 characters of text of its own: 1,000 blocks of 16 tokens with the character tokenizer.
      const prompt = Array.from({ length: 2000 }, (_, i) => `${s}:${(i * 7919) % 9973}`.padStart(8, '.')).join('');
      const r = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': `s${s}` }, body: JSON.stringify({ model: 'm', prompt, max_tokens: 1 }) });
      assert.equal(r.statusCode, 200, await r.body.text());
    }
    await until(async () => (await indexGauges(url)).dropped > 0, 'the index evicted at its bound');
    const text = await (await request(`${url}/metrics`)).body.text();
    assert.match(text, /^ear_table_entries\{table="prefix_index"\} \d+$/m);
    assert.match(text, /^ear_table_dropped_total\{table="prefix_index"\} \d+$/m);
    const g = await indexGauges(url);
    assert.ok(g.entries <= 4096 && g.entries > 3000, `entries ${g.entries}`);
    assert.ok(g.dropped >= 5000 - 4096, `evicted ${g.dropped}`);
  } finally {
    await ear?.close();
    await sim.close();
    await getGlobalDispatcher().close();
  }
});

test('prefixIndexKeys out of its range, or too large for the region with the other tables, is refused with the settings named', async () => {
  assert.throws(() => buildConfig({ prefixIndexKeys: 100 }), /config prefixIndexKeys: must be an integer in \[4096, 3145728\]/);
  assert.throws(() => buildConfig({}, { prefixIndexKeys: '4194304' }), /config prefixIndexKeys: must be an integer in \[4096, 3145728\]/);
  await assert.rejects(startEar(buildConfig({ host: '127.0.0.1', port: 0, routeThreads: 1, prefixIndexKeys: 3 << 20, maxSessions: 1 << 22 })),
    (e: unknown) => e instanceof ConfigError && /config prefixIndexKeys, maxSessions, maxPods, routeThreads, httpThreads: 3145728 index keys, 4194304 sessions, 256 pod rows and \d+ scratch areas of 4 MiB \(for 1 route and 1 data-plane threads\) do not fit the shared region/.test((e as Error).message));
});
