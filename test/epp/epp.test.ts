// `ear epp` against real `ear sim` engines, with the test playing Envoy's side of each ext_proc stream
// (envoy-side.ts): both body modes with a 150 KB body, session affinity, the subset hint, the conformance
// headers, and an engine that dies so the proxy falls back to the next endpoint the picker named.
import { test, before, after } from 'node:test';
import { gzipSync } from 'node:zlib';
import assert from 'node:assert/strict';
import { stop, text, type Proc } from '../fixtures/processes.js';
import { chat, epp, hostPort, metric, metricSum, sims, type Epp } from './epp-process.js';

let engines: Proc[] = [];
let e: Epp;

before(async () => {
  // Big enough for a 150 KB prompt (one token per byte with the character tokenizer).
  engines = await sims(2, ['--max-model-len', '400000', '--num-gpu-blocks-override', '40000', '--time-scale', '0.01']);
  e = await epp(engines.map((s, i) => `${s.url},id=sim-${i}`));
});

after(async () => {
  await e?.close();
  await Promise.all(engines.map((s) => stop(s)));
});

const endpointsOf = (): string[] => engines.map((s) => hostPort(s.url));

test('FULL_DUPLEX_STREAMED: a 150 KB body comes back in chunks of at most 62,000 bytes, byte for byte, after the endpoint header', async () => {
  const body = chat(text('duplex', 150_000), { stream: true, stream_options: { include_usage: true } });
  assert.ok(body.length > 150_000);
  const x = await e.envoy.exchange({ body, chunkBytes: 16_384, headers: { 'x-session-id': 'big-duplex' } });
  assert.equal(x.immediate, null, JSON.stringify(x.immediate));
  const eps = x.endpointHeader!.split(',');
  assert.equal(eps.length, 2, 'the primary and one fallback (two backends)');
  assert.deepEqual([...eps].sort(), [...endpointsOf()].sort());
  assert.equal(x.endpointMetadata, x.endpointHeader, 'header and envoy.lb metadata name the same endpoints');
  assert.ok(x.bodyChunkSizes.length >= 3, `chunks: ${x.bodyChunkSizes.join(',')}`);
  assert.ok(x.bodyChunkSizes.every((n) => n <= 62_000), `chunks: ${x.bodyChunkSizes.join(',')}`);
  assert.ok(x.forwardedBody!.equals(body), 'the re-sent body is the client\'s, byte for byte');
  assert.equal(x.requestHeaderMutation['content-length'], String(body.length), 'the re-sent body\'s length is set');
  assert.equal(x.status, 200, x.responseBody.slice(0, 300));
  assert.equal(x.served, eps[0]);
  assert.match(x.responseBody, /data: \[DONE\]/);
  assert.equal(x.responseHeaders['x-ear-backend'], `sim-${endpointsOf().indexOf(eps[0])}`);
  assert.equal(await metric(e.http, 'ear_epp_requests_total', '{outcome="routed"}'), 1);
  assert.equal(await metric(e.http, 'ear_epp_served_total', '{kind="primary"}'), 1);
  // The response was watched in passing: its first token and its end were recorded for the backend that served.
  const id = `sim-${endpointsOf().indexOf(eps[0])}`;
  assert.equal(await metric(e.http, 'ear_time_to_first_token_seconds_count', `{backend="${id}"}`), 1);
  assert.equal(await metric(e.http, 'ear_e2e_request_latency_seconds_count', `{backend="${id}"}`), 1);
  const s = await (await fetch(`${e.http}/admin/sessions/big-duplex`, { headers: { authorization: 'Bearer admin' } })).json() as { host: string; inFlight: number; attainedServiceMs: number };
  assert.equal(s.host, id);
  assert.equal(s.inFlight, 0);
  assert.ok(s.attainedServiceMs > 0, 'the call\'s service was added to its session');
});

test('BUFFERED: the headers are answered at once, the single body message with the endpoint', async () => {
  const body = chat(text('buffered', 150_000));
  const x = await e.envoy.exchange({ mode: 'BUFFERED', body, headers: { 'x-session-id': 'big-buffered' } });
  assert.equal(x.immediate, null, JSON.stringify(x.immediate));
  assert.ok(x.endpointHeader !== null && endpointsOf().includes(x.endpointHeader.split(',')[0]));
  assert.equal(x.endpointMetadata, x.endpointHeader);
  assert.ok(x.forwardedBody!.equals(body));
  assert.equal(x.status, 200);
  const doc = JSON.parse(x.responseBody) as { usage: { prompt_tokens: number } };
  assert.ok(doc.usage.prompt_tokens > 150_000, 'the engine got the whole prompt');
});

