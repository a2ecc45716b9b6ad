import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { request, getGlobalDispatcher } from 'undici';
import { connect } from 'node:net';
import { buildConfig } from '../../src/config/index.js';
import { startGateway } from '../../src/gateway/server.js';
import { BIG_STREAM_EVENTS, fakeEngine, type FakeEngine } from '../fixtures/fake-engine.js';
import { FirstServingRouting } from '../fixtures/simple-routing.js';
import { until } from '../fixtures/wait.js';
import { bodyFeatures } from '../fixtures/body-features.js';
import { wholeAnswer } from '../fixtures/raw-answer.js';

const features = bodyFeatures;

async function gateway (engines: FakeEngine[], over: Record<string, unknown> = {}) {
  let routing!: FirstServingRouting;
  const gw = await startGateway({
    config: buildConfig({ host: '127.0.0.1', port: 0, healthIntervalMs: 60000, metricsIntervalMs: 0, adminToken: 'admintok', ...over }, { backend: engines.map((e, i) => `${e.url},id=e${i}`) }),
    state: (bs) => (routing = new FirstServingRouting(bs)),
    features
  });
  after(() => gw.close());
  return { gw, routing, url: `http://127.0.0.1:${gw.port}` };
}

after(() => getGlobalDispatcher().close());

const chat = (stream = false, extra: Record<string, unknown> = {}) => JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream, ...extra });

test('non-streaming and streaming completions pass through with x-ear-backend and x-request-id', async () => {
  const e = await fakeEngine();
  after(() => e.close());
  const { url, routing } = await gateway([e]);
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(), headers: { 'x-request-id': 'abc-1' } });
  assert.equal(r.statusCode, 200);
  assert.equal(r.headers['x-ear-backend'], 'e0');
  assert.equal(r.headers['x-request-id'], 'abc-1');
  assert.equal(((await r.body.json()) as any).choices[0].message.content, 'hello');
  const s = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(true) });
  assert.match(String(s.headers['content-type']), /text\/event-stream/);
  const text = await s.body.text();
  assert.ok(text.endsWith('data: [DONE]\n\n'));
  assert.equal(text.split('data: ').length - 1, 5);
  assert.equal(routing.firstTokens, 2);
  assert.equal(routing.inFlight.get(0), 0);
});

test('bad requests get OpenAI-style errors with the right status', async () => {
  const e = await fakeEngine();
  after(() => e.close());
  const { url } = await gateway([e], { maxBodyBytes: 2048 });
  const cases: Array<[string, string, string, number, string]> = [
    ['POST', '/v1/chat/completions', '{"model":', 400, 'EAR_ERR_BAD_JSON'],
    ['POST', '/v1/chat/completions', chat(false, { model: 'nope' }), 404, 'EAR_ERR_MODEL_NOT_FOUND'],
    ['POST', '/v1/chat/completions', chat(false, { pad: 'x'.repeat(4096) }), 413, 'EAR_ERR_BODY_TOO_LARGE'],
    ['GET', '/v1/chat/completions', '', 405, 'EAR_ERR_METHOD'],
    ['GET', '/nowhere', '', 404, 'EAR_ERR_NOT_FOUND'],
    ['GET', '/admin/backends', '', 401, 'EAR_ERR_UNAUTHORIZED']
  ];
  for (const [method, path, body, status, code] of cases) {
    const r = await request(`${url}${path}`, { method: method as 'GET', body: method === 'GET' ? undefined : body });
    assert.equal(r.statusCode, status, `${method} ${path}`);
    const doc = (await r.body.json()) as { error: { message: string; type: string; code: string } };
    assert.equal(doc.error.code, code);
    assert.equal(typeof doc.error.message, 'string');
  }
  const admin = await request(`${url}/admin/backends`, { headers: { authorization: 'Bearer admintok' } });
  assert.equal(((await admin.body.json()) as any).backends[0].id, 'e0');
});

test('a header value with a bare CR is refused and the gateway keeps serving', async () => {
  const e = await fakeEngine();
  after(() => e.close());
  const { gw, url } = await gateway([e]);
  const reply = await new Promise<string>((resolve) => {
    const s = connect(gw.port, '127.0.0.1', () => {
      s.write('POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-session-id: a\rb\r\ncontent-length: 2\r\n\r\n{}');
    });
    let out = '';
    s.on('data', (d) => { out += d; });
    s.on('close', () => resolve(out));
    s.on('error', () => resolve(out));
    setTimeout(() => s.destroy(), 500);
  });
  assert.doesNotMatch(reply, /^HTTP\/1\.1 200/);
  const ok = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat() });
  assert.equal(ok.statusCode, 200);
  await ok.body.dump();
});

