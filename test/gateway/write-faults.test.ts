// A throw inside a response write (issue 28, finding 1: rfc3339Seconds threw RangeError from the rate-limit
// headers, the upstream connection swallowed it, and the request hung with ear_backend_in_flight at 1). Whatever
// throws while an answer is written, the request ends (a 500 in its API's shape while the head is not out), its
// in-flight count and token charge are released, the fault is counted and reported, and the gateway serves on.
// `ear serve` in front of a real `ear sim`, the throw planted in each of its threads (the main thread and any
// data-plane threads: fixtures/throwing-limit-headers.ts) and switched on by a file.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { metric, simFleet, type SimFleet } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

describe('a throw while an answer is written', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-write-faults-'));
  const flag = join(dir, 'throw');
  const plant = new URL('../fixtures/throwing-limit-headers.js', import.meta.url).href;
  let f: SimFleet;
  let url: string;
  before(async () => {
    f = await simFleet(['healthIntervalMs: 60000', 'metricsIntervalMs: 0', 'apiKeys: [key-limited]', 'rateLimits: { keys: { key-limited: { tokensPerMinute: 6000 } } }'],
      () => [['--time-scale', '0.02']], { gatewayEnv: { NODE_OPTIONS: `--import ${plant}`, EAR_TEST_THROWING_HEADERS: flag } });
    url = f.url;
  });
  after(async () => {
    await f?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Makes every rate-limit header throw as rfc3339Seconds did past year 275760 (while `fn` runs). */
  async function throwingHeaders (fn: () => Promise<void>): Promise<void> {
    writeFileSync(flag, '');
    try {
      await fn();
    } finally {
      unlinkSync(flag);
    }
  }

  /** The gateway's log lines that report a fault met while writing an answer (one per fault, with its request id). */
  const reported = (): string[] => f.gateway.out().split('\n').filter((l) => l.includes('unexpected fault (response-write)'));
  const net = async (): Promise<number> => await metric(url, 'ear_token_rate_tokens_total', '{step="charged"}') -
    await metric(url, 'ear_token_rate_tokens_total', '{step="refunded"}') + await metric(url, 'ear_token_rate_tokens_total', '{step="extra"}');
  const inFlight = async (): Promise<number> => await metric(url, 'ear_backend_in_flight', '{backend="sim-0"}');

  test('JSON, streamed and Messages answers: 500 in the API\'s shape, nothing left in flight, the charge settled, the fault counted', async () => {
    const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'key-limited', maxRetries: 0, timeout: 30_000 });
    const anthropic = new Anthropic({ baseURL: url, apiKey: 'key-limited', maxRetries: 0, timeout: 30_000 });
    const faults = reported().length;
    const netBefore = await net();
    const ids: string[] = [];
    await throwingHeaders(async () => {
      const json = await openai.chat.completions.create({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (e: unknown) => e);
      assert.ok(json instanceof OpenAI.InternalServerError, `a 500, got ${String(json)}`);
      assert.equal((json.error as { code: string }).code, 'EAR_ERR_INTERNAL');
      const id = json.headers?.get('x-request-id');
      assert.ok(id, 'the answer names its request');
      ids.push(id);
      const streamed = await openai.chat.completions.create({ model: 'm', max_tokens: 64, stream: true, messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (e: unknown) => e);
      assert.ok(streamed instanceof OpenAI.InternalServerError, `a streamed request: a 500 before its head, got ${String(streamed)}`);
      const messages = await anthropic.messages.create({ model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hello' }] }).then(() => null, (e: unknown) => e);
      assert.ok(messages instanceof Anthropic.InternalServerError, `Messages: a 500, got ${String(messages)}`);
      assert.equal((messages.error as { error: { type: string } }).error.type, 'api_error');
    });
    // Each fault reported (the process's log comes through its pipe after the answers).
    await until(() => reported().length >= faults + 3, { what: () => `three faults reported: ${reported().join('\n')}` });
    assert.ok(reported().some((l) => l.includes(`"requestId":"${ids[0]}"`)), 'with its request\'s id');
    // Counted done a moment after the answer (a data-plane thread reports it in its next batch); a leak never gets to 0.
    await until(async () => (await inFlight()) === 0, 'nothing left in flight');
    // Each request's charge was settled: what is held is no more than the engine's usage (a few hundred tokens at
    // most), not the requests' estimates left standing. Then the key is served as before.
    assert.ok(await net() - netBefore < 400, `the charges were settled: ${await net() - netBefore}`);
    const ok = await openai.chat.completions.create({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'again' }] }).withResponse();
    assert.equal(ok.response.status, 200);
    assert.ok(ok.response.headers.has('x-ratelimit-remaining-tokens'));
    // Counted once each, summed over the threads: as many as were reported.
    assert.equal(await metric(url, 'ear_faults_total', '{where="response-write"}'), reported().length);
  });
});
