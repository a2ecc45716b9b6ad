// Every refusal at the uWS door is counted once in ear_requests_total, with its status and route, as
// docs/metrics.md promises (issue 30): a body that is not JSON (400), a bad x-ear-priority (400), a wrong key
// (401), a body too large by its Content-Length and by its bytes (413), an unknown content-encoding (415), a
// rate-limited key (429), and a request that arrives while the gateway drains (503). `ear serve` (in this process,
// so its registry is read after its port has closed) in front of two `ear sim` engines.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Readable } from 'node:stream';
import { Client, request } from 'undici';
import { fleet, type Fleet } from '../fixtures/fleet.js';

let f: Fleet;

before(async () => {
  f = await fleet(2, { timeScale: 0.5 }, {
    apiKeys: ['sk-good', 'sk-slow'], maxBodyBytes: 4096,
    rateLimits: { keys: { 'sk-slow': { requestsPerSecond: 0.001, burst: 1 } } }
  });
});
after(async () => { await f?.close(); });

/** ear_requests_total's value for (route, status) with no backend (a refusal EAR answered). */
async function counted (route: string, status: number): Promise<number> {
  const m = await f.ear.gateway.metrics.registry.getSingleMetric('ear_requests_total')!.get();
  return m.values.filter((v) => v.labels.route === route && v.labels.status === String(status) && v.labels.backend === '').reduce((s, v) => s + v.value, 0);
}

/** Every count of the route with no backend, by status. */
async function refusals (route: string): Promise<Record<string, number>> {
  const m = await f.ear.gateway.metrics.registry.getSingleMetric('ear_requests_total')!.get();
  const out: Record<string, number> = {};
  for (const v of m.values) if (v.labels.route === route && v.labels.backend === '' && v.value > 0) out[String(v.labels.status)] = v.value;
  return out;
}

const chat = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });

async function post (path: string, body: string | Buffer, headers: Record<string, string>): Promise<number> {
  const r = await request(`${f.base}${path}`, { method: 'POST', body, headers: { 'content-type': 'application/json', ...headers } });
  await r.body.dump();
  return r.statusCode;
}

test('400, 401, 413, 415 and 429 at the door are each counted once, with their route', async () => {
  const good = { authorization: 'Bearer sk-good' };
  assert.equal(await post('/v1/chat/completions', '{"model": "m", "messages": [', good), 400);
  assert.equal(await counted('/v1/chat/completions', 400), 1);
  assert.equal(await post('/v1/chat/completions', chat, { ...good, 'x-ear-priority': 'urgent' }), 400);
  assert.equal(await counted('/v1/chat/completions', 400), 2);
  assert.equal(await post('/v1/chat/completions', chat, { authorization: 'Bearer sk-wrong' }), 401);
  assert.equal(await post('/v1/messages', chat, { 'x-api-key': 'sk-wrong' }), 401);
  // Declared too large (refused from the header), then sent too large in a stream of chunks (no Content-Length).
  assert.equal(await post('/v1/chat/completions', Buffer.alloc(8192, 'x'), good), 413);
  const chunks = async function * (): AsyncGenerator<Buffer> { for (let i = 0; i < 4; i++) yield Buffer.alloc(2048, 'y'); };
  const big = await request(`${f.base}/v1/completions`, { method: 'POST', body: Readable.from(chunks()), headers: { 'content-type': 'application/json', ...good } });
  await big.body.dump();
  assert.equal(big.statusCode, 413);
  assert.equal(await post('/v1/responses', chat, { ...good, 'content-encoding': 'snappy' }), 415);
  assert.equal(await post('/v1/chat/completions', chat, { authorization: 'Bearer sk-slow' }), 200);
  assert.equal(await post('/v1/chat/completions', chat, { authorization: 'Bearer sk-slow' }), 429);
  assert.deepEqual(await refusals('/v1/chat/completions'), { 400: 2, 401: 1, 413: 1, 429: 1 });
  assert.deepEqual(await refusals('/v1/messages'), { 401: 1 });
  assert.deepEqual(await refusals('/v1/completions'), { 413: 1 });
  assert.deepEqual(await refusals('/v1/responses'), { 415: 1 });
});

// Last: it closes the gateway.
test('503 to a request that arrives while the gateway drains is counted once', async () => {
  // A connection opened before the drain: the listen socket closes, this one still carries a request.
  const late = new Client(f.base);
  const h = await late.request({ method: 'GET', path: '/health' });
  await h.body.dump();
  // A streamed request in flight keeps the drain waiting.
  const running = await request(`${f.base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-good' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a long answer' }], max_tokens: 200, stream: true })
  });
  assert.equal(running.statusCode, 200);
  const reader = running.body[Symbol.asyncIterator]();
  await reader.next();
  const closed = f.ear.gateway.close();
  const r = await late.request({ method: 'POST', path: '/v1/chat/completions', body: chat, headers: { 'content-type': 'application/json', authorization: 'Bearer sk-good' } });
  const text = await r.body.text();
  assert.equal(r.statusCode, 503, text);
  assert.match(text, /EAR_ERR_DRAINING/);
  for (let c = await reader.next(); c.done !== true; c = await reader.next());
  await closed;
  await late.close();
  assert.equal(await counted('/v1/chat/completions', 503), 1);
  assert.equal((await refusals('/v1/chat/completions'))['200'], undefined);
});
