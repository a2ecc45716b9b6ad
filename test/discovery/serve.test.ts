// `ear serve --discovery k8s --kubeconfig FILE` end to end: a real gateway process watching the stub API server,
// pods that are real `ear sim` engines on their own loopback addresses. Requests are served by the discovered
// pods, a KV-events pod is followed (its batches reach the gateway's index), and pods that leave stop serving.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApiStub, PODS, pod } from '../fixtures/k8s-api-server.js';
import { configFile, podIp, podSim } from '../fixtures/k8s-pods.js';
import { ADMIN, metric, SERVE_LISTENING, start, stop, turn, type Proc } from '../fixtures/processes.js';
import { freePort } from '../store/redis-server.js';
import { until } from '../fixtures/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'ear-k8s-serve-'));
const procs: Proc[] = [];
let stub: KubeApiStub | null = null;
after(async () => {
  await Promise.all(procs.map((p) => stop(p)));
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('ear serve --discovery k8s serves through the pods it finds and follows the KV events of those that opt in', async () => {
  stub = await new KubeApiStub().start();
  const [port, kvPub, kvReplay] = [await freePort(), await freePort(), await freePort()];
  const ips = [podIp(31, 0), podIp(31, 1)];
  const sims = await Promise.all([
    podSim({ ip: ips[0], port, seed: 0, kv: { pub: kvPub, replay: kvReplay, topic: 'kv@vllm-kv@m' } }),
    podSim({ ip: ips[1], port, seed: 1 })
  ]);
  procs.push(...sims);
  stub.apply(PODS, pod('vllm-kv', ips[0], { app: 'vllm', 'llm-d.ai/model': 'm', 'model.aibrix.ai/kv-events-enabled': 'true' }));
  stub.apply(PODS, pod('vllm-plain', ips[1], { app: 'vllm', 'llm-d.ai/model': 'm' }));
  const cfg = configFile(['discovery:', '  kind: k8s', `  port: ${port}`, `  kvEventsPort: ${kvPub}`, `  kvReplayPort: ${kvReplay}`]);
  const gw = await start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--admin-token', ADMIN,
    '--discovery', 'k8s', '--kubeconfig', stub.kubeconfig(dir), '--namespace', 'default', '--label-selector', 'app=vllm'], SERVE_LISTENING);
  procs.push(gw);
  assert.match(gw.out(), /"backends":\["vllm-kv","vllm-plain"\]/, 'the pods were found before the gateway listened');
  assert.equal(await metric(gw.url, 'ear_discovery_pods', ''), 2);

  // Sessions spread over both pods; the KV pod's batches reach the gateway under its pod name.
  const served = new Set<string>();
  for (let i = 0; i < 8; i++) served.add((await turn(gw.url, `s-${i}`, [{ role: 'user', content: `session ${i}: list the files and run the build please` }])).backend);
  assert.deepEqual([...served].sort(), ['vllm-kv', 'vllm-plain']);
  await until(async () => await metric(gw.url, 'ear_kv_batches_total', '{backend="vllm-kv"}') > 0, 'KV batches from vllm-kv');
  assert.equal(await metric(gw.url, 'ear_kv_batches_total', '{backend="vllm-plain"}'), 0, 'a pod that did not opt in is not followed');

  // The plain pod terminates: it stops serving, and the gateway's list follows.
  stub.apply(PODS, pod('vllm-plain', ips[1], { app: 'vllm' }, { deleting: true }));
  await until(async () => await metric(gw.url, 'ear_discovery_pods', '') === 1, 'one pod left');
  await until(async () => !(await (await fetch(`${gw.url}/metrics`)).text()).includes('ear_backend_up{backend="vllm-plain"}'), 'vllm-plain drained and gone');
  for (let i = 0; i < 4; i++) assert.equal((await turn(gw.url, `s-${i}`, [{ role: 'user', content: `session ${i}: list the files and run the build please` }])).backend, 'vllm-kv');
  stub.remove(PODS, 'default', 'vllm-plain');

  // A new pod joins while the gateway runs.
  stub.apply(PODS, pod('vllm-plain-2', ips[1], { app: 'vllm' }));
  await until(async () => await metric(gw.url, 'ear_backend_up', '{backend="vllm-plain-2"}') === 1, 'vllm-plain-2 up');
  assert.equal(await metric(gw.url, 'ear_discovery_reload_failures_total', ''), 0);
  assert.equal(await metric(gw.url, 'ear_discovery_reloads_total', '') >= 2, true);
});

test('ear serve --discovery refuses a bad discovery config with a message that names the field', async () => {
  await assert.rejects(start(['serve', '--port', '0', '--discovery', 'k8s', '--namespace', 'Not_A_Namespace'], SERVE_LISTENING), /discovery\.namespace: "Not_A_Namespace" is not a namespace name/);
  await assert.rejects(start(['serve', '--port', '0', '--discovery', 'k8s', '--kubeconfig', join(dir, 'missing.yaml')], SERVE_LISTENING), /ear serve: discovery: .*missing\.yaml/);
  // No kubeconfig anywhere and not in a pod: a clear refusal, not client-node's silent http://localhost:8080.
  await assert.rejects(start(['serve', '--port', '0', '--discovery', 'k8s'], SERVE_LISTENING, [], { HOME: dir, KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '' }),
    /ear serve: discovery: no Kubernetes API server: give a kubeconfig/);
});
