// Every refusal at the uWS door is counted once in ear_requests_total, with its status and route, as
// docs/metrics.md promises (issue 30): a body that is not JSON (400), a bad x-ear-priority (400), a wrong key
// (401), a body too large by its Content-Length and by its bytes (413), an unknown content-encoding (415), a
// rate-limited key (429), and a request that arrives while the gateway drains (503). `ear serve` (in this process)
// in front of two `ear sim` engines; the counts are read off /metrics as scraped, which sums the data-plane
// threads' counts when the gateway runs several (EAR_TEST_HTTP_THREADS).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { Readable } from 'node:stream';
import { Client, request, type Dispatcher } from 'undici';
import { fleet, type Fleet } from '../fixtures/fleet.js';
import { until } from '../fixtures/wait.js';

let f: Fleet;

before(async () => {
  f = await fleet(2, { timeScale: 0.5 }, {
    apiKeys: ['sk-good', 'sk-slow'], maxBodyBytes: 4096,
    rateLimits: { keys: { 'sk-slow': { requestsPerSecond: 0.001, burst: 1 } } }
  });
});
after(async () => { await f?.close(); });

interface Series { labels: Record<string, string>; value: number }

/** ear_requests_total's series on the gateway's /metrics (over `via`: a connection opened before a drain). */
async function requestsTotal (via?: Dispatcher): Promise<Series[]> {
  const r = await request(`${f.base}/metrics`, via === undefined ? {} : { dispatcher: via });
  const text = await r.body.text();
  assert.equal(r.statusCode, 200, text);
  const out: Series[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith('ear_requests_total{')) continue;
    const labels: Record<string, string> = {};
    for (const m of line.slice(0, line.lastIndexOf('}')).matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[m[1]] = m[2];
    out.push({ labels, value: Number(line.slice(line.lastIndexOf(' ') + 1)) });
  }
  return out;
}

/** ear_requests_total's value for (route, status) with no backend (a refusal EAR answered). */
async function counted (route: string, status: number, via?: Dispatcher): Promise<number> {
  return (await requestsTotal(via)).filter((v) => v.labels.route === route && v.labels.status === String(status) && v.labels.backend === '').reduce((s, v) => s + v.value, 0);
}

/** Every count of the route with no backend, by status. */
async function refusals (route: string, via?: Dispatcher): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const v of await requestsTotal(via)) if (v.labels.route === route && v.labels.backend === '' && v.value > 0) out[v.labels.status] = v.value;
  return out;
}

/** Answered requests of the route that a backend served (any status). */
async function served (route: string, via?: Dispatcher): Promise<number> {
  return (await requestsTotal(via)).filter((v) => v.labels.route === route && v.labels.backend !== '').reduce((s, v) => s + v.value, 0);
}

/** Whether a new connection to the gateway's port is refused (every listener closed: the drain reached every thread). */
function refused (): Promise<boolean> {
  const { hostname, port } = new URL(f.base);
  return new Promise((resolve) => {
    const s = connect(Number(port), hostname);
    s.once('connect', () => { s.destroy(); resolve(false); });
    s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code === 'ECONNREFUSED'));
  });
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
  // A connection opened before the drain: the listen socket closes, this one still carries requests (the 503,
  // then the scrapes: the data-plane threads' counts are gone once the gateway has closed).
  const late = new Client(f.base);
  const h = await late.request({ method: 'GET', path: '/health' });
  await h.body.dump();
  const stream = (maxTokens: number): Promise<Dispatcher.ResponseData> => request(`${f.base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-good' },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'a long answer' }], max_tokens: maxTokens, stream: true })
  });
  // Two streamed requests in flight keep the drain waiting: one ends during it, the other holds it open (until
  // its client leaves) while the counts are read.
  const servedBefore = await served('/v1/chat/completions');
  const [running, holder] = await Promise.all([stream(200), stream(20_000)]);
  assert.equal(running.statusCode, 200);
  assert.equal(holder.statusCode, 200);
  const reader = running.body[Symbol.asyncIterator]();
  await reader.next();
  const held = holder.body[Symbol.asyncIterator]();
  await held.next();
  const closed = f.ear.gateway.close();
  // Every listener closed: each thread that serves the port has heard of the drain.
  await until(refused, 'the gateway\'s port closed');
  const r = await late.request({ method: 'POST', path: '/v1/chat/completions', body: chat, headers: { 'content-type': 'application/json', authorization: 'Bearer sk-good' } });
  const text = await r.body.text();
  assert.equal(r.statusCode, 503, text);
  assert.match(text, /EAR_ERR_DRAINING/);
  assert.equal(await counted('/v1/chat/completions', 503, late), 1);
  for (let c = await reader.next(); c.done !== true; c = await reader.next());
  // The stream that ended during the drain is counted with its backend, not as a refusal.
  await until(async () => await served('/v1/chat/completions', late) === servedBefore + 1, 'the drained stream counted');
  assert.equal(await counted('/v1/chat/completions', 503, late), 1);
  assert.equal((await refusals('/v1/chat/completions', late))['200'], undefined);
  holder.body.destroy();
  await closed;
  await late.close();
});
