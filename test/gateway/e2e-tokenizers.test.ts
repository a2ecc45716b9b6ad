// `ear serve` with a remote tokenizer (the engine's /tokenize) in front of `ear sim`: requests route on the
// engine's tokens, and when the tokenizer is unreachable they still route (character fallback), counted on /metrics.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { Agent, request } from 'undici';
import { fleet, type Fleet } from '../fixtures/fleet.js';
import { startSim, type SimServer } from '../../src/sim/server.js';

const client = new Agent({ connections: 8 });
let tokenizerSim: SimServer;
let good: Fleet;
let dead: Fleet;

before(async () => {
  tokenizerSim = await startSim({ host: '127.0.0.1', port: 0, tokenizer: 'hf:qwen3', servedModelName: ['m'], logger: pino({ level: 'silent' }) });
  const sim = { timeScale: 0.02, tokenizer: 'hf:qwen3', enablePromptTokensDetails: true, stopProbability: 0 };
  good = await fleet(1, sim, { tokenizer: `remote:${tokenizerSim.url}` });
  dead = await fleet(1, sim, { tokenizer: 'remote:http://127.0.0.1:9', remoteTokenizer: { retries: 0, timeoutMs: 200, breakerFailures: 1 } });
});
after(async () => {
  await good.close();
  await dead.close();
  await tokenizerSim.close();
  void client.destroy().catch(() => {});
});

async function chat (base: string, session: string, content: string): Promise<number> {
  const r = await request(`${base}/v1/chat/completions`, {
    dispatcher: client, method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'system', content: 'You are a coding agent. '.repeat(40) }, { role: 'user', content }], max_tokens: 4, ignore_eos: true })
  });
  await r.body.dump();
  return r.statusCode;
}

async function metric (base: string, name: string): Promise<number> {
  const r = await request(`${base}/metrics`, { dispatcher: client });
  const text = await r.body.text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  assert.ok(line !== undefined, `${name} is exported`);
  return Number(line.split(' ')[1]);
}

test('with the engine\'s /tokenize reachable, requests route and nothing falls back', async () => {
  assert.equal(await chat(good.base, 's', 'first'), 200);
  assert.equal(await chat(good.base, 's', 'second'), 200);
  assert.equal(await metric(good.base, 'ear_tokenizer_fallbacks_total'), 0);
  // Both went through a route thread, and the wait for it was observed once each.
  assert.equal(await metric(good.base, 'ear_queue_wait_seconds_count'), 2);
  assert.ok(await metric(good.base, 'ear_queue_wait_seconds_sum') >= 0);
});

test('with the tokenizer unreachable, requests still route on character tokens, and each is counted', async () => {
  assert.equal(await chat(dead.base, 's', 'first'), 200);
  assert.equal(await chat(dead.base, 's', 'second'), 200);
  assert.equal(await metric(dead.base, 'ear_tokenizer_fallbacks_total'), 2);
  assert.equal(await metric(dead.base, 'ear_route_pool_queue_full_total'), 0);
});
