// Prefix-aware routing through `ear serve` in front of real `ear sim` engines (approximate mode: the index
// learns from the gateway's own decisions).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, request } from 'undici';
import { fleet, type Fleet } from '../fixtures/fleet.js';
import { metric } from '../fixtures/processes.js';

let f: Fleet;
let base: string;
// One client for this file, destroyed at the end with its keep-alive sockets.
const client = new Agent({ connections: 32 });

before(async () => {
  f = await fleet(4, { timeScale: 0.02, tokenizer: 'hf:qwen3', enablePromptTokensDetails: true, stopProbability: 0 }, { policy: 'prefix-cache', tokenizer: 'hf:qwen3' });
  base = f.base;
});
after(async () => {
  await f.close();
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

test('a session\'s third turn walks the index from its hint, and /metrics counts the walks by where they start', async () => {
  const walks = async (): Promise<Record<string, number>> =>
    ({ block0: await metric(base, 'ear_prefix_walks_total', '{start="block0"}'), hint: await metric(base, 'ear_prefix_walks_total', '{start="hint"}') });
  const before = await walks();
  const msgs = [{ role: 'system', content: system('walks') }, { role: 'user', content: 'first task' }];
  const t1 = await chat('pw', msgs);
  const t2 = await chat('pw', [...msgs, { role: 'assistant', content: t1.text }, { role: 'user', content: 'go on' }]);
  await chat('pw', [...msgs, { role: 'assistant', content: t1.text }, { role: 'user', content: 'go on' }, { role: 'assistant', content: t2.text }, { role: 'user', content: 'and test it' }]);
  const after = await walks();
  assert.equal(after.block0 - before.block0, 2, 'the first two turns walk whole (the first learns nothing on an index without its blocks)');
  assert.equal(after.hint - before.hint, 1, 'the third starts from the blocks the second found');
  const text = await (await request(`${base}/metrics`, { dispatcher: client })).body.text();
  assert.match(text, /^ear_prefix_walks_total\{start="hint"\} \d+$/m);
  assert.match(text, /^ear_prefix_hints_after_loss_total \d+$/m);
});
