// Explicit contexts without engines' caches: the registry on a fake clock (bound, lazy and swept expiry, the
// heap under churn, the KV tiers it reports), and the prefill's retries and bookkeeping through the gateway in
// front of fake engines.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import { getGlobalDispatcher, request } from 'undici';
import { buildConfig } from '../../src/config/index.js';
import { ContextRegistry, type ContextEntry } from '../../src/gateway/contexts.js';
import type { Backend } from '../../src/fleet/backends.js';
import type { RoutingState } from '../../src/fleet/routing-port.js';
import { startGateway } from '../../src/gateway/server.js';
import { fakeEngine } from '../fixtures/fake-engine.js';
import { FirstServingRouting } from '../fixtures/simple-routing.js';
import { bodyFeatures } from '../fixtures/body-features.js';

after(() => getGlobalDispatcher().close());

function entry (id: string, now: number, ttlMs: number, keys = 4): ContextEntry {
  return { id, model: 'm', backendId: 'b0', promptTokens: keys * 16, cachedTokens: 0, blockKeys: new BigUint64Array(keys).map((_, i) => BigInt(i + 1)), createdAt: now, expiresAt: now + ttlMs };
}

const backend = (kvEvents: string | null): Backend => ({ id: 'b0', index: 0, gone: false, draining: false, config: { kvEvents } }) as unknown as Backend;

/** The optional session and index methods of a RoutingState, recorded. */
function stubState (prefix: { gpu: number; engine: number; assumed: number } | null = null) {
  const calls: string[] = [];
  const s = {
    ttl: new Map<string, number>(),
    holdSession (id: string, b: Backend | null, ttlMs: number) { calls.push(`hold ${id} ${b?.id ?? '-'}`); s.ttl.set(id, ttlMs); },
    setSessionTtl (id: string, ttlMs: number) { s.ttl.set(id, ttlMs); },
    prefixOf (keys: BigUint64Array) { return prefix && { ...prefix, total: keys.length }; },
    route: (input: { model: string }) => ({ backend: backend(null), reason: 'x', expectedPrefill: 0, decidedAt: 0, model: input.model }),
    backendChanged () {}
  };
  return { s: s as unknown as RoutingState & typeof s, calls };
}

test('the bound counts reservations; expiry is lazy on read and swept by the timer path, both counted; under create/delete churn the live ones still expire in order', async () => {
  let t = 1_000_000;
  const reg = new Registry();
  const c = new ContextRegistry({ maxContexts: 2, sessionIdleMs: 60_000, registry: reg, clock: () => t, now: () => t, sweepIntervalMs: 0 });
  const { s } = stubState();
  c.attach(s);
  assert.ok(c.reserve());
  assert.ok(c.reserve());
  assert.equal(c.reserve(), false, 'two pending creations fill a bound of 2');
  await c.register(entry('ctx-a', t, 1000), backend(null), 1);
  c.unreserve(); // the second creation failed
  assert.equal(s.ttl.get('ctx-a'), 60_000, 'the session TTL is never below the idle TTL');
  assert.ok(c.reserve());
  await c.register(entry('ctx-b', t, 10 * 3_600_000), backend(null), 36_000);
  assert.equal(s.ttl.get('ctx-b'), 10 * 3_600_000, 'a long context holds its session as long');
  assert.equal(c.reserve(), false);
  t += 1000;
  // ctx-a is past its TTL: reserve() sweeps it, so the slot is free again.
  assert.ok(c.reserve());
  c.unreserve();
  assert.equal(c.local('ctx-a'), undefined);
  assert.equal(s.ttl.get('ctx-a'), 60_000, 'an ended context\'s session goes back to the idle TTL');
  assert.match(await reg.metrics(), /ear_contexts_expired_total 1/);
  assert.match(await reg.metrics(), /ear_contexts_rejected_total\{reason="full"\} 2/);
  // Lazy: a read past the TTL ends it, without a sweep.
  t += 10 * 3_600_000;
  assert.equal(c.local('ctx-b'), undefined);
  assert.match(await reg.metrics(), /ear_contexts_expired_total 2/);
  assert.equal(c.sweep(), 0);

  // Churn: create and delete many; stale heap entries are dropped, live ones still expire in order.
  const big = new ContextRegistry({ maxContexts: 100_000, sessionIdleMs: 1000, registry: new Registry(), clock: () => t, now: () => t, sweepIntervalMs: 0 });
  big.attach(stubState().s);
  for (let i = 0; i < 5000; i++) {
    assert.ok(big.reserve());
    await big.register(entry(`ctx-${i}`, t, 1000 + (i % 97) * 10), backend(null), 5);
    if (i % 5 !== 0) assert.ok(await big.delete(`ctx-${i}`));
  }
  assert.equal(big.size, 1000);
  assert.equal(await big.delete('ctx-1'), false);
  t += 1000 + 48 * 10;
  const swept = big.sweep();
  assert.ok(swept > 0 && swept < 1000, `swept ${swept}`);
  for (let i = 0; i < 5000; i += 5) assert.equal(big.local(`ctx-${i}`) !== undefined, (i % 97) > 48, `ctx-${i}`);
  t += 10_000;
  big.sweep();
  assert.equal(big.size, 0);
  await c.close();
  await big.close();
});

