// Prefix-aware routing through `ear serve` in front of real `ear sim` engines (approximate mode: the index
// learns from the gateway's own decisions).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request } from 'undici';
import pino from 'pino';
import { buildConfig } from '../../src/gateway/config.js';
import { startEar, type Ear } from '../../src/gateway/ear.js';
import { startSim, type SimServer } from '../../src/sim/server.js';

let sims: SimServer[] = [];
let ear: Ear;
let base: string;
// One client for this file, destroyed at the end with its keep-alive sockets.
const client = new Agent({ connections: 32 });

before(async () => {
  sims = await Promise.all([0, 1, 2, 3].map((i) => startSim({
    host: '127.0.0.1', port: 0, profile: 'h100-llama-3.1-8b', timeScale: 0.02, tokenizer: 'hf:qwen3',
    servedModelName: ['m'], enablePromptTokensDetails: true, seed: i, stopProbability: 0, logger: pino({ level: 'silent' })
  })));
  ear = await startEar(buildConfig({ host: '127.0.0.1', port: 0, policy: 'prefix-cache', tokenizer: 'hf:qwen3', routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 0 },
    { backend: sims.map((s, i) => `${s.url},id=sim-${i}`) }));
  base = `http://127.0.0.1:${ear.gateway.port}`;
});
after(async () => {
  await ear.close();
  await Promise.all(sims.map((s) => s.close()));
  // destroy() tears the sockets down at once, but its promise has been seen never to settle after the gateway
  // closed (undici 7): not awaited, so teardown cannot hang on it.
  void client.destroy().catch(() => {});
});

async function chat (session: string, messages: Array<{ role: string; content: string }>) {
  const r = await request(`${base}/v1/chat/completions`, {
    dispatcher: client,
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({ model: 'm', messages, max_tokens: 8, ignore_eos: true })
  });
  assert.equal(r.statusCode, 200);
  const doc = (await r.body.json()) as { choices: Array<{ message: { content: string } }>; usage: { prompt_tokens_details: { cached_tokens: number } | null } };
  return { host: String(r.headers['x-ear-backend']), cached: doc.usage.prompt_tokens_details?.cached_tokens ?? 0, text: doc.choices[0].message.content };
}

const system = (tag: string) => `You are agent ${tag}. Follow the repository conventions carefully and explain every change. `.repeat(40);

test('two sessions sharing a long system prompt land where it is cached, and each later turn follows its prefix', async () => {
  const a = await chat('pa', [{ role: 'system', content: system('shared') }, { role: 'user', content: 'first task' }]);
  const b = await chat('pb', [{ role: 'system', content: system('shared') }, { role: 'user', content: 'a different task' }]);
  assert.equal(b.host, a.host);
  assert.ok(b.cached > 500, `second session cached ${b.cached}`);
  const turn2 = await chat('pa', [{ role: 'system', content: system('shared') }, { role: 'user', content: 'first task' }, { role: 'assistant', content: a.text }, { role: 'user', content: 'now test it' }]);
  assert.equal(turn2.host, a.host);
  assert.ok(turn2.cached > 500);
});

test('a hot prefix does not pull every request onto one engine', async () => {
  // Twenty concurrent requests all sharing one prefix: the imbalance guard must spread them.
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => request(`${base}/v1/chat/completions`, {
    dispatcher: client,
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': `hot-${i}` },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'system', content: system('hot') }, { role: 'user', content: `job ${i}` }], max_tokens: 400, ignore_eos: true })
  }).then(async (r) => { await r.body.dump(); return String(r.headers['x-ear-backend']); })));
  const counts = new Map<string, number>();
  for (const h of results) counts.set(h, (counts.get(h) ?? 0) + 1);
  assert.ok(counts.size >= 2, `all on ${[...counts.keys()]}`);
  assert.ok(Math.max(...counts.values()) < 20);
});
