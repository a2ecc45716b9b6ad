import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Registry } from 'prom-client';
import { fullBucket, isFull, RateLimiter, retryAfterSeconds, take, type BucketLimit, type ClientLimit } from '../../src/request/rate-limit.js';
import { ClientGate, type AdmittedClient } from '../../src/request/client-gate.js';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { EarError } from '../../src/errors/errors.js';

test('a bucket admits its burst at once, then one request per 1/rate seconds, and says how long to wait', () => {
  const lim: BucketLimit = { requestsPerSecond: 2, burst: 3 };
  const b = fullBucket(lim, 0);
  assert.deepEqual([take(b, lim, 0), take(b, lim, 0), take(b, lim, 0)], [0, 0, 0]);
  assert.equal(take(b, lim, 0), 500, 'one token comes back in 500 ms');
  assert.equal(take(b, lim, 100), 400, 'a refused request takes nothing');
  assert.equal(take(b, lim, 500), 0);
  assert.equal(take(b, lim, 400), 500, 'time that goes backwards adds nothing');
  assert.equal(isFull(b, lim, 500 + 1500), true);
  assert.equal(isFull(b, lim, 500 + 1000), false);
  assert.deepEqual([retryAfterSeconds(1), retryAfterSeconds(1000), retryAfterSeconds(1001), retryAfterSeconds(0.2)], [1, 1, 2, 1]);
});

test('property: in any window of length t a bucket admits at most burst + rate·t requests', () => {
  const limit = fc.record({ requestsPerSecond: fc.double({ min: 0.01, max: 1000, noNaN: true }), burst: fc.integer({ min: 1, max: 50 }) });
  const gaps = fc.array(fc.double({ min: 0, max: 2000, noNaN: true }), { minLength: 1, maxLength: 300 });
  fc.assert(fc.property(limit, gaps, (lim, ds) => {
    const b = fullBucket(lim, 0);
    const admitted: number[] = [];
    let t = 0;
    for (const d of ds) {
      t += d;
      if (take(b, lim, t) === 0) admitted.push(t);
    }
    // Every window that starts and ends at an admitted request is the tightest of its size.
    for (let i = 0; i < admitted.length; i++) {
      for (let j = i; j < admitted.length; j++) {
        const window = admitted[j] - admitted[i];
        const bound = lim.burst + lim.requestsPerSecond * window / 1000;
        if (j - i + 1 > bound + 1e-6) return false;
      }
    }
    return true;
  }), { numRuns: 300 });
});

test('the limiter keeps one client per id, at most maxBuckets, least recently used out, counted idle or active', () => {
  const lim: BucketLimit = { requestsPerSecond: 1, burst: 1 };
  const limit: ClientLimit = { requests: lim, tokensPerMinute: null };
  const r = new RateLimiter(2);
  const takeOf = (id: string, now: number): number => take(r.client(id, limit, now).requests!, lim, now);
  assert.equal(takeOf('a', 0), 0);
  assert.equal(takeOf('b', 0), 0);
  assert.ok(takeOf('a', 0) > 0, 'a is empty');
  // c evicts b (least recently used; empty at t=0: active).
  assert.equal(takeOf('c', 0), 0);
  assert.equal(r.size, 2);
  assert.deepEqual({ ...r.stats }, { buckets: 2, evictedIdle: 0, evictedActive: 1 });
  assert.ok(takeOf('a', 0) > 0, 'a survived, still empty');
  // At t=5 s, c has refilled: evicting it loses nothing.
  assert.equal(takeOf('d', 5000), 0);
  assert.deepEqual({ ...r.stats }, { buckets: 2, evictedIdle: 1, evictedActive: 1 });
  assert.throws(() => new RateLimiter(0), RangeError);
});

test('the client gate: API keys by digest, each key its own bucket or the default, per IP without keys; 401 and 429 with Retry-After', () => {
  let now = 0;
  const keyed = buildConfig({ apiKeys: ['k1', 'k2', 'k3'], rateLimits: { default: { requestsPerSecond: 1, burst: 1 }, keys: { k1: { requestsPerSecond: 0.1, burst: 2 } } } });
  const gate = new ClientGate(keyed, new Registry(), () => now);
  const ip = (): string => { throw new Error('no per-IP limit applies with keys'); };
  assert.equal((gate.admit('/v1/completions', 'Bearer nope', ip) as EarError).code, 'EAR_ERR_UNAUTHORIZED');
  assert.equal((gate.admit('/v1/completions', '', ip) as EarError).code, 'EAR_ERR_UNAUTHORIZED');
  assert.equal((gate.admit('/v1/completions', 'k1', ip) as EarError).code, 'EAR_ERR_UNAUTHORIZED', 'Bearer is required');
  const u1 = gate.admit('/v1/completions', 'Bearer k1', ip);
  assert.match((u1 as { user: string }).user, /^key:[A-Za-z0-9_-]{43}$/);
  assert.ok(!(gate.admit('/v1/completions', 'Bearer k1', ip) instanceof EarError), 'k1 has a burst of 2');
  const refused = gate.admit('/v1/completions', 'Bearer k1', ip) as EarError;
  assert.equal(refused.code, 'EAR_ERR_RATE_LIMITED');
  assert.equal(refused.status, 429);
  assert.equal(refused.retryAfterSeconds, 10, 'a token in 10 s at 0.1/s');
  assert.ok(!(gate.admit('/v1/completions', 'Bearer k2', ip) instanceof EarError), 'k2: the default bucket, its own');
  assert.ok(!(gate.admit('/v1/completions', 'Bearer k3', ip) instanceof EarError));
  assert.equal((gate.admit('/v1/completions', 'Bearer k2', ip) as EarError).retryAfterSeconds, 1);
  now = 1000;
  assert.ok(!(gate.admit('/v1/completions', 'Bearer k2', ip) instanceof EarError), 'refilled after 1 s');

  const open = new ClientGate(buildConfig({ rateLimits: { perIp: { requestsPerSecond: 1, burst: 1 } } }), new Registry(), () => now);
  assert.equal((open.admit('/v1/models', 'Bearer anything', () => '10.0.0.1') as AdmittedClient).user, null);
  assert.equal((open.admit('/v1/models', '', () => '10.0.0.1') as EarError).code, 'EAR_ERR_RATE_LIMITED');
  assert.ok(!(open.admit('/v1/models', '', () => '10.0.0.2') instanceof EarError), 'another address, another bucket');
  const off = new ClientGate(buildConfig({}), new Registry(), () => now);
  for (let i = 0; i < 100; i++) assert.deepEqual(off.admit('/v1/completions', '', () => { throw new Error('not read when off'); }), { user: null, limits: null });
});

