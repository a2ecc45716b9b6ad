// Precise mode end to end: `ear sim` engines publishing KV events and the real gateway (startEar) following
// them. A prompt an engine has cached is in the gateway's prefix index with no routing history: warmed on the
// engine directly, after a gateway restart, or routed by another gateway replica; a prefix-aware policy then
// routes it to that engine.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { getGlobalDispatcher, request } from 'undici';
import pino from 'pino';
import { buildConfig } from '../../src/config/index.js';
import { withTestThreads } from '../fixtures/http-threads-env.js';
import { startEar, assumedTtlMs, type Ear } from '../../src/gateway/ear.js';
import { PRECISE_ASSUMED_TTL_MS } from '../../src/core/defaults.js';
import { computeFeatures } from '../../src/features/features.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import { parseKvEventsConfig } from '../../src/sim/kv-events-config.js';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { until } from '../fixtures/wait.js';

const silent = pino({ level: 'silent' });
const tokenizer = createTokenizerSync('hf:qwen3');
let sims: SimServer[] = [];
const ears: Ear[] = [];

async function gateway (policy = 'round-robin'): Promise<Ear> {
  const ear = await startEar(buildConfig(
    withTestThreads({ host: '127.0.0.1', port: 0, policy, tokenizer: 'hf:qwen3', routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 0 }),
    { backend: sims.map((s, i) => `${s.url},id=sim-${i},kv-events=${s.kvEventsEndpoint},replay=${s.kvReplayEndpoint}`) }
  ));
  ears.push(ear);
  await ear.kvSynced();
  return ear;
}

async function stop (ear: Ear): Promise<void> {
  ears.splice(ears.indexOf(ear), 1);
  await ear.close();
}

const scratch = new Map<BlockHasher, { ptr: number; bytes: number }>();

/** A hasher over one scratch area of the gateway's region (the area is reused to pass keys to longestPrefix). */
function hasherFor (ear: Ear): BlockHasher {
  const area = ear.routing.host.index.region.claimScratch();
  const h = new BlockHasher(ear.routing.host.index.region, area);
  scratch.set(h, area);
  return h;
}

/** Deepest match of `body` in a gateway's index (keys from the gateway's own feature path), and per-pod counts. */
function matchIn (ear: Ear, hasher: BlockHasher, body: object): { blocks: number; deepest: number; counts: number[] } {
  const keys = computeFeatures({ tokenizer, hasher, blockSize: 16 }, 'chat', Buffer.from(JSON.stringify(body))).blockKeys;
  const ix = ear.routing.host.index;
  // longestPrefix reads keys in the gateway's shared memory: copy them back into the hasher's scratch area.
  const area = scratch.get(hasher)!;
  new BigUint64Array(ix.region.memory.buffer, area.ptr, keys.length).set(keys);
  const deepest = ix.longestPrefix({ ptr: area.ptr, count: keys.length });
  return { blocks: keys.length, deepest, counts: sims.map((_, i) => ix.counts[i]) };
}

before(async () => {
  sims = await Promise.all([0, 1].map((i) => startSim({
    host: '127.0.0.1', port: 0, profile: 'h100-llama-3.1-8b', timeScale: 0.02, tokenizer: 'hf:qwen3', servedModelName: ['m'],
    enablePromptTokensDetails: true, seed: i, logger: silent, kvEventFormat: i === 0 ? 'array' : 'map', kvHashFormat: i === 0 ? 'int' : 'bytes',
    kvEventsConfig: parseKvEventsConfig({ enable_kv_cache_events: true, endpoint: 'tcp://127.0.0.1:*', replay_endpoint: 'tcp://127.0.0.1:*' })
  })));
});
after(async () => {
  for (const e of [...ears]) await e.close();
  await Promise.all(sims.map((s) => s.close()));
  await getGlobalDispatcher().close();
});

const system = 'You are a careful coding agent working in a large repository. Read before you write. '.repeat(20);
const chat = (user: string, sys = system) => ({ model: 'm', messages: [{ role: 'system', content: sys }, { role: 'user', content: user }], max_tokens: 4 });

