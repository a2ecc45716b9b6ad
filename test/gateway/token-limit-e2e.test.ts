// Tokens per minute through a real `ear serve` in front of an `ear sim` engine: the x-ratelimit-* headers on a
// limited key's every answer (JSON, streamed, refused), the charge corrected to the engine's usage, the 429 while
// a key's tokens are in debt, and SIGHUP.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { metric, simFleet, text, type SimFleet } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

const RATE_HEADERS = ['x-ratelimit-limit-requests', 'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-requests', 'x-ratelimit-remaining-tokens',
  'x-ratelimit-reset-requests', 'x-ratelimit-reset-tokens'];
/** A Go duration as OpenAI writes it. */
const GO_DURATION = /^(0s|[0-9]+ms|([0-9]+h)?([0-9]+m)?[0-9]+(\.[0-9]+)?s)$/;

const config = (tinyPerMinute: number): string[] => [
  'healthIntervalMs: 60000',
  'metricsIntervalMs: 0',
  'apiKeys: [key-big, key-tiny, key-open]',
  'rateLimits:',
  '  keys:',
  // key-big refills one request in 1,000 s: its remaining requests do not depend on how slowly this runs.
  '    key-big: {requestsPerSecond: 0.001, burst: 50, tokensPerMinute: 10000}',
  `    key-tiny: {tokensPerMinute: ${tinyPerMinute}}`
];

interface Answer { status: number; headers: Headers; body: string }

async function post (url: string, path: string, key: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'm', ...body }) });
  return { status: res.status, headers: res.headers, body: await res.text() };
}

const chat = (content: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ messages: [{ role: 'user', content }], max_tokens: 8, ignore_eos: true, ...extra });

/** total_tokens of a JSON answer or of a stream's usage event. */
function totalTokens (a: Answer): number {
  if (a.headers.get('content-type')?.includes('text/event-stream') === true) {
    const events = a.body.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)) as { usage?: { total_tokens: number } | null });
    const u = events.find((e) => e.usage != null);
    assert.ok(u !== undefined, 'the stream carries usage');
    return u.usage!.total_tokens;
  }
  return (JSON.parse(a.body) as { usage: { total_tokens: number } }).usage.total_tokens;
}

