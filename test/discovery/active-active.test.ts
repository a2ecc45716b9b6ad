// Active-active replicas: two `ear serve --discovery k8s` processes watching the same stub API server, sharing
// sessions through Redis. Each follows every KV-events pod on its own (PUB/SUB fans out to both), and a
// session whose turns alternate between the replicas stays on one pod.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApiStub, PODS, pod } from '../fixtures/k8s-api-server.js';
import { configFile, podIp, podSim } from '../fixtures/k8s-pods.js';
import { ADMIN, metric, SERVE_LISTENING, start, stop, type Proc } from '../fixtures/processes.js';
import { alternate, split } from '../fixtures/replicas.js';
import { freePort, RedisServer, redisServerMissing } from '../store/redis-server.js';
import { until } from '../fixtures/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'ear-k8s-aa-'));
const procs: Proc[] = [];
let stub: KubeApiStub | null = null;
let redis: RedisServer | null = null;
after(async () => {
  await Promise.all(procs.map((p) => stop(p)));
  await stub?.close();
  await redis?.kill();
  rmSync(dir, { recursive: true, force: true });
});

test('two replicas follow every KV-events pod and route a session consistently', { skip: redisServerMissing }, async () => {
  redis = await RedisServer.start();
  stub = await new KubeApiStub().start();
  const [port, kvPub, kvReplay] = [await freePort(), await freePort(), await freePort()];
  const names = ['vllm-0', 'vllm-1', 'vllm-2'];
  const ips = names.map((_, i) => podIp(33, i));
  procs.push(...await Promise.all(names.map((n, i) => podSim({ ip: ips[i], port, seed: i, timeScale: 0.02, kv: { pub: kvPub, replay: kvReplay, topic: `kv@${n}@m` } }))));
  for (const [i, n] of names.entries()) stub.apply(PODS, pod(n, ips[i], { app: 'vllm', 'llm-d.ai/model': 'm', 'model.aibrix.ai/kv-events-enabled': 'true' }));
  // As the shared-sessions suite: sticky routing (no migration moves a session on purpose) and a generous store
  // timeout (two shared cores; a timeout would go on from the local table and may split a session).
  const cfg = configFile(['sessionStoreTimeoutMs: 2000', 'discovery:', '  kind: k8s', `  port: ${port}`, `  kvEventsPort: ${kvPub}`, `  kvReplayPort: ${kvReplay}`]);
  const args = ['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--admin-token', ADMIN, '--session-store', redis.url,
    '--policy', 'sticky', '--route-threads', '1', '--discovery', 'k8s', '--kubeconfig', stub.kubeconfig(dir), '--label-selector', 'app=vllm'];
  const [a, b] = await Promise.all([start(args, SERVE_LISTENING), start(args, SERVE_LISTENING)]);
  procs.push(a, b);
  for (const gw of [a, b]) assert.equal(await metric(gw.url, 'ear_discovery_pods', ''), 3);

  const seen = await alternate(a.url, b.url, 'aa', 12, 4);
  assert.deepEqual(split(seen), [], 'every session stayed on one pod across both replicas');
  const used = new Set([...seen.values()].flatMap((s) => [...s]));
  assert.equal(used.size >= 2, true, `sessions spread over ${[...used].join(', ')}`);
  // Both replicas apply the batches of every pod that served, whichever replica sent the request.
  for (const gw of [a, b]) {
    for (const n of used) await until(async () => await metric(gw.url, 'ear_kv_batches_total', `{backend="${n}"}`) > 0, `${gw.url} to apply a KV batch of ${n}`);
  }
  // A pod leaving is seen by both.
  stub.remove(PODS, 'default', 'vllm-2');
  for (const gw of [a, b]) await until(async () => await metric(gw.url, 'ear_discovery_pods', '') === 2, `${gw.url} to drop vllm-2`);
  const again = await alternate(a.url, b.url, 'aa2', 6, 3);
  assert.deepEqual(split(again), []);
  assert.equal([...again.values()].every((s) => !s.has('vllm-2')), true);
});
