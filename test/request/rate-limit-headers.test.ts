// The rate-limit headers and Retry-After never throw and never state what no client can act on (issue 28: a debt of
// 9e15 tokens made rfc3339Seconds throw past year 275760, and Retry-After read 180143985094756 or 2e+298).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { goDuration, MAX_HEADER_DELAY_MS, rateLimitHeaders, rfc3339Seconds } from '../../src/request/rate-limit-headers.js';
import { retryAfterSeconds } from '../../src/request/rate-limit.js';
import { EarError, errorFields } from '../../src/errors/errors.js';
import { charge, correct, fullTokenBucket, remainingTokens, untilFull } from '../../src/request/token-rate.js';

const WALL = Date.parse('2026-11-28T10:00:00Z');
const EXTREMES = [9007199254740991 * 60_000, 1e300, Infinity, -Infinity, NaN, -5, 0, 8.64e15];

test('every reset and Retry-After is within a day and whole; a date is always a date', () => {
  for (const resetMs of EXTREMES) {
    const state = { requests: { limit: 10, remaining: -3, resetMs }, tokens: { limit: 600, remaining: NaN, resetMs } };
    const h = Object.fromEntries([...rateLimitHeaders(state, 'openai', WALL), ...rateLimitHeaders(state, 'anthropic', WALL)]);
    const reset = Date.parse(h['anthropic-ratelimit-tokens-reset']);
    assert.ok(reset >= WALL && reset <= WALL + MAX_HEADER_DELAY_MS, `${resetMs}: ${h['anthropic-ratelimit-tokens-reset']}`);
    assert.match(h['x-ratelimit-reset-tokens'], /^(0s|[0-9]+ms|([0-9]+h)?([0-9]+m)?[0-9]+(\.[0-9]+)?s)$/);
    assert.equal(h['x-ratelimit-remaining-requests'], '0');
    assert.equal(h['x-ratelimit-remaining-tokens'], '0');
    const s = retryAfterSeconds(resetMs);
    assert.ok(Number.isInteger(s) && s >= 1 && s <= 86_400, `Retry-After for ${resetMs}: ${s}`);
  }
  assert.equal(goDuration(1e300), '24h0m0s');
  assert.equal(rfc3339Seconds(1e300), '9999-12-31T23:59:59Z');
  assert.equal(rfc3339Seconds(NaN), '1970-01-01T00:00:00Z');
  assert.equal(rfc3339Seconds(Date.parse('2025-01-15T14:23:59.2Z')), '2025-01-15T14:24:00Z');
});

test('an error\'s Retry-After is whole seconds in [1, a day], whatever the thrower computed', () => {
  for (const [given, want] of [[2.0000000000000002e+298, '86400'], [0.2, '1'], [NaN, '1'], [30, '30']] as const) {
    const { headers } = errorFields(new EarError('EAR_ERR_RATE_LIMITED', 'x', { retryAfterSeconds: given }));
    assert.equal(Object.fromEntries(headers)['retry-after'], want, String(given));
  }
});

test('a token bucket takes no charge that is not a number, and stays finite', () => {
  const b = fullTokenBucket(600, 0);
  assert.equal(charge(b, 600, 0, NaN), 0);
  assert.equal(b.level, 600);
  charge(b, 600, 0, Infinity);
  correct(b, 600, 0, -Infinity);
  assert.ok(Number.isFinite(b.level));
  assert.equal(remainingTokens(b, 600, 0), 600);
  assert.ok(Number.isFinite(untilFull(b, 600, 0)));
});