test('the metric counts refusals by scope and route only: no key or address becomes a label', async () => {
  const registry = new Registry();
  const gate = new ClientGate(buildConfig({ apiKeys: ['secret-key-1'], rateLimits: { default: { requestsPerSecond: 0.001, burst: 1 }, maxBuckets: 16 } }), registry, () => 0);
  for (let i = 0; i < 3; i++) gate.admit('/v1/chat/completions', 'Bearer secret-key-1', () => '');
  const text = await registry.metrics();
  assert.match(text, /ear_rate_limited_total\{scope="default",route="\/v1\/chat\/completions"\} 2/);
  assert.match(text, /ear_rate_limit_buckets 1/);
  assert.doesNotMatch(text, /secret-key-1/);
});

test('rateLimits and a backend\'s apiKey: defaults off, validated with the field named', () => {
  const d = buildConfig({});
  assert.deepEqual(d.rateLimits, { default: null, keys: {}, perIp: null, maxBuckets: 65_536 });
  const c = buildConfig({ apiKeys: ['a'], rateLimits: { default: { requestsPerSecond: 2.5 }, keys: { a: { requestsPerSecond: 1, burst: 4 } }, maxBuckets: 100 } }, { backend: ['http://x:1,id=e,api-key=sk-engine'] });
  assert.deepEqual(c.rateLimits, { default: { requestsPerSecond: 2.5, burst: 3, tokensPerMinute: null }, keys: { a: { requestsPerSecond: 1, burst: 4, tokensPerMinute: null } }, perIp: null, maxBuckets: 100 });
  assert.equal(c.backends[0].apiKey, 'sk-engine');
  assert.equal(buildConfig({ backends: [{ url: 'http://x:1', apiKey: 'k' }] }).backends[0].apiKey, 'k');
  assert.equal(d.backends.length, 0);
  assert.equal(buildConfig({}, { backend: ['http://x:1'] }).backends[0].apiKey, null);
  const cases: Array<[Record<string, unknown>, Record<string, unknown>, RegExp]> = [
    [{ rateLimits: 5 }, {}, /config rateLimits: must be a mapping/],
    [{ rateLimits: { perKey: {} } }, {}, /config rateLimits\.perKey: unknown field/],
    [{ rateLimits: { default: { burst: 3 } } }, {}, /config rateLimits\.default\.requestsPerSecond: is required \(or tokensPerMinute\)/],
    [{ rateLimits: { default: { requestsPerSecond: 0 } } }, {}, /config rateLimits\.default\.requestsPerSecond: must be a number in \[0\.001, 1000000\]/],
    [{ rateLimits: { default: { requestsPerSecond: 1, burst: 0 } } }, {}, /config rateLimits\.default\.burst: must be an integer in \[1, 1000000\]/],
    [{ rateLimits: { default: { requestsPerSecond: 1, rate: 2 } } }, {}, /config rateLimits\.default\.rate: unknown field/],
    [{ rateLimits: { maxBuckets: 0 } }, {}, /config rateLimits\.maxBuckets: must be an integer in \[1, /],
    [{ apiKeys: ['a'], rateLimits: { keys: { zzzzzz: { requestsPerSecond: 1 } } } }, {}, /config rateLimits\.keys\.<key zzzz…>: is not one of apiKeys/],
    [{ apiKeys: ['a'], rateLimits: { keys: { a: null } } }, {}, /config rateLimits\.keys\.<key a…>: must be a mapping/],
    [{ apiKeys: ['a'], rateLimits: { perIp: { requestsPerSecond: 1 } } }, {}, /config rateLimits\.perIp: applies only without apiKeys/],
    [{ rateLimits: { default: { requestsPerSecond: 1 } } }, {}, /config rateLimits\.default: limits API keys, and no apiKeys are configured/],
    [{}, { backend: ['http://x:1,api-key=has space'] }, /backends\[0\]\.apiKey: must be a non-empty string of printable ASCII/],
    [{ backends: [{ url: 'http://x:1', apiKey: 'a\r\nx-evil: 1' }] }, {}, /backends\[0\]\.apiKey: must be a non-empty string of printable ASCII/]
  ];
  for (const [file, flags, re] of cases) assert.throws(() => buildConfig(file, flags), (e: unknown) => e instanceof ConfigError && re.test((e as Error).message), String(re));
});
