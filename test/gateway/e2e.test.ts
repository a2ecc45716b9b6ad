// The gateway in front of real `ear sim` servers on loopback (in this process), driven by the openai client.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { request, getGlobalDispatcher } from 'undici';
import type { Ear } from '../../src/gateway/ear.js';
import type { SimServer } from '../../src/sim/server.js';
import { fleet, type Fleet } from '../fixtures/fleet.js';
import { until } from '../fixtures/wait.js';

let f: Fleet;
let sims: SimServer[];
let ear: Ear;
let base: string;

before(async () => {
  f = await fleet(3, { timeScale: 0.02, tokenizer: 'hf:qwen3', enablePromptTokensDetails: true }, { policy: 'sticky', tokenizer: 'hf:qwen3', adminToken: 't' });
  ({ sims, ear, base } = f);
});
after(async () => {
  await f.close();
  await getGlobalDispatcher().close();
});

const system = 'You are a careful coding agent working in a large repository. '.repeat(30);

test('the openai client works through the gateway, streaming and not, chat and token-id completions', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none' });
  const r = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8 });
  assert.equal(r.object, 'chat.completion');
  assert.ok(r.usage && r.usage.completion_tokens > 0);
  const stream = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hello' }], max_tokens: 8, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let usage = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    if (chunk.usage) usage = chunk.usage;
  }
  assert.ok(text.length > 0);
  assert.ok(usage && usage.completion_tokens > 0);
  const c = await client.completions.create({ model: 'm', prompt: Array.from({ length: 64 }, (_, i) => 1000 + i) as unknown as string, max_tokens: 4 });
  assert.equal(c.object, 'text_completion');
});

test('under sticky a session stays on its engine, whose prefix cache then serves most of each new turn', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'none', defaultHeaders: { 'x-session-id': 'agent-42' } });
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: 'system', content: system }, { role: 'user', content: 'list the files' }];
  const hosts = new Set<string>();
  let lastCached = 0;
  for (let turn = 0; turn < 3; turn++) {
    const { data, response } = await client.chat.completions.create({ model: 'm', messages, max_tokens: 16 }).withResponse();
    hosts.add(response.headers.get('x-ear-backend') ?? '');
    lastCached = data.usage?.prompt_tokens_details?.cached_tokens ?? 0;
    messages.push({ role: 'assistant', content: data.choices[0].message.content ?? '' }, { role: 'user', content: `tool result ${turn}: ok` });
  }
  assert.equal(hosts.size, 1, `turns went to ${[...hosts]}`);
  assert.ok(lastCached > 300, `cached ${lastCached}`);
  const admin = await request(`${base}/admin/sessions/agent-42`, { headers: { authorization: 'Bearer t' } });
  const s = (await admin.body.json()) as { host: string; inFlight: number; contextTokens: number };
  assert.equal(s.host, [...hosts][0]);
  assert.equal(s.inFlight, 0);
  assert.ok(s.contextTokens > 300);
});

test('a client abort mid-stream ends the request on the engine', async () => {
  const ac = new AbortController();
  const r = await request(`${base}/v1/chat/completions`, {
    method: 'POST', signal: ac.signal, headers: { 'content-type': 'application/json', 'x-session-id': 'abort-me' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'write a novel' }], max_tokens: 4000, ignore_eos: true, stream: true })
  });
  const host = String(r.headers['x-ear-backend']);
  const sim = sims[Number(host.split('-')[1])];
  for await (const _ of r.body) break;
  assert.equal(sim.engine.stats().running, 1);
  ac.abort();
  await until(() => sim.engine.stats().running + sim.engine.stats().waiting === 0, 'the engine to drop the aborted request');
});

test('unknown model is 404; malformed JSON 400; with every engine down, 503', async () => {
  const bad = await request(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }) });
  assert.equal(bad.statusCode, 404);
  assert.equal(((await bad.body.json()) as any).error.code, 'EAR_ERR_MODEL_NOT_FOUND');
  const junk = await request(`${base}/v1/completions`, { method: 'POST', body: '{"model": "m", "prompt": ' });
  assert.equal(junk.statusCode, 400);
  await junk.body.dump();
  await Promise.all(sims.map((s) => s.close()));
  await ear.gateway.checkHealth();
  await ear.gateway.checkHealth();
  const none = await request(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }) });
  assert.equal(none.statusCode, 503);
  assert.equal(((await none.body.json()) as any).error.type, 'service_unavailable');
  const ready = await request(`${base}/ready`);
  assert.equal(ready.statusCode, 503);
  await ready.body.dump();
});
