// The ways a stream is cut after its first byte (reset, a stall past upstreamBodyTimeoutMs, the body ending before
// its last event) and the ones that are not resumed (a tool call's arguments, maxResumes, no other engine), with
// fake engines whose bodies can be read: the continuation is what vLLM takes (docs/resume.md).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { request, getGlobalDispatcher } from 'undici';
import { buildConfig } from '../../src/config/index.js';
import { startGateway } from '../../src/gateway/server.js';
import { fakeEngine, type FakeEngine, type Mode } from '../fixtures/fake-engine.js';
import { FirstServingRouting } from '../fixtures/simple-routing.js';
import { bodyFeatures } from '../fixtures/body-features.js';

const features = bodyFeatures;

async function gateway (engines: FakeEngine[], over: Record<string, unknown> = {}) {
  const gw = await startGateway({
    config: buildConfig({ host: '127.0.0.1', port: 0, healthIntervalMs: 60000, metricsIntervalMs: 0, ...over }, { backend: engines.map((e, i) => `${e.url},id=e${i}`) }),
    state: (bs) => new FirstServingRouting(bs),
    features
  });
  after(() => gw.close());
  return { gw, url: `http://127.0.0.1:${gw.port}` };
}

after(() => getGlobalDispatcher().close());

const chat = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, max_tokens: 10 });

/** Two engines: e0 fails in `mode`, e1 answers; the client's stream, e1's requests and the gateway's metrics. */
async function cut (mode: Mode, over: Record<string, unknown> = {}) {
  const first = await fakeEngine('m', mode);
  const second = await fakeEngine('m', 'ok');
  after(() => Promise.all([first.close(), second.close()]));
  const { url, gw } = await gateway([first, second], over);
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat });
  assert.equal(r.statusCode, 200);
  assert.equal(r.headers['x-ear-backend'], 'e0');
  return { text: await r.body.text(), second, metrics: await gw.metrics.text() };
}

/** The chunks' data (not [DONE]) as objects. */
const chunks = (text: string): any[] => text.split('\n\n').filter((e) => e.startsWith('data: {')).map((e) => JSON.parse(e.slice(6)));

