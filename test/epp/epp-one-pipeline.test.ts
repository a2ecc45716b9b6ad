// `ear epp` serves two doors, its own HTTP OpenAI routes and Envoy's ext_proc, from one process core and one
// pipeline (issue 30): with the memory session store, a Responses continuation (previous_response_id) that
// arrives through the other door than its response did still reaches the engine that stored the response. With
// API keys on, a door that had no record of the response answered 404 before; with one pipeline it has it.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { stop, type Proc } from '../fixtures/processes.js';
import { epp, hostPort, metric, sims, type Epp } from './epp-process.js';

let engines: Proc[] = [];
let e: Epp;

before(async () => {
  engines = await sims(3);
  // round-robin: left alone, consecutive requests go to different engines.
  e = await epp(engines.map((s, i) => `${s.url},id=sim-${i}`), ['--policy', 'round-robin', '--api-key', 'sk-a', '--session-store', 'memory']);
});

after(async () => {
  await e?.close();
  await Promise.all(engines.map((s) => stop(s)));
});

const auth = { authorization: 'Bearer sk-a' };
const idOf = (endpoint: string): string => `sim-${engines.findIndex((s) => hostPort(s.url) === endpoint)}`;

/** A Responses request through the epp's HTTP door: the response's id and the engine that answered. */
async function viaHttp (body: Record<string, unknown>): Promise<{ id: string; backend: string }> {
  const r = await request(`${e.http}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify({ model: 'm', max_output_tokens: 4, ...body }) });
  const text = await r.body.text();
  assert.equal(r.statusCode, 200, text);
  return { id: (JSON.parse(text) as { id: string }).id, backend: String(r.headers['x-ear-backend']) };
}

/** The same through ext_proc, Envoy sending it to the endpoint the picker named. */
async function viaExtProc (body: Record<string, unknown>): Promise<{ id: string; backend: string }> {
  const x = await e.envoy.exchange({ path: '/v1/responses', headers: auth, body: Buffer.from(JSON.stringify({ model: 'm', max_output_tokens: 4, ...body })) });
  assert.equal(x.immediate, null, JSON.stringify(x.immediate));
  assert.equal(x.status, 200, x.responseBody.slice(0, 300));
  assert.equal(x.responseHeaders['x-ear-backend'], idOf(x.served!));
  return { id: (JSON.parse(x.responseBody) as { id: string }).id, backend: idOf(x.served!) };
}

test('a response made through the HTTP door continues through ext_proc on the engine that stored it', async () => {
  const first = await viaHttp({ input: 'Plan the change.' });
  for (let i = 0; i < 3; i++) {
    const next = await viaExtProc({ previous_response_id: first.id, input: `step ${i}` });
    assert.equal(next.backend, first.backend);
  }
});

test('a response made through ext_proc continues through the HTTP door on the engine that stored it', async () => {
  const first = await viaExtProc({ input: 'Plan another change.' });
  for (let i = 0; i < 3; i++) {
    const next = await viaHttp({ previous_response_id: first.id, input: `step ${i}` });
    assert.equal(next.backend, first.backend);
  }
});

test('a refusal at either door is counted once in ear_requests_total, with its route and status', async () => {
  const series = '{route="/v1/responses",status="401",backend=""}';
  const x = await e.envoy.exchange({ path: '/v1/responses', headers: { authorization: 'Bearer sk-wrong' }, body: Buffer.from(JSON.stringify({ model: 'm', input: 'x' })) });
  assert.equal(x.immediate?.status, 401);
  assert.equal(await metric(e.http, 'ear_requests_total', series), 1);
  const r = await request(`${e.http}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer sk-wrong' }, body: JSON.stringify({ model: 'm', input: 'x' }) });
  await r.body.dump();
  assert.equal(r.statusCode, 401);
  assert.equal(await metric(e.http, 'ear_requests_total', series), 2);
});