test('the KV tier: precise mode reads the engines\' tiers; approximate mode says assumed or unknown', () => {
  const t = 0;
  const e = entry('ctx-x', t, 1000, 8);
  const tier = (p: { gpu: number; engine: number; assumed: number } | null, kvEvents: string | null) => {
    const c = new ContextRegistry({ maxContexts: 4, sessionIdleMs: 1000, registry: new Registry(), clock: () => t, now: () => t, sweepIntervalMs: 0 });
    c.attach(stubState(p).s);
    return c.kvLocation(e, backend(kvEvents));
  };
  const precise = 'tcp://127.0.0.1:1';
  assert.deepEqual(tier({ gpu: 8, engine: 8, assumed: 8 }, precise), { tier: 'gpu', blocks_gpu: 8, blocks_offloaded: 0, blocks_total: 8 });
  assert.deepEqual(tier({ gpu: 2, engine: 8, assumed: 0 }, precise), { tier: 'cpu', blocks_gpu: 2, blocks_offloaded: 6, blocks_total: 8 });
  assert.deepEqual(tier({ gpu: 0, engine: 0, assumed: 8 }, precise), { tier: 'assumed', blocks_gpu: 0, blocks_offloaded: 0, blocks_total: 8 });
  assert.deepEqual(tier({ gpu: 0, engine: 0, assumed: 0 }, precise), { tier: 'evicted', blocks_gpu: 0, blocks_offloaded: 0, blocks_total: 8 });
  assert.equal(tier({ gpu: 0, engine: 0, assumed: 8 }, null).tier, 'assumed');
  assert.equal(tier({ gpu: 0, engine: 0, assumed: 0 }, null).tier, 'unknown');
  assert.equal(tier(null, precise).tier, 'unknown', 'a state without an index');
});

const features = bodyFeatures;

test('the prefill is retried past a dead engine and a 5xx, sent once with max_tokens 1, and balances the bookkeeping', async () => {
  const dead = await fakeEngine('m', 'die-before');
  const bad = await fakeEngine('m', 'status500');
  const good = await fakeEngine();
  after(() => Promise.all([dead.close(), bad.close(), good.close()]));
  let routing!: FirstServingRouting;
  const gw = await startGateway({
    config: buildConfig({ host: '127.0.0.1', port: 0, healthIntervalMs: 60000, metricsIntervalMs: 0 }, { backend: [dead, bad, good].map((e, i) => `${e.url},id=e${i}`) }),
    state: (bs) => (routing = new FirstServingRouting(bs)),
    features
  });
  after(() => gw.close());
  const url = `http://127.0.0.1:${gw.port}/v1/context`;
  const r = await request(url, { method: 'POST', body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ttl_seconds: 60, stream: true, max_tokens: 500, kv_transfer_params: { do_remote_decode: true } }) });
  const doc = await r.body.json() as { backend: string; prompt_tokens: number; cached_tokens: number };
  assert.equal(r.statusCode, 200, JSON.stringify(doc));
  assert.equal(doc.backend, 'e2');
  assert.equal(doc.prompt_tokens, 3);
  assert.equal(doc.cached_tokens, 0);
  assert.deepEqual(good.received.at(-1), { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, stream: false });
  assert.equal(bad.received.length, 1);
  assert.match(await gw.metrics.text(), /ear_upstream_retries_total 2/);
  assert.deepEqual([...routing.inFlight.values()], [0, 0, 0]);
  assert.equal(routing.finishedOk, 1);
  assert.equal(routing.finishedFailed, 2);
  assert.equal(gw.contexts.size, 1);

  // A lone failing engine: its 5xx goes to the client on the last attempt; nothing is registered.
  good.mode = 'status500';
  dead.mode = 'status500';
  const f = await request(url, { method: 'POST', body: JSON.stringify({ model: 'm', prompt: 'x' }) });
  assert.equal(f.statusCode, 500);
  await f.body.dump();
  assert.equal(gw.contexts.size, 1);
});