function assertResumed (text: string, second: FakeEngine, metrics: string): void {
  // vLLM's continuation: the text so far as the final assistant message, continued; max_tokens less what was sent.
  assert.equal(second.received.length, 1);
  const body = second.received[0];
  assert.deepEqual(body.messages, [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hel' }]);
  assert.equal(body.continue_final_message, true);
  assert.equal(body.add_generation_prompt, false);
  assert.equal(body.max_tokens, 9);
  const cs = chunks(text);
  assert.deepEqual(cs.map((c) => c.choices[0]?.delta?.content ?? null), ['', 'hel', 'hel', 'lo', null]);
  assert.equal(cs.filter((c) => c.choices[0]?.delta?.role !== undefined).length, 1, 'one role chunk');
  assert.ok(cs.every((c) => c.id === 'chatcmpl-fake' && c.created === 1), 'the first engine\'s id and created throughout');
  // e1 reported 3 prompt tokens (the client's prompt and 'hel') and 2 completion tokens; 'hel' was e0's one token.
  assert.deepEqual(cs[cs.length - 1].usage, { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 });
  assert.ok(text.endsWith('data: [DONE]\n\n'));
  assert.equal(text.split('[DONE]').length, 2, 'one [DONE]');
  assert.match(metrics, /ear_stream_resumes_total\{outcome="resumed"\} 1/);
}

test('a reset after the first byte: the stream goes on on the other engine as a continuation', async () => {
  const { text, second, metrics } = await cut('die-after-first');
  assertResumed(text, second, metrics);
  assert.match(metrics, /ear_upstream_errors_total\{backend="e0",kind="midstream"\} 1/);
});

test('a stall past upstreamBodyTimeoutMs after the first byte: resumed', async () => {
  const { text, second, metrics } = await cut('stall-after-first', { upstreamBodyTimeoutMs: 300 });
  assertResumed(text, second, metrics);
});

test('a body that ends before its last event: resumed', async () => {
  const { text, second, metrics } = await cut('eof-after-first');
  assertResumed(text, second, metrics);
});

test('cut in the middle of an event: the half event never reaches the client, and the stream resumes', async () => {
  const { text, second, metrics } = await cut('die-mid-event');
  assert.doesNotMatch(text, /"delta":\{"cont(?!ent)/);
  assertResumed(text, second, metrics);
});

test('cut inside a tool call\'s arguments: not resumed, the stream ends with the error event', async () => {
  const { text, second, metrics } = await cut('die-in-tool-call');
  assert.equal(second.received.length, 0);
  assert.match(text, /"arguments":"\{\\"pa"/);
  assert.match(text, /data: \{"error":\{"message":"upstream connection failed mid-response; not resumed: the stream was cut in a tool call","type":"upstream_error","code":"EAR_ERR_UPSTREAM"\}\}\n\ndata: \[DONE\]\n\n$/);
  assert.match(metrics, /ear_stream_resumes_total\{outcome="tool_call"\} 1/);
});

test('maxResumes 0: a cut ends the stream with the error event, as before resumes', async () => {
  const { text, second } = await cut('die-after-first', { maxResumes: 0 });
  assert.equal(second.received.length, 0);
  assert.match(text, /data: \{"error":\{"message":"upstream connection failed mid-response","type":"upstream_error","code":"EAR_ERR_UPSTREAM"\}\}\n\ndata: \[DONE\]\n\n$/);
});

test('the resumed engine cut too, past maxResumes: the error event', async () => {
  const first = await fakeEngine('m', 'die-after-first');
  const second = await fakeEngine('m', 'die-after-first');
  after(() => Promise.all([first.close(), second.close()]));
  const { url, gw } = await gateway([first, second]);
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat });
  const text = await r.body.text();
  assert.equal(second.received.length, 1);
  assert.deepEqual(chunks(text).slice(0, 3).map((c) => c.choices[0]?.delta?.content), ['', 'hel', 'hel']);
  assert.match(text, /not resumed: maxResumes \(1\) reached","type":"upstream_error","code":"EAR_ERR_UPSTREAM"\}\}\n\ndata: \[DONE\]\n\n$/);
  assert.match(await gw.metrics.text(), /ear_stream_resumes_total\{outcome="limit"\} 1/);
});

test('an event longer than two reads reaches the client whole, and the stream that carried it is not taken for cut', async () => {
  // An engine that writes one large event in three pieces, apart in time, so the gateway reads them one by one: the
  // proxy holds the partial event across two reads with no blank line in the middle one (a Responses turn's
  // response.completed carries the whole output, as large as this).
  const big = 'x'.repeat(3000) + 'y'.repeat(3000);
  const chunk = (delta: Record<string, unknown>, finish: string | null = null, usage?: unknown): string =>
    `data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage === undefined ? {} : { usage }) })}\n\n`;
  const whole = chunk({ content: big });
  const cuts = [whole.indexOf('x') + 10, whole.indexOf('y') + 10];
  const pieces = [chunk({ role: 'assistant', content: '' }) + whole.slice(0, cuts[0]), whole.slice(cuts[0], cuts[1]),
    whole.slice(cuts[1]) + chunk({}, 'stop', { prompt_tokens: 2, completion_tokens: 1, total_tokens: 3 }) + 'data: [DONE]\n\n'];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      if (req.url !== '/v1/chat/completions') { // its health and models, as an engine answers them
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }));
        return;
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      let i = 0;
      const next = (): void => {
        res.write(pieces[i++]);
        if (i < pieces.length) setTimeout(next, 100); else res.end();
      };
      next();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));
  const { url, gw } = await gateway([{ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` } as FakeEngine]);
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat });
  assert.equal(r.statusCode, 200);
  const text = await r.body.text();
  assert.equal(text, pieces.join(''), 'the engine\'s bytes, unchanged');
  assert.deepEqual(chunks(text).map((c) => c.choices[0].delta.content ?? null), ['', big, null]);
  assert.doesNotMatch(await gw.metrics.text(), /ear_stream_resumes_total\{outcome="[a-z_]+"\} [1-9]/);
});
