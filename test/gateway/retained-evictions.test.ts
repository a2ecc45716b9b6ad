// ear_retained_prefix_evictions_total end to end: `ear serve` (precise mode, following the engines' KV events) in
// front of two `ear sim` engines with 64 blocks of KV each. A session's turn asks its prefix kept
// (agentic_context's kv_retention_ttl_seconds: the simulator's model never ends in a tool call, and a hint makes the
// same retention record). Work that fits beside it, and evictions on the other engine, count nothing; other
// sessions' prompts that need the retained prefix's blocks on its own engine evict it, and the counter rises.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { buildConfig } from '../../src/config/index.js';
import { withTestThreads } from '../fixtures/http-threads-env.js';
import { startEar, type Ear } from '../../src/gateway/ear.js';
import { complete, eventSim, prompt, type EventSim } from '../kvevents/sim-rig.js';
import { until } from '../fixtures/wait.js';

/** 64 blocks of 16 tokens (character tokenizer: a token a byte). */
const SIM = { numGpuBlocksOverride: 64, maxModelLen: 4096 };
let sims: EventSim[] = [];
let ear: Ear;
let base: string;

before(async () => {
  sims = [await eventSim(0, SIM), await eventSim(1, SIM)];
  ear = await startEar(buildConfig(
    withTestThreads({ host: '127.0.0.1', port: 0, policy: 'sticky', routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 0, retention: { maxShare: 0.9 } }),
    { backend: sims.map((s, i) => `${s.sim.url},id=sim-${i},kv-events=${s.spec.kvEvents},replay=${s.spec.replay}`) }
  ));
  await ear.kvSynced();
  base = `http://127.0.0.1:${ear.gateway.port}`;
});
after(async () => {
  await ear.close();
  await Promise.all(sims.map((s) => s.sim.close()));
});

async function evictionsMetric (): Promise<number> {
  const text = await (await request(`${base}/metrics`)).body.text();
  const m = /^ear_retained_prefix_evictions_total (\S+)$/m.exec(text);
  assert.ok(m !== null, 'the gateway exports ear_retained_prefix_evictions_total');
  return Number(m[1]);
}

/** Blocks each engine's events stored and removed, as the kv-events thread applied them. */
async function applied (pod: number): Promise<{ stored: number; removed: number }> {
  const s = (await ear.kvEvents.stats()).backends.find((b) => b.index === pod && b.active);
  return { stored: s?.blocksStored ?? 0, removed: s?.blocksRemoved ?? 0 };
}

test('the retention settings reach the routing host', () => {
  assert.equal(ear.routing.host.retention.opts.maxShare, 0.9);
});

test('a retained prefix evicted on its engine is counted; work beside it and evictions elsewhere are not', async () => {
  const { host } = ear.routing;
  // Session a: 400 tokens (25 blocks), asked kept for 10 min.
  const r = await request(`${base}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 'a' },
    body: JSON.stringify({ model: 'm', prompt: prompt(400, 1), max_tokens: 1, vllm_xargs: { agentic_context: { kv_retention_ttl_seconds: 600 } } })
  });
  assert.equal(r.statusCode, 200, await r.body.text());
  const pod = Number(String(r.headers['x-ear-backend']).slice('sim-'.length));
  const other = 1 - pod;
  const key = host.sessionKey('a');
  // The record is made when the turn ends; it is watched once the engine's events of its blocks are applied.
  await until(() => host.retention.of(key)?.pod === pod, 'session a retained on its engine');
  await until(() => host.retention.stats().watched === 1, 'the retained prefix\'s blocks held in the index');
  assert.equal(await evictionsMetric(), 0);

  // Control: a 160-token prompt fits beside it on its engine; on the other engine, prompts of 60 blocks evict each other.
  const here = await applied(pod);
  const there = await applied(other);
  await complete(sims[pod].sim, prompt(160, 2));
  for (const seed of [3, 4, 5]) await complete(sims[other].sim, prompt(960, seed));
  await until(async () => (await applied(pod)).stored >= here.stored + 10, 'the small prompt\'s blocks applied');
  await until(async () => (await applied(other)).removed > there.removed, 'evictions on the other engine applied');
  assert.equal((await applied(pod)).removed, here.removed, 'nothing evicted on the retained prefix\'s engine');
  host.expireRetention(performance.timeOrigin + performance.now());
  assert.equal(await evictionsMetric(), 0, 'no retained prefix was evicted');
  assert.equal(host.retention.of(key)?.pod, pod, 'still retained');

  // Other sessions' prompts of 60 blocks on its engine: its blocks are the least recently used free ones.
  for (const seed of [6, 7]) await complete(sims[pod].sim, prompt(960, seed));
  await until(async () => (await evictionsMetric()) === 1, 'the eviction counted (the upkeep looks every 100 ms)');
  assert.equal(host.retention.of(key), null, 'its record ended: the blocks are not kept any more');
  assert.equal(host.retention.stats().evictions, 1);
});
