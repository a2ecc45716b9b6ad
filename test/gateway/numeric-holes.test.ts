// Issue 28, findings 1, 4, 5 and 8, through a real `ear serve` (API keys, token-limited ones) in front of `ear sim`
// engines, with the official SDKs: huge numbers are refused at the door in each API's shape before anything is
// charged or sent; the process stays up, nothing is left in flight and no key is left charged; count_tokens is not
// charged tokens; Messages answers carry both sets of rate-limit headers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { metric, simFleet, text, type SimFleet } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

const MAX_MODEL_LEN = 4096;
const PER_MINUTE = 6000;

const config = [
  'healthIntervalMs: 60000',
  'metricsIntervalMs: 0',
  'apiKeys: [key-limited, key-tiny, key-open]',
  'rateLimits:',
  '  keys:',
  `    key-limited: {requestsPerSecond: 50, burst: 100, tokensPerMinute: ${PER_MINUTE}}`,
  '    key-tiny: {tokensPerMinute: 60}'
];

/** A header value as a number (NaN when absent). */
const num = (h: Headers, name: string): number => Number(h.get(name) ?? 'NaN');
/** A Go duration ("1m30s", "250ms") in ms. */
function goMs (d: string): number {
  const m = /^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$/.exec(d);
  assert.ok(m !== null, `a Go duration: ${d}`);
  return (Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0)) * 1000 + Number(m[4] ?? 0);
}

