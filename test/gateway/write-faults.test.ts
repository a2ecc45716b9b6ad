// A throw inside a response write (issue 28, finding 1: rfc3339Seconds threw RangeError from the rate-limit
// headers, the upstream connection swallowed it, and the request hung with ear_backend_in_flight at 1). Whatever
// throws while an answer is written, the request ends (a 500 in its API's shape while the head is not out), its
// in-flight count and token charge are released, the fault is counted and reported, and the gateway serves on.
// `ear serve` (in this process, so the throw can be planted) in front of a real `ear sim`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { earInFront } from '../fixtures/ear-in-front.js';
import { metric, SIM_LISTENING, start, stop, type Proc } from '../fixtures/processes.js';
import { RequestLimits } from '../../src/request/client-gate.js';
import { faultCount } from '../../src/request/faults.js';

describe('a throw while an answer is written', () => {
  let sim: Proc;
  let url: string;
  const headers = RequestLimits.prototype.headers;
  before(async () => {
    sim = await start(['sim', '--host', '127.0.0.1', '--port', '0', '--served-model-name', 'm', '--time-scale', '0.02'], SIM_LISTENING);
  });
  after(async () => {
    RequestLimits.prototype.headers = headers;
    await stop(sim);
  });
  /** The gateway, started in the test (earInFront closes it after the file). */
  const gateway = async (): Promise<void> => {
    ({ url } = await earInFront(sim.url, '', { apiKeys: ['key-limited'], rateLimits: { keys: { 'key-limited': { tokensPerMinute: 6000 } } } }));
  };

  /** Makes every rate-limit header throw as rfc3339Seconds did past year 275760 (while `fn` runs). */
  async function throwingHeaders (fn: () => Promise<void>): Promise<void> {
    RequestLimits.prototype.headers = function () { throw new RangeError('Invalid time value'); };
    try {
      await fn();
    } finally {
      RequestLimits.prototype.headers = headers;
    }
  }

  const net = async (): Promise<number> => await metric(url, 'ear_token_rate_tokens_total', '{step="charged"}') -
    await metric(url, 'ear_token_rate_tokens_total', '{step="refunded"}') + await metric(url, 'ear_token_rate_tokens_total', '{step="extra"}');
  const inFlight = async (): Promise<number> => await metric(url, 'ear_backend_in_flight', '{backend="e0"}');

  test('JSON, streamed and Messages answers: 500 in the API\'s shape, nothing left in flight, the charge settled, the fault counted', async () => {
    await gateway();
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'key-limited', maxRetries: 0, timeout: 30_000 });
    const anthropic = new Anthropic({ baseURL: url, apiKey: 'key-limited', maxRetries: 0, timeout: 30_000 });
    const faults = faultCount('response-write');
    const netBefore = await net();
    await throwingHeaders(async () => {
      const json = await openai.chat.completions.create({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (e: unknown) => e);
      assert.ok(json instanceof OpenAI.InternalServerError, `a 500, got ${String(json)}`);
      assert.equal((json.error as { code: string }).code, 'EAR_ERR_INTERNAL');
      assert.ok(json.headers?.get('x-request-id'), 'the answer names its request');
      const streamed = await openai.chat.completions.create({ model: 'm', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (e: unknown) => e);
      assert.ok(streamed instanceof OpenAI.InternalServerError, `a streamed request: a 500 before its head, got ${String(streamed)}`);
      const messages = await anthropic.messages.create({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (e: unknown) => e);
      assert.ok(messages instanceof Anthropic.InternalServerError, `Messages: a 500, got ${String(messages)}`);
      assert.equal((messages.error as { error: { type: string } }).error.type, 'api_error');
    });
    assert.ok(faultCount('response-write') >= faults + 3, 'each fault reported');
    assert.equal(await inFlight(), 0, 'nothing left in flight');
    // Each request's charge was settled: what is held is no more than the engine's usage (a few hundred tokens at
    // most), not the requests' estimates left standing. Then the key is served as before.
    assert.ok(await net() - netBefore < 400, `the charges were settled: ${await net() - netBefore}`);
    const ok = await openai.chat.completions.create({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'again' }] }).withResponse();
    assert.equal(ok.response.status, 200);
    assert.ok(ok.response.headers.has('x-ratelimit-remaining-tokens'));
    assert.equal(await metric(url, 'ear_faults_total', '{where="response-write"}'), faultCount('response-write'));
  });
});