// uWebSockets.js's parser (the pinned build) refuses a Content-Length of ten digits or more (≥ 10^9) itself, before
// any handler runs: it closes the connection without a response. Below that the gateway answers 413 from the header.
test('a body declared over the limit is answered 413 from the header alone (999,999,999 bytes, and 40 MB with a few bytes sent)', async () => {
  const e = await fakeEngine();
  after(() => e.close());
  const { url, gw } = await gateway([e]);
  /** What send answers when the gateway neither answered nor closed the connection. */
  const NO_ANSWER = '(no answer, and the connection stayed open)';
  // Resolves with what came once a whole answer came (its head and the Content-Length it declares) or the
  // connection closed. The answer says `connection: close` and uWS keeps reading until the client goes (a client
  // still sending its body must not be reset before it reads the 413): this client goes once it has the answer.
  const send = (path: string, declared: string): Promise<string> => new Promise<string>((resolve) => {
    const s = connect(gw.port, '127.0.0.1', () => {
      s.write(`POST ${path} HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: ${declared}\r\n\r\n{"model":`);
    });
    let got = Buffer.alloc(0);
    const finish = (what: string): void => {
      clearTimeout(timer);
      s.destroy();
      resolve(what);
    };
    s.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      if (wholeAnswer(got)) finish(got.toString());
    });
    s.on('close', () => finish(got.toString()));
    s.on('error', () => finish(got.toString()));
    // No more bytes come: the answer must not wait for them. Only a gateway that waits for them meets this timer.
    const timer = setTimeout(() => finish(got.length === 0 ? NO_ANSWER : got.toString()), 20_000);
  });
  for (const [path, declared] of [['/v1/chat/completions', '999999999'], ['/v1/chat/completions', String(40 << 20)], ['/v1/context', String(40 << 20)]]) {
    const reply = await send(path, declared);
    assert.match(reply, /^HTTP\/1\.1 413 /, `${path} with content-length ${declared}: ${reply.slice(0, 80)}`);
    assert.match(reply, /\r\nconnection: close\r\n/i, 'the client is told the connection ends: the rest of its body will not be read as a request');
    assert.match(reply, /"code":"EAR_ERR_BODY_TOO_LARGE"/);
  }
  assert.equal(await send('/v1/chat/completions', '1073741824'), '', 'uWS closes at once (no response, no hang)');
  const ok = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat() });
  assert.equal(ok.statusCode, 200);
  await ok.body.dump();
});

test('a backend whose connection queue is full is busy, not failed: the request goes to another backend, or gets 503 with Retry-After', async () => {
  const slow = await fakeEngine('m', 'hang-stream');
  const fine = await fakeEngine();
  after(() => Promise.all([slow.close(), fine.close()]));
  const ac = new AbortController();
  after(() => ac.abort());
  const hold = async ({ url, gw }: Awaited<ReturnType<typeof gateway>>): Promise<void> => {
    // One request holds e0's only connection (a stream that never ends), one waits in its queue.
    const first = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(true), signal: ac.signal });
    first.body.on('data', () => {}).on('error', () => {});
    void request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(true), signal: ac.signal }).catch(() => {});
    await until(() => gw.backends[0].pool.queued === 1, 'a request waiting in e0\'s connection queue');
  };
  const two = await gateway([slow, fine], { connectionsPerBackend: 1, upstreamMaxQueued: 1 });
  await hold(two);
  const r = await request(`${two.url}/v1/chat/completions`, { method: 'POST', body: chat() });
  assert.equal(r.statusCode, 200);
  assert.equal(r.headers['x-ear-backend'], 'e1');
  await r.body.dump();
  const m = await (await request(`${two.url}/metrics`)).body.text();
  assert.match(m, /ear_upstream_busy_total\{backend="e0"\} 1/);
  assert.doesNotMatch(m, /ear_upstream_errors_total\{backend="e0"/, 'no error is counted against a busy backend');

  const one = await gateway([slow], { connectionsPerBackend: 1, upstreamMaxQueued: 1 });
  await hold(one);
  const busy = await request(`${one.url}/v1/chat/completions`, { method: 'POST', body: chat() });
  assert.equal(busy.statusCode, 503);
  assert.equal(busy.headers['retry-after'], '1');
  assert.equal(((await busy.body.json()) as { error: { code: string } }).error.code, 'EAR_ERR_OVERLOADED');
});