test('a client\'s kv_transfer_params are stripped as the gateway strips them (BUFFERED: a body mutation and its length)', async () => {
  const body = chat('transfer', { kv_transfer_params: { do_remote_prefill: true, remote_host: '10.9.9.9' } });
  const x = await e.envoy.exchange({ mode: 'BUFFERED', body });
  assert.equal(x.status, 200);
  assert.ok(!x.forwardedBody!.toString().includes('kv_transfer_params'), x.forwardedBody!.toString());
  assert.equal(x.requestHeaderMutation['content-length'], String(x.forwardedBody!.length));
});

test('full duplex is assumed when the proxy sends no protocol_config (by default; epp-admission tests --ext-proc-mode buffered)', async () => {
  // The default (full duplex) with no protocol_config: nothing comes back until the body ended.
  const x = await e.envoy.exchange({ body: chat('no protocol config'), noProtocolConfig: true });
  assert.equal(x.status, 200);
  assert.ok(x.forwardedBody!.equals(chat('no protocol config')));
});

test('FULL_DUPLEX_STREAMED with request trailers: the body ends with them, then the trailers are answered', async () => {
  const body = chat(text('trailers', 70_000));
  const x = await e.envoy.exchange({ body, requestTrailers: true });
  assert.equal(x.status, 200);
  assert.ok(x.forwardedBody!.equals(body));
  assert.ok(x.messages.some((m) => m.request_trailers !== undefined));
});

test('response body mode NONE: the stream\'s end ends the response (no abort counted, nothing held)', async () => {
  const x = await e.envoy.exchange({ body: chat('no response body', { stream: true }), responseMode: 'NONE' });
  assert.equal(x.status, 200);
  assert.match(x.responseBody, /\[DONE\]/);
  assert.equal(await metricSum(e.http, 'ear_epp_stream_aborts_total'), 0);
  assert.equal(await metricSum(e.http, 'ear_backend_in_flight'), 0);
});

test('session affinity: a session\'s second turn goes where its first went', async () => {
  const first = [{ role: 'user', content: text('affinity', 3000) }];
  const a = await e.envoy.exchange({ body: Buffer.from(JSON.stringify({ model: 'm', messages: first, max_tokens: 4 })), headers: { 'x-session-id': 'sticky' } });
  assert.equal(a.status, 200);
  const second = [...first, { role: 'assistant', content: JSON.parse(a.responseBody).choices[0].message.content }, { role: 'user', content: 'and then?' }];
  const b = await e.envoy.exchange({ body: Buffer.from(JSON.stringify({ model: 'm', messages: second, max_tokens: 4 })), headers: { 'x-session-id': 'sticky' } });
  assert.equal(b.status, 200);
  assert.equal(b.endpointHeader!.split(',')[0], a.served, 'turn 2 is sent to turn 1\'s engine first');
  const usage = JSON.parse(b.responseBody).usage as { prompt_tokens_details?: { cached_tokens?: number } };
  assert.ok((usage.prompt_tokens_details?.cached_tokens ?? 0) >= 2000, 'and its prefix was cached there');
});

test('the subset hint restricts the candidates; none available → 503', async () => {
  const [, second] = endpointsOf();
  for (let i = 0; i < 3; i++) {
    const x = await e.envoy.exchange({ body: chat(`subset ${i}`), subset: [second] });
    assert.equal(x.endpointHeader, second, 'only the listed endpoint is named (no fallback outside the subset)');
    assert.equal(x.served, second);
  }
  // A session bound elsewhere still follows the hint.
  const y = await e.envoy.exchange({ body: chat('bound', { max_tokens: 2 }), headers: { 'x-session-id': 'subset-s' }, subset: [endpointsOf()[0]] });
  assert.equal(y.endpointHeader, endpointsOf()[0]);
  const z = await e.envoy.exchange({ body: chat('bound again', { max_tokens: 2 }), headers: { 'x-session-id': 'subset-s' }, subset: [second] });
  assert.equal(z.endpointHeader, second);
  const none = await e.envoy.exchange({ body: chat('nowhere'), subset: ['10.255.255.1:8000'] });
  assert.equal(none.immediate?.status, 503);
  assert.equal(JSON.parse(none.immediate!.body).error.code, 'EAR_ERR_NO_BACKEND');
  const empty = await e.envoy.exchange({ body: chat('empty subset'), subset: [] });
  assert.equal(empty.immediate?.status, 503, 'an empty list allows nothing');
});

