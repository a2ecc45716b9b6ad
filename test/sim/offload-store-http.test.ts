import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { RemoteOffloadStore } from '../../src/sim/offload-store-client.js';
import type { SimServer } from '../../src/sim/server.js';
import { post, sim, text } from './http-helpers.js';
import { until } from '../fixtures/wait.js';

const common = { stopProbability: 0, enablePromptTokensDetails: true, servedModelName: ['m'] };
let host: SimServer;
let user: SimServer;
before(async () => {
  host = await sim({ ...common, kvOffloadServe: true, kvOffloadCapacity: 4096 });
  user = await sim({ ...common, kvOffloadStore: host.url });
});
after(async () => { await Promise.all([host.close(), user.close()]); });

// vLLM leaves prompt_tokens_details null when nothing was cached.
const cached = (r: { json: any }): number => r.json.usage.prompt_tokens_details?.cached_tokens ?? 0;

test('a prompt computed on the hosting sim is loaded by the other: cached_tokens counts the loaded blocks', async () => {
  const prompt = text(400, 5);
  const first = await post(`${host.url}/v1/completions`, { model: 'm', prompt, max_tokens: 2 });
  assert.equal(first.status, 200);
  assert.equal(cached(first), 0);
  assert.ok(host.offloadStore!.size >= 25, `the host stored ${host.offloadStore!.size} blocks`);
  const second = await post(`${user.url}/v1/completions`, { model: 'm', prompt, max_tokens: 2 });
  assert.equal(second.status, 200);
  // 400 tokens: 24 whole blocks of 16 before the last token (which is always computed).
  assert.equal(cached(second), 384);
  assert.equal(user.engine.offloadLoadedTokens, 384);
  assert.equal(user.engine.stats().prefixCacheHits, 0, 'nothing was in the user sim\'s own GPU cache');
  const stats = await (await fetch(`${user.url}/ear/v1/kv/store/stats`)).json() as any;
  assert.equal(stats.role, 'client');
  assert.equal(stats.engine.loaded_tokens, 384);
  assert.equal(stats.client.url, host.url);
  assert.equal(stats.client.prefetchErrors, 0);
});

test('blocks computed on the other sim are saved to the host\'s store after their step, then hit there', async () => {
  const prompt = text(300, 6);
  const before = host.offloadStore!.stores;
  const r = await post(`${user.url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: prompt }], max_tokens: 3 });
  assert.equal(r.status, 200);
  assert.equal(cached(r), 0);
  await until(() => host.offloadStore!.stores >= before + 18, 'the saves to reach the host');
  const again = await post(`${host.url}/v1/chat/completions`, { model: 'm', messages: [{ role: 'user', content: prompt }], max_tokens: 3 });
  assert.ok(cached(again) >= 288, JSON.stringify(again.json.usage));
  assert.ok(host.engine.offloadLoadedTokens >= 288);
  const stats = await (await fetch(`${host.url}/ear/v1/kv/store/stats`)).json() as any;
  assert.equal(stats.role, 'host');
  assert.equal(stats.store.capacity, 4096);
  assert.ok(stats.store.hits >= 24 + 18);
});

test('the store endpoints refuse malformed digests; only the host serves them', async () => {
  const bad = await post(`${host.url}/ear/v1/kv/store/lookup`, { block_hashes: ['zz'] });
  assert.equal(bad.status, 400);
  assert.match(bad.json.error.message, /block_hashes\[0\] must be a 64-character/);
  assert.equal((await post(`${host.url}/ear/v1/kv/store/save`, { hashes: [] })).status, 400);
  const ok = await post(`${host.url}/ear/v1/kv/store/lookup`, { block_hashes: ['0'.repeat(64)] });
  assert.deepEqual(ok.json, { hits: 0 });
  assert.equal((await post(`${user.url}/ear/v1/kv/store/lookup`, { block_hashes: [] })).status, 404);
});

test('a store that cannot be reached costs nothing but the hit: requests prefill and succeed', async () => {
  const lost = await sim({ ...common, kvOffloadStore: 'http://127.0.0.1:1' });
  try {
    const r = await post(`${lost.url}/v1/completions`, { model: 'm', prompt: text(100, 8), max_tokens: 2 });
    assert.equal(r.status, 200);
    assert.equal(cached(r), 0);
    assert.equal(lost.offloadClient!.stats().prefetchErrors, 1);
    await until(() => lost.offloadClient!.stats().saveErrors > 0, 'the failed save');
  } finally {
    await lost.close();
  }
});

test('offload options are checked at start-up', async () => {
  await assert.rejects(sim({ kvOffloadServe: true, kvOffloadStore: 'http://127.0.0.1:9' }), /kvOffloadStore: cannot be combined with kvOffloadServe/);
  await assert.rejects(sim({ kvOffloadStore: 'ftp://store:1' }), /kvOffloadStore: must be an http:\/\/host:port URL/);
  await assert.rejects(sim({ kvOffloadStore: 'http://store:1/path' }), /kvOffloadStore: must be an http:\/\/host:port URL/);
  await assert.rejects(sim({ kvOffloadServe: true, kvOffloadCapacity: 0 }), /kvOffloadCapacity: must be an integer of blocks/);
});

test('the client answers each request from its own prefetch, and bounds what it queues for saving', async () => {
  const client = new RemoteOffloadStore(`${host.url}/`, { maxPending: 5 });
  try {
    const hasher = host.engine.hasher;
    const prompt = Array.from(text(200, 31), (c) => c.charCodeAt(0));
    const digests = hasher.extend([], prompt, null, null);
    client.save(digests.slice(0, 8));
    assert.equal(client.stats().droppedBlocks, 3, 'a store that falls behind loses the oldest saves, not memory');
    client.flush();
    await until(() => client.stats().savedBlocks === 5, 'the save');
    // Blocks 3..7 are stored, block 0 is not: a prefix lookup from block 0 finds nothing.
    assert.equal(await client.prefetch(digests), 0);
    // Same content hashed again: a prefetch for other digest objects does not answer for these.
    assert.equal(client.lookup(hasher.extend([], prompt, null, null), 12), 0);
    client.save(digests.slice(0, 3));
    client.flush();
    await until(() => client.stats().savedBlocks === 8, 'the second save');
    const fresh = hasher.extend([], prompt, null, null);
    assert.equal(await client.prefetch(fresh), 8);
    assert.equal(client.lookup(fresh, 12), 8);
    assert.equal(client.lookup(fresh, 5), 5, 'capped by what the engine may load');
    assert.equal(client.lookup(digests, 12), 0, 'the earlier prefetch still answers for its own request');
  } finally {
    client.close();
  }
});
