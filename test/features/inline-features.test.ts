import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRegion, Region } from '../../src/core/region.js';
import { createRoutePool, type RoutePool } from '../../src/features/route-pool.js';
import { featureSource, INLINE_FEATURES_MAX_BYTES, THREAD_INLINE_FEATURES_MAX_BYTES } from '../../src/features/inline-features.js';
import { EarError } from '../../src/errors/errors.js';
import type { Endpoint } from '../../src/dialects/dialect.js';

const shared = createRegion({ prefixIndexKeys: 1 << 12, sessions: 64, heapJobs: 64, recordRingOps: 64, scratchSlots: 6 });
const real = createRoutePool(shared, { threads: 1, tokenizer: 'character', blockSize: 16 });
after(() => real.close());

/** The real pool, counting what reaches it. */
function counting (pool: RoutePool): RoutePool & { calls: number } {
  const c = { calls: 0, features: (e: Endpoint, b: Buffer) => { c.calls++; return pool.features(e, b); }, stats: () => pool.stats(), ready: () => pool.ready(), close: () => pool.close() };
  return c;
}

const chat = (content: string, extra: Record<string, unknown> = {}) =>
  Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], ...extra }));

test('character tokenizer: small bodies are computed inline, exactly as the pool computes them; large ones go to the pool', async () => {
  const pool = counting(real);
  const features = featureSource(new Region(shared), { tokenizer: 'character', blockSize: 16 }, pool);
  const small = chat('Read src/index.ts and fix the failing test. '.repeat(20), { cache_salt: 's1', max_tokens: 7 });
  assert.ok(small.length <= INLINE_FEATURES_MAX_BYTES);
  const inline = await features('chat', small);
  assert.equal(pool.calls, 0);
  const pooled = await real.features('chat', small);
  assert.deepEqual(inline, pooled);
  assert.ok(inline.blockKeys.length > 10);
  const large = chat('x'.repeat(INLINE_FEATURES_MAX_BYTES));
  const f = await features('chat', large);
  assert.equal(pool.calls, 1);
  assert.equal(f.blockKeys.length, Math.floor(f.promptTokens / 16));
  // A client's kv_transfer_params are stripped inline too.
  const stripped = await features('completions', Buffer.from(JSON.stringify({ model: 'm', prompt: 'hi', kv_transfer_params: { do_remote_decode: true } })));
  assert.deepEqual(JSON.parse(Buffer.from(stripped.forward!).toString()), { model: 'm', prompt: 'hi' });
});

test('inline errors are rejected promises carrying the client error, as from the pool', async () => {
  const features = featureSource(new Region(shared), { tokenizer: 'character', blockSize: 16 }, counting(real));
  let p: Promise<unknown> | undefined;
  assert.doesNotThrow(() => { p = features('chat', Buffer.from('{"model":')); });
  await assert.rejects(p!, (e: unknown) => e instanceof EarError && e.code === 'EAR_ERR_BAD_JSON');
  await assert.rejects(features('chat', chat('hi', { cache_salt: '' })), (e: unknown) => e instanceof EarError && e.status === 400);
});

test('any other tokenizer always uses the pool, which gets the session id (for its session-affine threads)', async () => {
  const sessions: Array<string | null | undefined> = [];
  const fake: RoutePool = { features: async (e, b, sid) => { sessions.push(sid); return real.features(e, b); }, stats: () => real.stats(), ready: async () => {}, close: async () => {} };
  const features = featureSource(new Region(shared), { tokenizer: 'tiktoken:o200k_base', blockSize: 16 }, fake);
  await features('chat', chat('hi'));
  await features('chat', chat('hi'), 'sess-1');
  assert.deepEqual(sessions, [null, 'sess-1']);
  // With `character`, a large body goes to the pool with its session too.
  const big = featureSource(new Region(shared), { tokenizer: 'character', blockSize: 16 }, fake);
  await big('chat', chat('x'.repeat(INLINE_FEATURES_MAX_BYTES)), 'sess-2');
  assert.deepEqual(sessions, [null, 'sess-1', 'sess-2']);
});

test('a data-plane thread\'s source computes bodies up to its own bound inline, and larger ones in the pool', async () => {
  const pool = counting(real);
  const features = featureSource(new Region(shared), { tokenizer: 'character', blockSize: 16 }, pool, THREAD_INLINE_FEATURES_MAX_BYTES);
  const mid = chat('y'.repeat(THREAD_INLINE_FEATURES_MAX_BYTES - 200));
  assert.ok(mid.length > INLINE_FEATURES_MAX_BYTES && mid.length <= THREAD_INLINE_FEATURES_MAX_BYTES);
  assert.deepEqual(await features('chat', mid), await real.features('chat', mid), 'inline as the pool computes it');
  assert.equal(pool.calls, 0);
  await features('chat', chat('y'.repeat(THREAD_INLINE_FEATURES_MAX_BYTES)));
  assert.equal(pool.calls, 1);
});