async function post (url: string, body: object): Promise<{ backend: string; cached: number }> {
  const r = await request(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const doc = await r.body.json() as { usage?: { prompt_tokens_details?: { cached_tokens?: number } } };
  assert.equal(r.statusCode, 200, JSON.stringify(doc));
  return { backend: String(r.headers['x-ear-backend'] ?? ''), cached: doc.usage?.prompt_tokens_details?.cached_tokens ?? 0 };
}

test('a prompt warmed on an engine directly is in the gateway\'s index for that engine, and stays there across a gateway restart', async () => {
  let ear = await gateway();
  assert.equal(assumedTtlMs(buildConfig({}, { backend: ['http://127.0.0.1:1,kv-events=tcp://127.0.0.1:2'] }), ear.gateway.backends), PRECISE_ASSUMED_TTL_MS);
  const hasher = hasherFor(ear);
  const body = chat('list the files under src/ and explain the layout');
  // Straight to the engines: the gateway never routed these prompts.
  await post(sims[1].url, body);
  // (another system prompt: the two share no block)
  const body0 = chat('open a pull request with the fix and describe it', 'You review pull requests for a storage engine team. '.repeat(20));
  await post(sims[0].url, body0);
  await until(() => {
    const m = matchIn(ear, hasher, body);
    return m.blocks > 20 && m.counts[1] === m.blocks;
  }, 'the warmed prompt in the index');
  assert.equal(matchIn(ear, hasher, body).counts[0], 0);
  // /metrics carries the thread's counters.
  const metrics = await (await request(`http://127.0.0.1:${ear.gateway.port}/metrics`)).body.text();
  assert.match(metrics, /ear_kv_blocks_stored_total\{backend="sim-1"\} [1-9]/);
  assert.match(metrics, /ear_kv_index_blocks\{backend="sim-1",tier="gpu"\} [1-9]/);
  assert.match(metrics, /ear_kv_apply_lag_seconds\{quantile="0.99"\}/);

  // A new gateway (no routing history, engines idle): the start replay brings the engines' caches in.
  await stop(ear);
  ear = await gateway('prefix-cache');
  const h2 = hasherFor(ear);
  await until(() => {
    const m = matchIn(ear, h2, body);
    return m.counts[1] === m.blocks && m.counts[0] === 0;
  }, 'the prompt in the restarted gateway\'s index');
  // A prefix-aware policy (AIBrix's prefix-cache) sends the prompt where the engine says it is cached.
  await until(() => {
    const m = matchIn(ear, h2, body0);
    return m.counts[0] === m.blocks && m.counts[1] === 0;
  }, 'the other prompt on engine 0');
  const routed = await post(`http://127.0.0.1:${ear.gateway.port}`, body);
  assert.equal(routed.backend, 'sim-1');
  assert.equal((await post(`http://127.0.0.1:${ear.gateway.port}`, body0)).backend, 'sim-0');
  assert.ok(routed.cached >= (matchIn(ear, h2, body).blocks - 1) * 16, `cached ${routed.cached}`);
  // A reload that removes the engine purges what its events said.
  await ear.gateway.reload(buildConfig({}, { backend: [`${sims[0].url},id=sim-0,kv-events=${sims[0].kvEventsEndpoint},replay=${sims[0].kvReplayEndpoint}`] }));
  await ear.kvSynced();
  // The purge lands when the thread next applies its ops (the forgetPod on the ring, the dropped subscriber).
  await until(() => matchIn(ear, h2, body).counts[1] === 0, 'the removed engine purged from the index');
  await stop(ear);
});

test('what one gateway replica routes, another replica\'s index learns from the engine', async () => {
  const a = await gateway();
  const b = await gateway();
  const hb = hasherFor(b);
  const body = chat('run the test suite and summarise the failures');
  const { backend } = await post(`http://127.0.0.1:${a.gateway.port}`, body);
  const pod = Number(backend.slice('sim-'.length));
  await until(() => {
    const m = matchIn(b, hb, body);
    return m.counts[pod] === m.blocks;
  }, 'replica b to learn the prompt');
  // The engine holds it: a second request for it there is served mostly from cache.
  const again = await post(sims[pod].url, body);
  assert.ok(again.cached >= matchIn(b, hb, body).blocks * 16 - 16, `cached ${again.cached}`);
  await stop(a);
  await stop(b);
});
