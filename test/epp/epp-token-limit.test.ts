// `ear epp` checks the same client gate as `ear serve`: a token-limited key's charge is corrected from the usage
// the response carries past the picker, its answers carry x-ratelimit-* (in the response headers mutation, and in
// the ImmediateResponse of a refusal), and past a minute's tokens it is refused 429 with Retry-After.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stop, text, type Proc } from '../fixtures/processes.js';
import { chat, epp, metric, sims, type Epp } from './epp-process.js';
import { until } from '../fixtures/wait.js';

let engines: Proc[] = [];
let e: Epp;
let dir = '';

before(async () => {
  engines = await sims(1);
  dir = mkdtempSync(join(tmpdir(), 'ear-epp-tokens-'));
  const cfg = join(dir, 'ear.yaml');
  // key-big refills one request in 1,000 s: its remaining requests read 9 after one, however slowly this runs.
  writeFileSync(cfg, ['apiKeys: [key-big, key-tiny]', 'rateLimits:', '  keys:', '    key-big: {requestsPerSecond: 0.001, burst: 10, tokensPerMinute: 10000}',
    '    key-tiny: {tokensPerMinute: 60}', ''].join('\n'));
  e = await epp([`${engines[0].url},id=sim-0`], ['--config', cfg]);
});

after(async () => {
  await e?.close();
  await Promise.all(engines.map((s) => stop(s)));
  rmSync(dir, { recursive: true, force: true });
});

test('a limited key\'s routed answer carries x-ratelimit-* in the response headers mutation; the charge is corrected to the usage the stream carried', async () => {
  const sent = performance.now();
  const x = await e.envoy.exchange({ body: chat(text('epp', 400), { max_tokens: 1000, stream: true, stream_options: { include_usage: true } }), headers: { authorization: 'Bearer key-big' } });
  // The bucket refills while the answer is made (10,000 a minute): a slow machine reads more back by the time the
  // headers are written, at most what the seconds since it was sent refill.
  const refill = Math.ceil(10_000 / 60 * (performance.now() - sent) / 1000);
  assert.equal(x.status, 200);
  assert.equal(x.responseHeaders['x-ratelimit-limit-requests'], '10');
  assert.equal(x.responseHeaders['x-ratelimit-remaining-requests'], '9');
  assert.equal(x.responseHeaders['x-ratelimit-limit-tokens'], '10000');
  assert.ok(Number(x.responseHeaders['x-ratelimit-remaining-tokens']) < 10_000 - 1000 + refill, `prompt + max_tokens charged: ${x.responseHeaders['x-ratelimit-remaining-tokens']} (refill ≤ ${refill})`);
  assert.match(x.responseHeaders['x-ratelimit-reset-tokens'], /^[0-9.]+m?s$|^[0-9]+m[0-9.]+s$/);
  const usage = x.responseBody.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)) as { usage?: { total_tokens: number; completion_tokens: number } | null })
    .find((ev) => ev.usage != null)!.usage!;
  const net = async (): Promise<number> => await metric(e.http, 'ear_token_rate_tokens_total', '{step="charged"}') -
    await metric(e.http, 'ear_token_rate_tokens_total', '{step="refunded"}') + await metric(e.http, 'ear_token_rate_tokens_total', '{step="extra"}');
  let seen = 0;
  await until(async () => (seen = await net()) === usage.total_tokens, { what: () => `net tokens charged (${seen}) = the stream's usage (${usage.total_tokens})` });
  // It was charged max_tokens (1000) and generated far fewer (the sim stops at random): the rest came back.
  const refunded = await metric(e.http, 'ear_token_rate_tokens_total', '{step="refunded"}');
  assert.ok(refunded >= (1000 - usage.completion_tokens) / 2, `refunded ${refunded} of 1000 max_tokens, ${usage.completion_tokens} generated`);
});

test('past a minute\'s tokens the key is refused by ImmediateResponse 429 with Retry-After and x-ratelimit-*, counted rate_limited', async () => {
  const first = await e.envoy.exchange({ body: chat(text('tiny', 1200), { max_tokens: 1 }), headers: { authorization: 'Bearer key-tiny' } });
  assert.equal(first.status, 200);
  assert.equal(first.responseHeaders['x-ratelimit-remaining-tokens'], '0');
  assert.equal(first.responseHeaders['x-ratelimit-limit-requests'], undefined, 'no request limit, no request headers');
  const refused = await e.envoy.exchange({ body: chat('again'), headers: { authorization: 'Bearer key-tiny' } });
  assert.equal(refused.immediate?.status, 429);
  assert.equal(JSON.parse(refused.immediate!.body).error.code, 'EAR_ERR_RATE_LIMITED');
  assert.ok(Number(refused.immediate!.headers['retry-after']) >= 60, refused.immediate!.headers['retry-after']);
  assert.equal(refused.immediate!.headers['x-ratelimit-limit-tokens'], '60');
  assert.equal(refused.immediate!.headers['x-ratelimit-remaining-tokens'], '0');
  assert.equal(await metric(e.http, 'ear_epp_requests_total', '{outcome="rate_limited"}'), 1);
  assert.equal(await metric(e.http, 'ear_token_rate_limited_total', '{scope="key",route="/v1/chat/completions"}'), 1);
});
