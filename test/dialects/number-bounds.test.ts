// Every number a body names is bounded at the door, in each API (issue 28): counts are safe integers in range
// (1e300 and 9007199254740991 are not counts, whatever Number.isInteger says), sampling numbers keep vLLM's ranges.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseRequestBody } from '../../src/features/request-body.js';
import { EarError } from '../../src/errors/errors.js';
import type { Endpoint } from '../../src/dialects/dialect.js';

const BODIES: Record<Exclude<Endpoint, 'count_tokens'>, Record<string, unknown>> = {
  chat: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  completions: { model: 'm', prompt: 'hi' },
  messages: { model: 'm', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] },
  responses: { model: 'm', input: 'hi' }
};
const MAX_FIELD: Record<keyof typeof BODIES, string> = { chat: 'max_tokens', completions: 'max_tokens', messages: 'max_tokens', responses: 'max_output_tokens' };

const parse = (endpoint: Endpoint, body: Record<string, unknown>): unknown => parseRequestBody(endpoint, Buffer.from(JSON.stringify(body)));
function refused (endpoint: Endpoint, body: Record<string, unknown>, what: string): void {
  assert.throws(() => parse(endpoint, body), (e: unknown) => e instanceof EarError && e.code === 'EAR_ERR_BAD_REQUEST' && e.status === 400, `${endpoint} ${what}`);
}

test('max_tokens and its kin: a safe integer up to 2^31 - 1 in every API', () => {
  for (const [endpoint, body] of Object.entries(BODIES) as Array<[keyof typeof BODIES, Record<string, unknown>]>) {
    const field = MAX_FIELD[endpoint];
    for (const v of [9007199254740991, 1e300, 1e12, 2 ** 31, -1, 2.5, '8']) refused(endpoint, { ...body, [field]: v }, `${field}: ${v}`);
    assert.equal((parse(endpoint, { ...body, [field]: 2 ** 31 - 1 }) as { maxTokens: number }).maxTokens, 2 ** 31 - 1);
  }
  refused('chat', { ...BODIES.chat, max_completion_tokens: 1e300 }, 'max_completion_tokens');
  refused('chat', { ...BODIES.chat, max_tokens: 1e300, max_completion_tokens: 8 }, 'max_tokens beside max_completion_tokens');
  assert.equal((parse('chat', { ...BODIES.chat, max_tokens: 4, max_completion_tokens: 8 }) as { maxTokens: number }).maxTokens, 8);
});

test('sampling numbers keep vLLM\'s ranges in every API; what is in range passes', () => {
  const bad: Array<Record<string, unknown>> = [{ top_k: 2 ** 60 }, { top_k: -2 }, { temperature: -0.5 }, { top_p: 0 }, { top_p: 1.5 }, { min_p: 2 },
    { presence_penalty: 3 }, { frequency_penalty: -2.5 }, { repetition_penalty: 0 }, { n: 1e9 }, { n: 0 }, { min_tokens: 1e300 }, { seed: 1e300 }];
  for (const [endpoint, body] of Object.entries(BODIES) as Array<[Endpoint, Record<string, unknown>]>) {
    for (const extra of bad) refused(endpoint, { ...body, ...extra }, JSON.stringify(extra));
    parse(endpoint, { ...body, temperature: 0, top_p: 1, top_k: -1, min_p: 0, presence_penalty: -2, frequency_penalty: 2, repetition_penalty: 1.1, n: 1, seed: -7 });
    parse(endpoint, { ...body, seed: 9223372036854775807 }); // int64's largest, as vLLM takes it
  }
  // count_tokens takes no sampling numbers: they are not read.
  parse('count_tokens', { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1e300 });
});
