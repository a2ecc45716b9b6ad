// The engine priority on the wire (issue 23 items 2 and 3): a backend that says it honours priorities gets the
// integer EAR's admission rank maps to, in its polarity; one that does not gets the client's bytes unchanged;
// a client's own `priority` never reaches an engine unless its API key may set it; x-ear-priority never does.
// The fake engine records what arrives, bytes and headers.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { request, getGlobalDispatcher } from 'undici';
import type { Ear } from '../../src/gateway/ear.js';
import { enginePriority, urgentEnginePriority } from '../../src/core/engine-priority.js';
import { fakeEngine, type FakeEngine } from '../fixtures/fake-engine.js';
import { earInFront } from '../fixtures/ear-in-front.js';

after(() => getGlobalDispatcher().close());

async function gateway (spec: string, over: Record<string, unknown> = {}): Promise<{ e: FakeEngine; ear: Ear; url: string }> {
  const e = await fakeEngine('m');
  const { ear, url } = await earInFront(e.url, spec, over);
  // After the gateway's own close (after hooks run in the order they were added).
  after(() => e.close());
  return { e, ear, url };
}

async function post (url: string, path: string, body: string, headers: Record<string, string> = {}): Promise<number> {
  const r = await request(`${url}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  await r.body.dump();
  return r.statusCode;
}

// Odd spacing and key order: anything EAR rewrote would show.
const CHAT = '{ "messages" : [ {"role":"user","content":"hi"} ],\n  "model":"m",  "max_tokens": 3 }';

test('default off: the engine gets the client\'s bytes, and no x-ear-priority header', async () => {
  const { e, url } = await gateway('');
  assert.equal(await post(url, '/v1/chat/completions', CHAT, { 'x-ear-priority': 'high', 'x-session-id': 's1' }), 200);
  assert.equal(e.raw.length, 1);
  assert.ok(e.raw[0].equals(Buffer.from(CHAT)), `forwarded ${e.raw[0].toString()}`);
  assert.equal(e.headers[0]['x-ear-priority'], undefined);
});

test('a client\'s own priority is dropped (default off too), and EAR\'s class goes to a vllm backend, lower first', async () => {
  const off = await gateway('');
  const jump = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], priority: -1_000_000 });
  assert.equal(await post(off.url, '/v1/chat/completions', jump), 200);
  assert.equal('priority' in off.e.received[0], false, 'a client priority reached an fcfs backend');

  const { e, url } = await gateway(',priority=vllm');
  for (const cls of ['high', 'normal', 'low']) {
    assert.equal(await post(url, '/v1/chat/completions', jump, { 'x-ear-priority': cls, 'x-session-id': `s-${cls}` }), 200);
  }
  assert.deepEqual(e.received.map((b) => b.priority), [0, 1, 2].map((c) => enginePriority('vllm', { classRank: c, order: 0 })));
  assert.deepEqual(e.received.map((b) => b.priority), [-64, 0, 64]);
  for (const h of e.headers) assert.equal(h['x-ear-priority'], undefined);
  // Nothing else of the body changed.
  const { priority: _p, ...rest } = e.received[0];
  assert.deepEqual(rest, { model: 'm', messages: [{ role: 'user', content: 'hi' }] });
});

test('sglang backends get the other polarity; sglang-low-first the vLLM one', async () => {
  const hi = await gateway(',priority=sglang');
  const lo = await gateway(',priority=sglang-low-first');
  for (const g of [hi, lo]) assert.equal(await post(g.url, '/v1/chat/completions', CHAT, { 'x-ear-priority': 'high' }), 200);
  assert.equal(hi.e.received[0].priority, 64);
  assert.equal(lo.e.received[0].priority, -64);
});

test('completions and responses carry it; Anthropic Messages does not (vLLM\'s protocol has no such field)', async () => {
  const { e, url } = await gateway(',priority=vllm');
  assert.equal(await post(url, '/v1/completions', JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 2 }), { 'x-ear-priority': 'low' }), 200);
  assert.equal(await post(url, '/v1/responses', JSON.stringify({ model: 'm', input: 'hi', store: false }), { 'x-ear-priority': 'low' }), 200);
  await post(url, '/v1/messages', JSON.stringify({ model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }], priority: 5 }), { 'x-ear-priority': 'low' });
  assert.deepEqual(e.paths, ['/v1/completions', '/v1/responses', '/v1/messages']);
  assert.equal(e.received[0].priority, 64);
  assert.equal(e.received[1].priority, 64);
  assert.equal('priority' in e.received[2], false, 'a Messages body carried a priority');
});

test('an API key in enginePriorityKeys sets the engine priority itself; any other key cannot', async () => {
  const { e, url } = await gateway(',priority=vllm', { apiKeys: ['trusted', 'other'], enginePriorityKeys: ['trusted'] });
  const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], priority: -7 });
  assert.equal(await post(url, '/v1/chat/completions', body, { authorization: 'Bearer trusted' }), 200);
  assert.equal(await post(url, '/v1/chat/completions', body, { authorization: 'Bearer other' }), 200);
  assert.deepEqual(e.received.map((b) => b.priority), [-7, 0]);
  assert.equal(await post(url, '/v1/chat/completions', JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], priority: 'first' }), { authorization: 'Bearer trusted' }), 400);
  assert.equal(e.received.length, 2);
});

test('a /v1/context prefill goes at the most urgent value', async () => {
  const { e, url } = await gateway(',priority=vllm', { policy: 'sticky' });
  const r = await request(`${url}/v1/context`, { method: 'POST', body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a shared prefix' }] }), headers: { 'content-type': 'application/json' } });
  const text = await r.body.text();
  assert.equal(r.statusCode < 300, true, text);
  assert.equal(e.received.at(-1)!.priority, urgentEnginePriority('vllm'));
  assert.equal(urgentEnginePriority('vllm'), -65);
});
