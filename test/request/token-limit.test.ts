// Tokens per minute (rateLimits.*.tokensPerMinute): the bucket's bound and refill as properties, the rate-limit
// headers in both styles, the client gate's charge and correction, and the configuration.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { charge, correct, debtWait, fullTokenBucket, isTokenBucketFull, remainingTokens, untilFull } from '../../src/request/token-rate.js';
import { goDuration, rateLimitHeaders, rfc3339Seconds } from '../../src/request/rate-limit-headers.js';
import { ClientGate, RateLimitRefusal, limitsOf, type AdmittedClient } from '../../src/request/client-gate.js';
import { admissionCost, usedTokens } from '../../src/request/token-charge.js';
import type { RequestContext } from '../../src/request/context.js';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { EarError } from '../../src/errors/errors.js';

/** A run of requests against one bucket: each admitted one ends later, having used some other number of tokens. */
const runs = fc.record({
  perMinute: fc.integer({ min: 60, max: 1_000_000 }),
  steps: fc.array(fc.record({
    gapMs: fc.double({ min: 0, max: 90_000, noNaN: true }),
    kind: fc.constantFrom('request', 'request', 'end'),
    // Relative to the limit: most requests are smaller than a minute's tokens, some are larger.
    size: fc.double({ min: 0, max: 2.5, noNaN: true }),
    pick: fc.nat()
  }), { minLength: 1, maxLength: 200 })
});

interface Taken { t: number; tokens: number; admission: boolean }

test('property: between two admissions at a and b, what is taken from a up to b is at most a minute\'s tokens plus the refill over b − a, and with b\'s own charge at most that plus b\'s charge', () => {
  fc.assert(fc.property(runs, ({ perMinute, steps }) => {
    const b = fullTokenBucket(perMinute, 0);
    const taken: Taken[] = [];
    const open: number[] = [];
    let t = 0;
    for (const s of steps) {
      t += s.gapMs;
      const tokens = Math.round(s.size * perMinute);
      if (s.kind === 'request') {
        const wait = charge(b, perMinute, t, tokens);
        if (wait === 0) {
          taken.push({ t, tokens, admission: true });
          open.push(tokens);
        } else {
          assert.ok(b.level < 0, 'refused only in debt');
          // Waiting what it said lets the next one in.
          const probe = { ...b };
          assert.equal(debtWait(probe, perMinute, t + wait + 1e-6), 0);
        }
      } else if (open.length > 0) {
        const charged = open.splice(s.pick % open.length, 1)[0];
        const delta = tokens - charged;
        correct(b, perMinute, t, delta);
        taken.push({ t, tokens: delta, admission: false });
      }
      assert.ok(b.level <= perMinute + 1e-9, 'never more than a minute\'s tokens held');
    }
    for (let i = 0; i < taken.length; i++) {
      if (!taken[i].admission) continue;
      let sum = 0;
      for (let j = i; j < taken.length; j++) {
        if (taken[j].admission) {
          const bound = perMinute + perMinute * (taken[j].t - taken[i].t) / 60_000;
          const eps = 1e-9 * (bound + Math.abs(sum));
          if (sum > bound + eps) return false;
          if (sum + taken[j].tokens > bound + taken[j].tokens + eps) return false;
        }
        sum += taken[j].tokens;
      }
    }
    return true;
  }), { numRuns: 300 });
});

test('property: refill is linear at tokensPerMinute/60 s up to a minute\'s tokens, and "reset" is exactly when the bucket is full again', () => {
  fc.assert(fc.property(fc.integer({ min: 60, max: 10_000_000 }), fc.double({ min: -3, max: 1, noNaN: true }), fc.double({ min: 0, max: 200_000, noNaN: true }), (perMinute, fill, idleMs) => {
    const b = { level: fill * perMinute, at: 1000 };
    const before = b.level;
    const reset = untilFull({ ...b }, perMinute, 1000);
    assert.ok(Math.abs(reset - (perMinute - before) * 60_000 / perMinute) < 1e-6 * Math.max(1, reset));
    const later = { ...b };
    const rem = remainingTokens(later, perMinute, 1000 + idleMs);
    const expect = Math.min(perMinute, before + perMinute * idleMs / 60_000);
    assert.ok(Math.abs(later.level - expect) <= 1e-6 * perMinute, `${later.level} vs ${expect}`);
    assert.equal(rem, Math.max(0, Math.floor(later.level)));
    assert.equal(isTokenBucketFull({ ...b }, perMinute, 1000 + reset + 1e-6), true);
    if (reset > 1) assert.equal(isTokenBucketFull({ ...b }, perMinute, 1000 + reset - 1), false);
    return true;
  }), { numRuns: 500 });
});