describe('tokens per minute through ear serve', () => {
  let fleet: SimFleet;
  before(async () => {
    fleet = await simFleet(config(60), () => [['--time-scale', '0.05']]);
  });
  after(async () => { await fleet?.close(); });

  test('a limited key\'s every answer carries x-ratelimit-* (JSON, a stream, a bad request); an unlimited key\'s none; the charge is corrected to the engine\'s usage', async () => {
    const used: number[] = [];
    const sent = performance.now();
    const json = await post(fleet.url, '/v1/chat/completions', 'key-big', chat(text('json', 400)));
    assert.equal(json.status, 200, json.body);
    used.push(totalTokens(json));
    for (const h of RATE_HEADERS) assert.ok(json.headers.has(h), `${h} on a JSON answer`);
    assert.equal(json.headers.get('x-ratelimit-limit-requests'), '50');
    assert.equal(json.headers.get('x-ratelimit-limit-tokens'), '10000');
    const remainingRequests = Number(json.headers.get('x-ratelimit-remaining-requests'));
    assert.ok(remainingRequests >= 45 && remainingRequests <= 49, `one of the burst taken: ${remainingRequests}`);
    const remainingTokens = Number(json.headers.get('x-ratelimit-remaining-tokens'));
    // Charged its prompt (400 characters and the template: about as many tokens) + 8; 167 tokens a second come back
    // (10,000 a minute), so a slow machine sees more refilled by the time the answer is written: at most what the
    // seconds since it was sent refill.
    const refill = Math.ceil(10_000 / 60 * (performance.now() - sent) / 1000);
    assert.ok(remainingTokens < 10_000 - 200 + refill && remainingTokens > 10_000 - 2000, `its prompt + max_tokens charged: ${remainingTokens} (refill ≤ ${refill})`);
    assert.match(json.headers.get('x-ratelimit-reset-requests')!, GO_DURATION);
    assert.match(json.headers.get('x-ratelimit-reset-tokens')!, GO_DURATION);

    const stream = await post(fleet.url, '/v1/chat/completions', 'key-big', chat(text('stream', 400), { stream: true, stream_options: { include_usage: true } }));
    assert.equal(stream.status, 200, stream.body);
    assert.match(stream.headers.get('content-type') ?? '', /text\/event-stream/);
    for (const h of RATE_HEADERS) assert.ok(stream.headers.has(h), `${h} on a streamed answer (the head goes out before the body)`);
    used.push(totalTokens(stream));
    const completion = await post(fleet.url, '/v1/completions', 'key-big', { prompt: text('completion', 300), max_tokens: 1000, min_tokens: 3, stream: false });
    assert.equal(completion.status, 200, completion.body);
    used.push(totalTokens(completion));

    // What was charged at admission, less what came back, plus what was charged extra, is what the engine reported.
    const net = async (): Promise<number> => await metric(fleet.url, 'ear_token_rate_tokens_total', '{step="charged"}') -
      await metric(fleet.url, 'ear_token_rate_tokens_total', '{step="refunded"}') + await metric(fleet.url, 'ear_token_rate_tokens_total', '{step="extra"}');
    const want = used.reduce((a, b) => a + b, 0);
    let seen = 0;
    await until(async () => (seen = await net()) === want, { what: () => `net tokens charged (${seen}) = the engine's usage (${want})` });
    const generated = (JSON.parse(completion.body) as { usage: { completion_tokens: number } }).usage.completion_tokens;
    const refunded = await metric(fleet.url, 'ear_token_rate_tokens_total', '{step="refunded"}');
    assert.ok(refunded >= (1000 - generated) / 2, `the completion's unused max_tokens came back: ${refunded} (it generated ${generated} of 1000)`);

    const bad = await post(fleet.url, '/v1/chat/completions', 'key-big', { messages: 'not a list' });
    assert.equal(bad.status, 400, bad.body);
    for (const h of RATE_HEADERS) assert.ok(bad.headers.has(h), `${h} on an error`);
    const models = await fetch(`${fleet.url}/v1/models`, { headers: { authorization: 'Bearer key-big' } });
    assert.equal(models.status, 200);
    assert.ok(models.headers.has('x-ratelimit-remaining-tokens'), 'on /v1/models too');

    const open = await post(fleet.url, '/v1/chat/completions', 'key-open', chat('open'));
    assert.equal(open.status, 200, open.body);
    const nokey = await post(fleet.url, '/v1/chat/completions', 'key-none', chat('none'));
    assert.equal(nokey.status, 401);
    for (const a of [open, nokey]) assert.deepEqual(RATE_HEADERS.filter((h) => a.headers.has(h)), [], 'no limit, no headers');
  });

  test('past a minute\'s tokens: the request is let in, then its key is refused 429 with Retry-After and OpenAI\'s error on the token routes (not /v1/models) until refill; SIGHUP raises the limit', async () => {
    // 60 tokens a minute, a prompt of hundreds: let in (the bucket was not in debt), and the key is in debt after.
    const first = await post(fleet.url, '/v1/chat/completions', 'key-tiny', chat(text('tiny', 1200), { max_tokens: 1 }));
    assert.equal(first.status, 200, first.body);
    assert.equal(first.headers.get('x-ratelimit-limit-tokens'), '60');
    assert.equal(first.headers.get('x-ratelimit-remaining-tokens'), '0');
    assert.equal(first.headers.has('x-ratelimit-limit-requests'), false, 'a key without a request limit gets no request headers');
    for (const [path, body] of [['/v1/chat/completions', chat('again')], ['/v1/completions', { prompt: 'again', max_tokens: 1 }]] as const) {
      const refused = await post(fleet.url, path, 'key-tiny', body);
      assert.equal(refused.status, 429, `${path}: ${refused.body}`);
      const err = (JSON.parse(refused.body) as { error: { type: string; code: string; message: string } }).error;
      assert.equal(err.type, 'rate_limit_error');
      assert.equal(err.code, 'EAR_ERR_RATE_LIMITED');
      assert.match(err.message, /tokens per minute \(limit 60\)/);
      const retry = Number(refused.headers.get('retry-after'));
      // A debt of (tokens used − 60) at one token a second.
      assert.ok(Number.isInteger(retry) && retry >= 60, `Retry-After ${refused.headers.get('retry-after')}`);
      assert.equal(refused.headers.get('x-ratelimit-remaining-tokens'), '0');
      assert.equal(refused.headers.get('x-ratelimit-limit-tokens'), '60');
      assert.match(refused.headers.get('x-ratelimit-reset-tokens')!, /^([0-9]+h)?[0-9]+m[0-9.]+s$/, 'minutes until the bucket is full');
    }
    const models = await fetch(`${fleet.url}/v1/models`, { headers: { authorization: 'Bearer key-tiny' } });
    assert.equal(models.status, 200, 'a model list costs no tokens');
    assert.equal(await metric(fleet.url, 'ear_token_rate_limited_total', '{scope="key",route="/v1/chat/completions"}'), 1);
    assert.equal(await metric(fleet.url, 'ear_token_rate_limited_total', '{scope="key",route="/v1/completions"}'), 1);

    // SIGHUP: the key's debt carries over, paid back at once at the new rate.
    writeFileSync(fleet.configFile, `${config(6_000_000).join('\n')}\n`);
    fleet.gateway.child.kill('SIGHUP');
    let last: Answer | null = null;
    await until(async () => {
      last = await post(fleet.url, '/v1/chat/completions', 'key-tiny', chat('after the reload'));
      return last.status === 200;
    }, { what: () => `200 after SIGHUP (last ${last?.status})` });
    assert.equal(last!.headers.get('x-ratelimit-limit-tokens'), '6000000');
  });
});