test('a backend that fails before the first byte is retried on the next; after the first byte, with no other engine, the stream ends with an error event', async () => {
  const dead = await fakeEngine('m', 'die-before');
  const bad = await fakeEngine('m', 'status500');
  const good = await fakeEngine();
  after(() => Promise.all([dead.close(), bad.close(), good.close()]));
  const { url, gw } = await gateway([dead, bad, good]);
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(true) });
  assert.equal(r.statusCode, 200);
  assert.equal(r.headers['x-ear-backend'], 'e2');
  await r.body.dump();
  assert.match(await gw.metrics.text(), /ear_upstream_retries_total 2/);

  const mid = await fakeEngine('m', 'die-after-first');
  after(() => mid.close());
  const g2 = await gateway([mid]);
  const s = await request(`${g2.url}/v1/chat/completions`, { method: 'POST', body: chat(true) });
  const text = await s.body.text();
  assert.match(text, /"content":"hel"/);
  // A lone engine: no other to resume on (test/gateway/stream-resume*.test.ts).
  assert.match(text, /data: \{"error":\{"message":"upstream connection failed mid-response; not resumed: no other engine serves the model","type":"upstream_error","code":"EAR_ERR_UPSTREAM"\}\}\n\ndata: \[DONE\]\n\n$/);
  mid.mode = 'ok';
  const again = await request(`${g2.url}/v1/chat/completions`, { method: 'POST', body: chat() });
  assert.equal(again.statusCode, 200);
  await again.body.dump();
});

test('a lone failing backend\'s 5xx is passed on, a dead one is a 502, none healthy a 503', async () => {
  const bad = await fakeEngine('m', 'status500');
  after(() => bad.close());
  const { url } = await gateway([bad], { maxAttempts: 2 });
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat() });
  // the last attempt forwards the engine's own 5xx rather than hiding it
  assert.equal(r.statusCode, 500);
  await r.body.dump();
  const dead = await fakeEngine('m', 'die-before');
  after(() => dead.close());
  const g = await gateway([dead], { maxAttempts: 1 });
  const d = await request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chat() });
  assert.equal(d.statusCode, 502);
  assert.equal(((await d.body.json()) as any).error.code, 'EAR_ERR_UPSTREAM');
  await dead.close();
  await g.gw.checkHealth();
  await g.gw.checkHealth();
  const n = await request(`${g.url}/v1/chat/completions`, { method: 'POST', body: chat() });
  assert.equal(n.statusCode, 503);
  assert.equal(((await n.body.json()) as any).error.code, 'EAR_ERR_NO_BACKEND');
});

test('a client abort mid-stream aborts the upstream request', async () => {
  const e = await fakeEngine('m', 'hang-stream');
  after(() => e.close());
  const { url, routing } = await gateway([e]);
  const ac = new AbortController();
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(true), signal: ac.signal });
  for await (const _ of r.body) { ac.abort(); break; }
  await until(() => e.closedEarly > 0, 'the upstream request to close');
  assert.equal(e.closedEarly, 1);
  await until(() => routing.inFlight.get(0) === 0, 'nothing in flight');
});

test('a stream larger than the socket buffers reaches a slow client whole: the upstream is paused, then resumed', async () => {
  const e = await fakeEngine('m', 'big-stream');
  after(() => e.close());
  const { url, routing } = await gateway([e]);
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(true) });
  assert.equal(r.statusCode, 200);
  // The client reads nothing until the engine has had to wait: everything in between is held by sockets or the gateway.
  await until(() => e.drainWaits > 0, 'the engine to wait for a drain');
  const text = await r.body.text();
  assert.equal(text.split('\n\n').filter((x) => x.includes('"content":"xxx')).length, BIG_STREAM_EVENTS);
  assert.ok(text.endsWith('data: [DONE]\n\n'));
  assert.equal(routing.inFlight.get(0), 0);
});

test('a client that aborts while the upstream is paused for it ends the upstream request too', async () => {
  const e = await fakeEngine('m', 'big-stream');
  after(() => e.close());
  const { url, routing } = await gateway([e]);
  const ac = new AbortController();
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(true), signal: ac.signal });
  await until(() => e.drainWaits > 0, 'the engine to wait for a drain');
  ac.abort();
  await r.body.dump().catch(() => {});
  await until(() => e.closedEarly > 0, 'the upstream request to close');
  assert.equal(e.closedEarly, 1);
  await until(() => routing.inFlight.get(0) === 0, 'nothing in flight');
});