test('a bucket in debt refuses until refill pays the debt back; the end\'s correction charges extra or refunds, never past full', () => {
  const b = fullTokenBucket(6000, 0); // 100 tokens a second
  assert.equal(charge(b, 6000, 0, 5000), 0);
  assert.equal(charge(b, 6000, 0, 4000), 0, 'not in debt (1000 left): let in, and it overshoots');
  assert.equal(b.level, -3000);
  assert.equal(charge(b, 6000, 0, 1), 30_000, 'in debt: 30 s until it is paid back');
  assert.equal(charge(b, 6000, 30_000, 10), 0);
  correct(b, 6000, 30_000, -9000 + 100); // the 9000 charged used 100
  assert.equal(b.level, 6000, 'the refund stops at a full bucket');
  correct(b, 6000, 30_000, 7000); // one that used 7000 more than charged
  assert.equal(remainingTokens(b, 6000, 30_000), 0);
  assert.equal(untilFull(b, 6000, 30_000), 70_000);
});

test('headers: OpenAI\'s style writes Go durations until the limit is back to its initial state; Anthropic\'s the RFC 3339 moment it is', () => {
  assert.deepEqual([0, 0.2, 12, 999, 1000, 1500, 1001, 59_999, 60_000, 360_000, 83_450, 3_600_000, 3_600_250, 7_384_000].map(goDuration),
    ['0s', '1ms', '12ms', '999ms', '1s', '1.5s', '1.001s', '59.999s', '1m0s', '6m0s', '1m23.45s', '1h0m0s', '1h0m0.25s', '2h3m4s']);
  const wall = Date.UTC(2025, 0, 15, 14, 23, 59, 400);
  assert.equal(rfc3339Seconds(wall), '2025-01-15T14:24:00Z', 'rounded up to the second');
  assert.equal(rfc3339Seconds(Date.UTC(2025, 0, 15, 14, 24, 0, 0)), '2025-01-15T14:24:00Z');
  const state = { requests: { limit: 20, remaining: 19, resetMs: 200 }, tokens: { limit: 150_000, remaining: 149_984, resetMs: 6.4 } };
  assert.deepEqual(rateLimitHeaders(state, 'openai', wall), [
    ['x-ratelimit-limit-requests', '20'], ['x-ratelimit-remaining-requests', '19'], ['x-ratelimit-reset-requests', '200ms'],
    ['x-ratelimit-limit-tokens', '150000'], ['x-ratelimit-remaining-tokens', '149984'], ['x-ratelimit-reset-tokens', '7ms']
  ]);
  assert.deepEqual(rateLimitHeaders({ ...state, tokens: { limit: 40_000, remaining: 0, resetMs: 360_000 } }, 'anthropic', wall), [
    ['anthropic-ratelimit-requests-limit', '20'], ['anthropic-ratelimit-requests-remaining', '19'], ['anthropic-ratelimit-requests-reset', '2025-01-15T14:24:00Z'],
    ['anthropic-ratelimit-tokens-limit', '40000'], ['anthropic-ratelimit-tokens-remaining', '0'], ['anthropic-ratelimit-tokens-reset', '2025-01-15T14:30:00Z']
  ]);
  assert.deepEqual(rateLimitHeaders({ requests: null, tokens: { limit: 10, remaining: 10, resetMs: 0 } }, 'openai', wall).map(([k]) => k),
    ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'], 'only the limits the client has');
  assert.deepEqual(rateLimitHeaders({ requests: null, tokens: null }, 'anthropic', wall), []);
});

test('the gate: a token-limited key is charged prompt + max_tokens, corrected at the end, refused (429, Retry-After) while in debt on the token routes only; its headers follow', () => {
  let now = 0;
  const config = buildConfig({ apiKeys: ['t', 'both'], rateLimits: { keys: { t: { tokensPerMinute: 600 }, both: { requestsPerSecond: 1, burst: 2, tokensPerMinute: 1200 } } } });
  const registry = new Registry();
  const gate = new ClientGate(config, registry, () => now);
  const ip = (): string => '';
  const admit = (route: '/v1/chat/completions' | '/v1/models', key: string): AdmittedClient | EarError => gate.admit(route, `Bearer ${key}`, ip);
  const a = admit('/v1/chat/completions', 't') as AdmittedClient;
  assert.ok(a.limits !== null && a.limits.limitsTokens);
  assert.deepEqual(a.limits.headers('openai', 0), [['x-ratelimit-limit-tokens', '600'], ['x-ratelimit-remaining-tokens', '600'], ['x-ratelimit-reset-tokens', '0s']]);
  assert.equal(admissionCost(100, 400), 500);
  assert.equal(admissionCost(100, null), 100);
  assert.equal(a.limits.chargeTokens(500), null);
  assert.equal(a.limits.chargeTokens(500), null, 'charged once');
  assert.equal(a.limits.state().tokens!.remaining, 100);
  const b = admit('/v1/chat/completions', 't') as AdmittedClient;
  assert.equal(b.limits!.chargeTokens(300), null, 'not in debt: let in');
  const c = admit('/v1/chat/completions', 't') as AdmittedClient;
  const refused = c.limits!.chargeTokens(10)!;
  assert.ok(refused instanceof RateLimitRefusal && refused.code === 'EAR_ERR_RATE_LIMITED' && refused.status === 429);
  assert.equal(refused.retryAfterSeconds, 20, '200 in debt at 10 a second');
  assert.match(refused.message, /tokens per minute \(limit 600, requested 10\)/);
  c.limits!.settleTokens(0); // never charged: nothing to correct
  const atDoor = admit('/v1/chat/completions', 't');
  assert.ok(atDoor instanceof RateLimitRefusal, 'in debt: refused before its body is read');
  assert.equal(limitsOf(atDoor), atDoor.limits, 'a refusal carries its limits, for the headers');
  assert.ok(!(admit('/v1/models', 't') instanceof EarError), 'a model list costs no tokens');
  // The first used 50 of its 500: 450 back, out of debt.
  a.limits.settleTokens(50);
  a.limits.settleTokens(50);
  assert.equal(a.limits.state().tokens!.remaining, 250, 'corrected once');
  assert.ok(!(admit('/v1/chat/completions', 't') instanceof EarError));
  b.limits!.settleTokens(900); // used 600 more than charged
  now = 1000;
  const h = Object.fromEntries(b.limits!.headers('openai', 0));
  assert.equal(h['x-ratelimit-remaining-tokens'], '0');
  assert.equal(h['x-ratelimit-reset-tokens'], '1m34s', '600 − (250 − 600 + 10) = 940 tokens at 10 a second');

  // Both limits: the request bucket's headers too, and its refusal takes no tokens.
  const k = admit('/v1/chat/completions', 'both') as AdmittedClient;
  assert.deepEqual(k.limits!.headers('openai', 0).slice(0, 3), [['x-ratelimit-limit-requests', '2'], ['x-ratelimit-remaining-requests', '1'], ['x-ratelimit-reset-requests', '1s']]);
  assert.ok(!(admit('/v1/chat/completions', 'both') instanceof EarError));
  const third = admit('/v1/chat/completions', 'both');
  assert.ok(third instanceof RateLimitRefusal && /requests per second/.test(third.message));
  assert.equal(Object.fromEntries(third.limits.headers('openai', 0))['x-ratelimit-remaining-tokens'], '1200');
});

test('what a request used: the engine\'s usage; else its prompt and a token per content event once output came; a 2xx unseen keeps its charge; anything else nothing', () => {
  const ctx = (o: Partial<Pick<RequestContext, 'usage' | 'firstTokenAt' | 'contentEvents'>>, status: number): RequestContext =>
    ({ usage: null, firstTokenAt: 0, contentEvents: 0, features: { promptTokens: 120 }, outcome: { status }, ...o }) as unknown as RequestContext;
  assert.equal(usedTokens(ctx({ usage: { promptTokens: 100, completionTokens: 7, cachedTokens: null } }, 200)), 107);
  assert.equal(usedTokens(ctx({ firstTokenAt: 5, contentEvents: 9 }, 200)), 129, 'a stream without include_usage');
  assert.equal(usedTokens(ctx({ firstTokenAt: 5, contentEvents: 3 }, 0)), 123, 'the client went away mid-stream');
  assert.equal(usedTokens(ctx({}, 200)), null, 'answered, body unseen (ext_proc, response body mode NONE): the charge stands');
  assert.equal(usedTokens(ctx({}, 503)), 0, 'no backend: refunded whole');
  assert.equal(usedTokens(ctx({}, 0)), 0, 'went away while queued');
});

test('SIGHUP: a kept key keeps its token debt under its new limit; a limit it gains starts full; one it loses stops charging', () => {
  let now = 0;
  const gate = new ClientGate(buildConfig({ apiKeys: ['k'], rateLimits: { keys: { k: { tokensPerMinute: 600 } } } }), new Registry(), () => now);
  const first = gate.admit('/v1/completions', 'Bearer k', () => '') as AdmittedClient;
  assert.equal(first.limits!.chargeTokens(900), null);
  gate.reconfigure(buildConfig({ apiKeys: ['k'], rateLimits: { keys: { k: { tokensPerMinute: 6000, requestsPerSecond: 5 } } } }));
  const second = gate.admit('/v1/completions', 'Bearer k', () => '');
  assert.ok(second instanceof RateLimitRefusal, 'still 300 in debt');
  assert.equal(second.retryAfterSeconds, 3, 'paid back at the new rate, 100 a second');
  now = 3000;
  const third = gate.admit('/v1/completions', 'Bearer k', () => '') as AdmittedClient;
  assert.deepEqual(third.limits!.headers('openai', 0).slice(0, 2), [['x-ratelimit-limit-requests', '5'], ['x-ratelimit-remaining-requests', '4']], 'a new request bucket starts full');
  gate.reconfigure(buildConfig({ apiKeys: ['k'], rateLimits: { keys: { k: { requestsPerSecond: 5 } } } }));
  first.limits!.settleTokens(0); // the limit is gone: nothing to correct, nothing thrown
  const fourth = gate.admit('/v1/completions', 'Bearer k', () => '') as AdmittedClient;
  assert.equal(fourth.limits!.limitsTokens, false);
  assert.ok(fourth.limits!.headers('openai', 0).every(([n]) => n.endsWith('-requests')));
});

test('the bound: clients past maxBuckets go least recently used first; one in token debt counts as active (its debt is forgotten)', async () => {
  let now = 0;
  const registry = new Registry();
  const gate = new ClientGate(buildConfig({ rateLimits: { perIp: { tokensPerMinute: 600 }, maxBuckets: 2 } }), registry, () => now);
  const from = (ip: string): AdmittedClient | EarError => gate.admit('/v1/chat/completions', '', () => ip);
  assert.equal((from('a') as AdmittedClient).limits!.chargeTokens(1000), null);
  assert.ok(from('a') instanceof RateLimitRefusal);
  from('b');
  now = 1000;
  from('c'); // a goes: in debt
  assert.ok(!(from('a') instanceof EarError), 'a came back full: the bound forgot its debt'); // b goes: full
  assert.deepEqual({ ...gate.limiter.stats }, { buckets: 2, evictedIdle: 1, evictedActive: 1 });
  const text = await registry.metrics();
  assert.match(text, /ear_token_rate_limited_total\{scope="ip",route="\/v1\/chat\/completions"\} 1/);
  assert.match(text, /ear_token_rate_tokens_total\{step="charged"\} 1000/);
  assert.match(text, /ear_rate_limit_evicted_total\{state="active"\} 1/);
});

test('config: tokensPerMinute beside requestsPerSecond and burst, alone or together, validated with the field named', () => {
  const c = buildConfig({ apiKeys: ['a'], rateLimits: { default: { tokensPerMinute: 90000 }, keys: { a: { requestsPerSecond: 2, tokensPerMinute: 1000 } } } });
  assert.deepEqual(c.rateLimits.default, { requestsPerSecond: null, burst: null, tokensPerMinute: 90000 });
  assert.deepEqual(c.rateLimits.keys.a, { requestsPerSecond: 2, burst: 2, tokensPerMinute: 1000 });
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ rateLimits: { perIp: { tokensPerMinute: 0 } } }, /config rateLimits\.perIp\.tokensPerMinute: must be an integer in \[1, 1000000000\]/],
    [{ rateLimits: { perIp: { tokensPerMinute: 1.5 } } }, /config rateLimits\.perIp\.tokensPerMinute: must be an integer/],
    [{ rateLimits: { perIp: { tokensPerMinute: 100, burst: 3 } } }, /config rateLimits\.perIp\.burst: needs requestsPerSecond/],
    [{ rateLimits: { perIp: {} } }, /config rateLimits\.perIp\.requestsPerSecond: is required \(or tokensPerMinute\)/],
    [{ rateLimits: { perIp: { tokens: 5 } } }, /config rateLimits\.perIp\.tokens: unknown field \(known: requestsPerSecond, burst, tokensPerMinute\)/]
  ];
  for (const [file, re] of cases) assert.throws(() => buildConfig(file), (e: unknown) => e instanceof ConfigError && re.test((e as Error).message), String(re));
});