test('conformance: test-epp-endpoint-selection picks among its endpoints; x-conformance-test-served-endpoint reports the server', async () => {
  const [first, second] = endpointsOf();
  const x = await e.envoy.exchange({ body: chat('conformance'), headers: { 'test-epp-endpoint-selection': second } });
  assert.equal(x.endpointHeader, second);
  assert.equal(x.responseHeaders['x-conformance-test-served-endpoint'], second);
  // Both listed: either may be picked, never another; the served one is reported.
  const both = await e.envoy.exchange({ body: chat('conformance both'), headers: { 'test-epp-endpoint-selection': `${first},${second}` } });
  assert.ok([first, second].includes(both.served!));
  assert.equal(both.responseHeaders['x-conformance-test-served-endpoint'], both.served);
  // An address without a port allows its every port (the suite lists pod IPs); the header overrides a subset hint.
  const ip = await e.envoy.exchange({ body: chat('conformance ip'), headers: { 'test-epp-endpoint-selection': '127.0.0.1' }, subset: ['10.255.255.1:8000'] });
  assert.equal(ip.status, 200);
  // Without the test header the response says nothing of pods.
  const plain = await e.envoy.exchange({ body: chat('plain') });
  assert.equal(plain.responseHeaders['x-conformance-test-served-endpoint'], undefined);
});

test('a request that is not an inference call is sent to a healthy backend, unrecorded', async () => {
  const x = await e.envoy.exchange({ path: '/v1/models', body: null });
  assert.ok(endpointsOf().includes(x.endpointHeader!));
  assert.equal(x.endpointMetadata, x.endpointHeader);
  const bad = await e.envoy.exchange({ body: Buffer.from('{"model": "m", "messages": ') });
  assert.equal(bad.immediate?.status, 400);
  const unknown = await e.envoy.exchange({ body: Buffer.from(JSON.stringify({ model: 'nope', prompt: 'x' })), path: '/v1/completions' });
  assert.equal(unknown.immediate?.status, 404);
});

test('an engine failure: the primary dies, the proxy falls back to the next endpoint named, reports it, and EAR records it there', async () => {
  const session = 'fallback-s';
  let primary = '';
  const x = await e.envoy.exchange({
    body: chat(text('fallback', 2000)), headers: { 'x-session-id': session },
    beforeUpstream: async (eps) => {
      primary = eps[0];
      await stop(engines[endpointsOf().indexOf(primary)], 'SIGKILL');
    }
  });
  assert.equal(x.status, 200);
  const eps = x.endpointHeader!.split(',');
  assert.equal(x.served, eps[1], 'served by the fallback');
  assert.notEqual(x.served, primary);
  assert.equal(await metric(e.http, 'ear_epp_served_total', '{kind="fallback"}'), 1);
  const fallbackId = `sim-${endpointsOf().indexOf(x.served!)}`;
  assert.equal(x.responseHeaders['x-ear-backend'], fallbackId, 'the response names the backend that served');
  const s = await (await fetch(`${e.http}/admin/sessions/${session}`, { headers: { authorization: 'Bearer admin' } })).json() as { host: string };
  assert.equal(s.host, fallbackId, 'the session is bound where it was served');
  assert.equal(await metric(e.http, 'ear_upstream_retries_total'), 1);
});

test('Anthropic /v1/messages through the picker: a gzip body is decoded, sent on decoded (content-encoding removed), and routed by session', async () => {
  const doc = { model: 'm', max_tokens: 4, system: text('system', 2000), messages: [{ role: 'user', content: 'hello from an agent' }] };
  const headers = { 'content-encoding': 'gzip', 'x-claude-code-session-id': 'cc-epp', 'anthropic-version': '2023-06-01' };
  const a = await e.envoy.exchange({ mode: 'BUFFERED', path: '/v1/messages?beta=true', body: gzipSync(JSON.stringify(doc)), headers });
  assert.equal(a.immediate, null, JSON.stringify(a.immediate));
  assert.equal(a.status, 200, a.responseBody);
  assert.deepEqual(JSON.parse(a.forwardedBody!.toString()), doc);
  assert.deepEqual(a.removedHeaders, ['content-encoding']);
  assert.equal(a.upstreamHeaders['content-encoding'], undefined);
  assert.equal(JSON.parse(a.responseBody).type, 'message');
  const b = await e.envoy.exchange({ mode: 'BUFFERED', path: '/v1/messages', body: gzipSync(JSON.stringify(doc)), headers });
  assert.equal(b.endpointHeader!.split(',')[0], a.served, 'the session\'s second turn goes where its first went');
});

test('Anthropic errors from the picker come in Anthropic\'s shape; an unknown content-encoding is 415', async () => {
  const bad = await e.envoy.exchange({ mode: 'BUFFERED', path: '/v1/messages', body: Buffer.from('{"model":"m","messages":[]') });
  assert.equal(bad.immediate?.status, 400);
  const doc = JSON.parse(bad.immediate!.body) as { type: string; error: { type: string; message: string } };
  assert.equal(doc.type, 'error');
  assert.equal(doc.error.type, 'invalid_request_error');
  const enc = await e.envoy.exchange({ mode: 'BUFFERED', path: '/v1/responses', body: chat('x'), headers: { 'content-encoding': 'compress' } });
  assert.equal(enc.immediate?.status, 415);
  assert.equal(JSON.parse(enc.immediate!.body).error.code, 'EAR_ERR_UNSUPPORTED_ENCODING');
});
