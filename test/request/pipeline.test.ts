// The request pipeline as `ear serve` runs it: the events it publishes (what metrics and spans subscribe to), in
// order, for a request served, one retried on another backend, and ones refused; and each status counted once.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { request, getGlobalDispatcher } from 'undici';
import { buildConfig } from '../../src/config/index.js';
import { startGateway } from '../../src/gateway/server.js';
import { channels } from '../../src/request/channels.js';
import type { RequestContext } from '../../src/request/context.js';
import { fakeEngine, type FakeEngine } from '../fixtures/fake-engine.js';
import { FirstServingRouting } from '../fixtures/simple-routing.js';
import { bodyFeatures } from '../fixtures/body-features.js';

after(() => getGlobalDispatcher().close());

const features = bodyFeatures;

async function gateway (engines: FakeEngine[]) {
  let routing!: FirstServingRouting;
  const gw = await startGateway({
    config: buildConfig({ host: '127.0.0.1', port: 0, healthIntervalMs: 60000, metricsIntervalMs: 0 }, { backend: engines.map((e, i) => `${e.url},id=e${i}`) }),
    state: (bs) => (routing = new FirstServingRouting(bs)),
    features
  });
  after(() => gw.close());
  return { gw, routing, url: `http://127.0.0.1:${gw.port}` };
}

/** Every event of every request, by request id: the channel's name and what it said that matters here. */
function record (): Map<string, string[]> {
  const seen = new Map<string, string[]>();
  for (const [name, ch] of Object.entries(channels)) {
    const fn = (m: unknown): void => {
      const msg = m as { ctx: RequestContext; attempt?: number; backend?: { id: string }; result?: { result: { kind: string } } };
      const list = seen.get(msg.ctx.id) ?? [];
      seen.set(msg.ctx.id, list);
      let what = name;
      if (name === 'routed' || name === 'send') what += `:${msg.attempt}`;
      if (name === 'sent') what += `:${msg.backend!.id}:${msg.result!.result.kind}`;
      if (name === 'done') what += `:${msg.ctx.outcome.status}`;
      list.push(what);
    };
    ch.subscribe(fn);
    after(() => ch.unsubscribe(fn));
  }
  return seen;
}

const chat = (stream: boolean, model = 'm') => JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], stream });

async function post (url: string, body: string, id: string): Promise<number> {
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body, headers: { 'x-request-id': id } });
  await r.body.text();
  return r.statusCode;
}

test('a request served goes through every phase once, in order, and ends once', async () => {
  const e = await fakeEngine();
  after(() => e.close());
  const { url } = await gateway([e]);
  const seen = record();
  assert.equal(await post(url, chat(true), 'r-stream'), 200);
  assert.deepEqual(seen.get('r-stream'), ['start', 'features', 'admitted', 'routed:0', 'send:0', 'firstToken', 'sent:e0:done', 'done:200']);
  assert.equal(await post(url, chat(false), 'r-json'), 200);
  // A buffered answer shows its first token with the whole body.
  assert.deepEqual(seen.get('r-json'), ['start', 'features', 'admitted', 'routed:0', 'send:0', 'firstToken', 'sent:e0:done', 'done:200']);
});

test('an attempt that fails before its first byte is retried on the next backend, inside the one pipeline', async () => {
  const bad = await fakeEngine('m', 'status500');
  const good = await fakeEngine();
  after(() => bad.close());
  after(() => good.close());
  const { url, routing } = await gateway([bad, good]);
  const seen = record();
  assert.equal(await post(url, chat(true), 'r-retry'), 200);
  assert.deepEqual(seen.get('r-retry'), ['start', 'features', 'admitted', 'routed:0', 'send:0', 'sent:e0:retryable', 'routed:1', 'send:1', 'firstToken', 'sent:e1:done', 'done:200']);
  // Both placements ended: the failed one unserved, the retry served.
  assert.equal(routing.inFlight.get(0), 0);
  assert.equal(routing.inFlight.get(1), 0);
  assert.equal(routing.finishedFailed, 1);
  assert.equal(routing.finishedOk, 1);
});

test('refusals end with an error event and their status, counted once in ear_requests_total', async () => {
  const down = await fakeEngine('m', 'die-before');
  after(() => down.close());
  const { url, gw } = await gateway([down]);
  const seen = record();
  const errors: unknown[] = [];
  const onError = (m: unknown): void => { errors.push((m as { error: unknown }).error); };
  diagnostics.subscribe('ear:request:error', onError);
  after(() => diagnostics.unsubscribe('ear:request:error', onError));
  assert.equal(await post(url, chat(false, 'nope'), 'r-404'), 404);
  assert.deepEqual(seen.get('r-404'), ['start', 'features', 'error', 'done:404']);
  assert.equal(await post(url, '{"model":', 'r-400'), 400);
  assert.deepEqual(seen.get('r-400'), ['start', 'error', 'done:400']);
  // The only backend drops the connection: retryable, no other backend, so the client gets 502.
  assert.equal(await post(url, chat(false), 'r-502'), 502);
  assert.deepEqual(seen.get('r-502'), ['start', 'features', 'admitted', 'routed:0', 'send:0', 'sent:e0:retryable', 'error', 'done:502']);
  assert.equal(errors.length, 3);
  const text = await gw.metrics.text();
  for (const status of ['404', '400', '502']) {
    assert.match(text, new RegExp(`ear_requests_total\\{route="/v1/chat/completions",status="${status}",backend=""\\} 1\\n`), status);
  }
});