describe('numbers at the door (issue 28: 1, 4, 5, 8)', () => {
  let fleet: SimFleet;
  let openai: OpenAI;
  let anthropic: Anthropic;
  before(async () => {
    fleet = await simFleet(config, () => [['--max-model-len', String(MAX_MODEL_LEN), '--time-scale', '0.02'], ['--max-model-len', String(MAX_MODEL_LEN), '--time-scale', '0.02']]);
    openai = new OpenAI({ baseURL: `${fleet.url}/v1`, apiKey: 'key-limited', maxRetries: 0, timeout: 30_000 });
    anthropic = new Anthropic({ baseURL: fleet.url, apiKey: 'key-limited', maxRetries: 0, timeout: 30_000 });
  });
  after(async () => { await fleet?.close(); });

  const charged = async (): Promise<number> => await metric(fleet.url, 'ear_token_rate_tokens_total', '{step="charged"}');
  const inFlight = async (): Promise<number> => {
    const body = await (await fetch(`${fleet.url}/metrics`)).text();
    return body.split('\n').filter((l) => l.startsWith('ear_backend_in_flight{')).reduce((s, l) => s + Number(l.split(' ').pop()), 0);
  };
  // The client has its whole answer a moment before the gateway counts the request done (with data-plane threads the
  // thread's report reaches the owner's load table in its next batch): a leak is a count that never comes back to 0.
  const noneInFlight = async (): Promise<void> => {
    await until(async () => (await inFlight()) === 0, 'nothing left in flight');
  };
  const alive = (): void => {
    assert.equal(fleet.gateway.child.exitCode, null, `ear serve still runs: ${fleet.gateway.out().slice(-2000)}`);
    assert.equal(fleet.gateway.child.signalCode, null);
  };

  test('Messages with max_tokens 9007199254740991: 400 invalid_request_error, nothing charged; the key\'s next Messages request is served', async () => {
    const before = await charged();
    // Streamed, as Claude Code sends it (the SDK refuses a non-streamed request this large before sending it).
    const err = await anthropic.messages.create({ model: 'm', max_tokens: 9007199254740991, stream: true, messages: [{ role: 'user', content: 'hello' }] })
      .then(() => null, (e: unknown) => e);
    assert.ok(err instanceof Anthropic.BadRequestError, `a 400 in Anthropic's shape, got ${String(err)}`);
    assert.equal((err.error as { error: { type: string } }).error.type, 'invalid_request_error');
    assert.match(String(err.message), /max_tokens/);
    assert.equal(await charged(), before, 'nothing charged');
    // The next Messages request of the same key: served, its headers written (the 429 path used to throw here).
    const { data, response } = await anthropic.messages.create({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hello again' }] }).withResponse();
    assert.equal(data.type, 'message');
    const remaining = num(response.headers, 'anthropic-ratelimit-tokens-remaining');
    assert.ok(remaining > PER_MINUTE - 500 && remaining <= PER_MINUTE, `the key is not left charged: ${remaining}`);
    const reset = Date.parse(response.headers.get('anthropic-ratelimit-tokens-reset')!);
    assert.ok(reset >= Date.now() - 5000 && reset < Date.now() + 86_400_000, `a sane reset date: ${response.headers.get('anthropic-ratelimit-tokens-reset')}`);
    alive();
    await noneInFlight();
  });

  test('chat with max_tokens 1e300: 400 in OpenAI\'s shape before anything is charged; chat and Responses bound their numbers too', async () => {
    const before = await charged();
    // The SDK writes 1e300 as JSON's 1e+300: an integer to Number.isInteger.
    const err = await openai.chat.completions.create({ model: 'm', max_tokens: 1e300, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e);
    assert.ok(err instanceof OpenAI.BadRequestError, `a 400, got ${String(err)}`);
    assert.equal((err.error as { type: string }).type, 'invalid_request_error');
    for (const extra of [{ max_completion_tokens: -1 }, { n: 1e9 }, { top_k: 2 ** 60 }, { temperature: -1 }, { top_p: 2 }, { max_tokens: 2.5 }]) {
      const e = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...extra } as never).then(() => null, (x: unknown) => x);
      assert.ok(e instanceof OpenAI.BadRequestError, `${JSON.stringify(extra)}: a 400, got ${String(e)}`);
    }
    const r = await openai.responses.create({ model: 'm', input: 'hi', max_output_tokens: 1e300 }).then(() => null, (e: unknown) => e);
    assert.ok(r instanceof OpenAI.BadRequestError, `Responses: a 400, got ${String(r)}`);
    const c = await openai.completions.create({ model: 'm', prompt: 'hi', max_tokens: 9007199254740991 }).then(() => null, (e: unknown) => e);
    assert.ok(c instanceof OpenAI.BadRequestError, `completions: a 400, got ${String(c)}`);
    assert.equal(await charged(), before, 'nothing charged');
    alive();
    await noneInFlight();
  });

  test('max_tokens 1e12 and max_tokens over max_model_len on a limited key: 400 as vLLM answers, not charged; its headers say the key is full', async () => {
    const before = await charged();
    const { response } = await openai.chat.completions.create({ model: 'm', max_tokens: 1e12, messages: [{ role: 'user', content: 'hi' }] }).withResponse().then(() => assert.fail('refused'), (e: InstanceType<typeof OpenAI.APIError>) => ({ response: e }));
    assert.equal(response.status, 400);
    // Just over max_model_len: vLLM's own message, at the door.
    const over = await fetch(`${fleet.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer key-limited' },
      body: JSON.stringify({ model: 'm', max_tokens: MAX_MODEL_LEN + 1, messages: [{ role: 'user', content: 'hi' }] })
    });
    const body = await over.json() as { error: { message: string; type: string } };
    assert.equal(over.status, 400);
    assert.equal(body.error.type, 'invalid_request_error');
    assert.match(body.error.message, new RegExp(`'max_tokens' or 'max_completion_tokens' is too large: ${MAX_MODEL_LEN + 1}\\. This model's maximum context length is ${MAX_MODEL_LEN} tokens`));
    assert.equal(over.headers.get('x-ear-backend'), null, 'not sent to an engine');
    const remaining = num(over.headers, 'x-ratelimit-remaining-tokens');
    assert.ok(remaining > PER_MINUTE - 500, `not left charged: remaining ${remaining}`);
    assert.ok(goMs(over.headers.get('x-ratelimit-reset-tokens')!) < 60_000, `reset within the minute: ${over.headers.get('x-ratelimit-reset-tokens')}`);
    // Messages over max_model_len: the same refusal, in Anthropic's shape.
    const m = await anthropic.messages.create({ model: 'm', max_tokens: MAX_MODEL_LEN * 2, stream: true, messages: [{ role: 'user', content: 'hi' }] }).then(() => null, (e: unknown) => e);
    assert.ok(m instanceof Anthropic.BadRequestError, `Messages: a 400, got ${String(m)}`);
    assert.equal(await charged(), before, 'nothing charged');
    alive();
    await noneInFlight();
  });

  test('count_tokens is not charged tokens, and is answered while the key is in debt', async () => {
    const tiny = new Anthropic({ baseURL: fleet.url, apiKey: 'key-tiny', maxRetries: 0, timeout: 30_000 });
    const before = await charged();
    const counted = await tiny.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: text('count', 800) }] });
    assert.ok(counted.input_tokens > 60, `a prompt over the key's minute: ${counted.input_tokens}`);
    assert.equal(await charged(), before, 'count_tokens charges no tokens');
    // Put the key in debt: one Messages request of ~200 tokens against 60 a minute.
    await tiny.messages.create({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: text('debt', 800) }] });
    const refused = await tiny.messages.create({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'more' }] }).then(() => null, (e: unknown) => e);
    assert.ok(refused instanceof Anthropic.RateLimitError, `in debt: Messages refused, got ${String(refused)}`);
    const retryAfter = Number(refused.headers?.get('retry-after'));
    assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 86_400, `Retry-After in whole seconds: ${retryAfter}`);
    const again = await tiny.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'still counted' }] });
    assert.ok(again.input_tokens > 0, 'count_tokens still answered while the key is in debt');
  });

  test('a Messages answer carries anthropic-ratelimit-* and x-ratelimit-*', async () => {
    const { response } = await anthropic.messages.create({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'headers' }] }).withResponse();
    for (const kind of ['requests', 'tokens']) {
      for (const f of ['limit', 'remaining', 'reset']) {
        assert.ok(response.headers.has(`anthropic-ratelimit-${kind}-${f}`), `anthropic-ratelimit-${kind}-${f}`);
        assert.ok(response.headers.has(`x-ratelimit-${f}-${kind}`), `x-ratelimit-${f}-${kind}`);
      }
    }
    assert.equal(response.headers.get('x-ratelimit-limit-tokens'), String(PER_MINUTE));
    alive();
  });
});
