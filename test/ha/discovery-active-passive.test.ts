// Discovery and the lease together, as the Helm chart runs them: two `ear serve --discovery k8s --ha active-passive`
// replicas against one stub API server that serves both the pods and the Lease API. The lease finds its API server
// and namespace through the discovery section alone; both replicas discover the pods; only the leader is ready,
// and after its SIGTERM the other one is, and serves through the pods it discovered.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApiStub, PODS, pod } from '../fixtures/k8s-api-server.js';
import { LeaseApi, mountLeases } from '../fixtures/k8s-lease-server.js';
import { configFile, podIp, podSim } from '../fixtures/k8s-pods.js';
import { metric, SERVE_LISTENING, start, stop, turn, type Proc } from '../fixtures/processes.js';
import { freePort } from '../store/redis-server.js';
import { until } from '../fixtures/wait.js';

const NS = 'ear-ha-discovery';
const LEASE = 'ear-leader';

const readyStatus = async (url: string): Promise<number> => {
  try {
    return (await fetch(`${url}/ready`, { signal: AbortSignal.timeout(5000) })).status;
  } catch {
    return 0;
  }
};

test('discovery and active-passive on one API server: both replicas find the pods, one is ready, SIGTERM hands over', async () => {
  const leases = new LeaseApi();
  const stub = await new KubeApiStub().start();
  // The Lease API on the same server: one kubeconfig, one namespace, as in a cluster.
  mountLeases(stub, leases);
  const dir = mkdtempSync(join(tmpdir(), 'ear-ha-discovery-'));
  const procs: Proc[] = [];
  try {
    const port = await freePort();
    const ips = [podIp(41, 0), podIp(41, 1)];
    procs.push(...await Promise.all(ips.map((ip, i) => podSim({ ip, port, seed: i }))));
    for (const [i, ip] of ips.entries()) stub.apply(PODS, pod(`vllm-${i}`, ip, { app: 'vllm', 'llm-d.ai/model': 'm' }, { namespace: NS }));
    // No `ha.kubeconfig` or `ha.namespace`, and the kubeconfig context says `default`: the lease takes both from the
    // discovery section, as the chart writes it.
    const cfg = configFile(['discovery:', '  kind: k8s', `  kubeconfig: ${JSON.stringify(stub.kubeconfig(dir))}`, `  namespace: ${NS}`,
      '  labelSelector: app=vllm', `  port: ${port}`, 'ha:', '  mode: active-passive', `  leaseName: ${LEASE}`, '  leaseDurationSeconds: 3']);
    const replicas = await Promise.all([0, 1].map(() => start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--route-threads', '1'], SERVE_LISTENING,
      [], { POD_NAMESPACE: NS })));
    procs.push(...replicas);
    for (const r of replicas) assert.equal(await metric(r.url, 'ear_discovery_pods', ''), 2);

    let statuses: number[] = [];
    await until(async () => {
      statuses = await Promise.all(replicas.map((r) => readyStatus(r.url)));
      return statuses.filter((s) => s === 200).length === 1 && statuses.filter((s) => s === 503).length === 1;
    }, 'one leader');
    const leader = statuses.indexOf(200);
    const follower = 1 - leader;
    assert.ok(leases.lease(NS, LEASE)?.spec.holderIdentity, 'the lease is held, in the discovery namespace');
    assert.equal(await metric(replicas[leader].url, 'ear_ha_leader', ''), 1);
    assert.equal(await metric(replicas[follower].url, 'ear_ha_leader', ''), 0);

    await stop(replicas[leader]);
    await until(async () => await readyStatus(replicas[follower].url) === 200, 'the follower to take over');
    const served = new Set<string>();
    for (let i = 0; i < 6; i++) served.add((await turn(replicas[follower].url, `s-${i}`, [{ role: 'user', content: `session ${i}: run the tests` }])).backend);
    assert.ok([...served].every((b) => b === 'vllm-0' || b === 'vllm-1'), [...served].join(','));
  } finally {
    await Promise.all(procs.map((p) => stop(p)));
    await stub.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
