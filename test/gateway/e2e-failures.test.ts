// Engines dying under the gateway: real `ear sim` servers on loopback, killed before or during a response.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { request, getGlobalDispatcher } from 'undici';
import type { Ear } from '../../src/gateway/ear.js';
import type { SimServer } from '../../src/sim/server.js';
import { fleet, type Fleet } from '../fixtures/fleet.js';

let f: Fleet;
let sims: SimServer[];
let ear: Ear;
let base: string;

before(async () => {
  f = await fleet(3, { timeScale: 0.05, tokenizer: 'character', stopProbability: 0 }, { policy: 'sticky' });
  ({ sims, ear, base } = f);
});
after(async () => {
  await f.close();
  await getGlobalDispatcher().close();
});

const chat = (maxTokens: number, stream: boolean) => JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello there' }], max_tokens: maxTokens, ignore_eos: true, stream });

async function ask (session: string, maxTokens: number, stream = false) {
  return request(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session }, body: chat(maxTokens, stream) });
}

test('an engine killed before the first byte: the request is retried on another engine and succeeds', async () => {
  const first = await ask('s-before', 4);
  const host = String(first.headers['x-ear-backend']);
  await first.body.dump();
  const victim = sims[Number(host.split('-')[1])];
  await victim.close(); // the gateway has not noticed: its next health check is a minute away
  const r = await ask('s-before', 4);
  assert.equal(r.statusCode, 200);
  assert.notEqual(r.headers['x-ear-backend'], host);
  assert.equal(((await r.body.json()) as { object: string }).object, 'chat.completion');
  assert.match(await ear.gateway.metrics.text(), /ear_upstream_errors_total\{backend="sim-\d",kind="connect"\} [1-9]/);
});

test('an engine killed mid-stream: the stream ends with an error event, and the gateway keeps serving', async () => {
  const r = await ask('s-mid', 4000, true);
  assert.equal(r.statusCode, 200);
  const host = String(r.headers['x-ear-backend']);
  const victim = sims[Number(host.split('-')[1])];
  let text = '';
  const it = r.body[Symbol.asyncIterator]();
  text += String((await it.next()).value);
  await victim.close();
  for (let x = await it.next(); !x.done; x = await it.next()) text += String(x.value);
  assert.match(text, /data: \{"error":\{"message":"upstream connection failed mid-response","type":"upstream_error","code":"EAR_ERR_UPSTREAM"\}\}\n\ndata: \[DONE\]\n\n$/);
  await ear.gateway.checkHealth();
  await ear.gateway.checkHealth();
  const after = await ask('s-mid', 4);
  assert.equal(after.statusCode, 200);
  assert.notEqual(after.headers['x-ear-backend'], host);
  await after.body.dump();
});
