// `ear epp --discovery k8s`: the endpoint picker's endpoints are the pods the stub API server lists, named as
// POD_IP:PORT in x-gateway-destination-endpoint, and a pod that leaves is no longer picked.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApiStub, PODS, pod } from '../fixtures/k8s-api-server.js';
import { configFile, podIp, podSim } from '../fixtures/k8s-pods.js';
import { stop, type Proc } from '../fixtures/processes.js';
import { freePort } from '../store/redis-server.js';
import { chat, epp, metric, type Epp } from '../epp/epp-process.js';
import { until } from '../fixtures/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'ear-k8s-epp-'));
const procs: Proc[] = [];
let picker: Epp | null = null;
let stub: KubeApiStub | null = null;
after(async () => {
  await picker?.close();
  await Promise.all(procs.map((p) => stop(p)));
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

test('ear epp --discovery k8s picks among the discovered pods, by POD_IP:PORT', async () => {
  stub = await new KubeApiStub().start();
  const port = await freePort();
  const ips = [podIp(34, 0), podIp(34, 1)];
  procs.push(...await Promise.all(ips.map((ip, i) => podSim({ ip, port, seed: i, timeScale: 0.05 }))));
  stub.apply(PODS, pod('vllm-0', ips[0], { app: 'vllm' }));
  stub.apply(PODS, pod('vllm-1', ips[1], { app: 'vllm' }));
  const cfg = configFile(['discovery:', '  kind: k8s', `  port: ${port}`]);
  const p: Epp = picker = await epp([], ['--config', cfg, '--discovery', 'k8s', '--kubeconfig', stub.kubeconfig(dir), '--label-selector', 'app=vllm']);
  const endpoints = ips.map((ip) => `${ip}:${port}`);
  const seen = new Set<string>();
  for (let i = 0; i < 8; i++) {
    const x = await p.envoy.exchange({ body: chat(`discovered ${i}`), headers: { 'x-session-id': `d-${i}` } });
    assert.equal(x.status, 200, x.responseBody);
    const primary = (x.endpointHeader ?? '').split(',')[0];
    assert.ok(endpoints.includes(primary), `${primary} is a pod's endpoint`);
    seen.add(primary);
  }
  assert.equal(seen.size, 2, 'both pods picked');
  stub.remove(PODS, 'default', 'vllm-1');
  await until(async () => await metric(p.http, 'ear_discovery_pods') === 1, 'ear_discovery_pods = 1');
  for (let i = 0; i < 4; i++) {
    const x = await p.envoy.exchange({ body: chat(`after ${i}`), headers: { 'x-session-id': `d-${i}` } });
    assert.equal((x.endpointHeader ?? '').split(',')[0], endpoints[0]);
  }
});
