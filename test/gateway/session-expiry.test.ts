// Session expiry on the gateway's upkeep timer: with no request arriving, the session table's count (what
// ear_table_entries{table="sessions"} reports) falls to the sessions still within their idle TTL, then to none.
// A table of 1,024 sessions is 2,048 slots: one tick's slice (SESSION_EXPIRY_BUDGET) sweeps all of it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { getGlobalDispatcher, request } from 'undici';
import pino from 'pino';
import { buildConfig } from '../../src/config/index.js';
import { withTestThreads } from '../fixtures/http-threads-env.js';
import { startEar, type Ear } from '../../src/gateway/ear.js';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { until } from '../fixtures/wait.js';

async function sessionsGauge (url: string): Promise<number> {
  const text = await (await request(`${url}/metrics`)).body.text();
  const line = text.split('\n').find((l) => l.startsWith('ear_table_entries{table="sessions"} '));
  assert.ok(line, 'the sessions gauge');
  return Number(line.split(' ')[1]);
}

test('idle sessions leave the table on the upkeep timer, with no request to sweep them', async () => {
  const sim: SimServer = await startSim({ host: '127.0.0.1', port: 0, timeScale: 0, tokenizer: 'character', servedModelName: ['m'], logger: pino({ level: 'silent' }) });
  let ear: Ear | null = null;
  try {
    ear = await startEar(buildConfig(
      withTestThreads({ host: '127.0.0.1', port: 0, tokenizer: 'character', routeThreads: 1, sessionIdleMs: 2000, maxSessions: 1024, healthIntervalMs: 60_000, metricsIntervalMs: 0 }),
      { backend: [`${sim.url},id=sim-0`] }
    ));
    const url = `http://127.0.0.1:${ear.gateway.port}`;
    const turn = async (session: string): Promise<void> => {
      const r = await request(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session }, body: JSON.stringify({ model: 'm', prompt: `hello from ${session}`, max_tokens: 1 }) });
      assert.equal(r.statusCode, 200, await r.body.text());
    };
    for (let i = 0; i < 6; i++) await turn(`early-${i}`);
    await new Promise((r) => setTimeout(r, 1000));
    for (let i = 0; i < 3; i++) await turn(`late-${i}`);
    assert.equal(await sessionsGauge(url), 9);
    // No request from here on: the early six go past their TTL a second before the late three (exactly 3 left can
    // only be the late ones), then those.
    await until(async () => await sessionsGauge(url) === 3, 'the early sessions expired, the late ones still live');
    await until(async () => await sessionsGauge(url) === 0, 'every session expired');
  } finally {
    await ear?.close();
    await sim.close();
    await getGlobalDispatcher().close();
  }
});
