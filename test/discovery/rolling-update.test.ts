// A rolling update under traffic: a Deployment of 150 engine pods rolled twice (300 pods replaced) in batches
// as the Deployment controller does with maxSurge 30 / maxUnavailable 0, a batch every 250 ms: a batch of new pods is created
// (Pending, then Running and Ready), and only then as many old pods terminate (deletionTimestamp, not Ready),
// their engines keep serving through a grace period and then exit, and the pods are DELETED. A real `ear serve
// --discovery k8s` follows the stub API server while a closed-loop load runs through it: not one request may
// fail. The engines are light in-process servers (fake-engine.ts), each on its own loopback address.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeApiStub, PODS, pod } from '../fixtures/k8s-api-server.js';
import { fakeEngine, type FakeEngine } from '../fixtures/fake-engine.js';
import { configFile, podIp } from '../fixtures/k8s-pods.js';
import { classify, Load, report } from '../fixtures/load.js';
import { ADMIN, metric, SERVE_LISTENING, start, stop, type Proc } from '../fixtures/processes.js';
import { freePort } from '../store/redis-server.js';
import { until } from '../fixtures/wait.js';

const REPLICAS = 150;
const SURGE = 30;
/**
 * minReadySeconds-like pause before a batch of old pods goes, and the pause after. Short on purpose: old pods'
 * rows are released by the dozen and must be free again before the next batches run out of rows (256 rows for
 * 150 pods, 30 more surging, the old ones draining). Rows released together are purged in one sweep of the
 * prefix index (KvThreadChain, ixClearPods), so the pace no longer depends on a sweep per row.
 */
const MIN_READY_MS = 250;
const BATCH_GAP_MS = 250;
const ROLLS = 2;
/** terminationGracePeriod: how long a terminating pod's engine still answers (the gateway drains it meanwhile). */
const GRACE_MS = 3000;

const dir = mkdtempSync(join(tmpdir(), 'ear-k8s-roll-'));
const engines = new Map<string, FakeEngine>();
let gw: Proc | undefined;
let stub: KubeApiStub | null = null;
after(async () => {
  if (process.env.EAR_TEST_GATEWAY_LOG !== undefined && gw !== undefined) writeFileSync(process.env.EAR_TEST_GATEWAY_LOG, gw.out());
  await stop(gw);
  await Promise.all([...engines.values()].map((e) => e.close()));
  await stub?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An engine that exits as vLLM does on SIGTERM: no new connections, the requests in flight finish. */
async function terminate (e: FakeEngine): Promise<void> {
  const closed = new Promise((r) => e.server.close(r));
  e.server.closeIdleConnections();
  const t = setTimeout(() => e.server.closeAllConnections(), 1000);
  await closed;
  clearTimeout(t);
}

test(`a rolling update of ${REPLICAS * ROLLS} pods under traffic fails no request`, async () => {
  stub = await new KubeApiStub().start();
  const port = await freePort();
  let next = 0;
  const labels = (rev: number): Record<string, string> => ({ app: 'vllm', 'pod-template-hash': `rev${rev}`, 'llm-d.ai/model': 'm' });
  /** Creates pods of revision `rev` as the ReplicaSet and kubelet would: engine up, Pending, then Running and Ready. */
  const createPods = async (rev: number, n: number): Promise<string[]> => {
    const names: string[] = [];
    for (let i = 0; i < n; i++) names.push(`vllm-rev${rev}-${String(next++).padStart(4, '0')}`);
    await Promise.all(names.map(async (name) => {
      const ip = podIp(32, Number(name.slice(-4)));
      engines.set(name, await fakeEngine('m', 'ok', { host: ip, port }));
      stub!.apply(PODS, pod(name, null, labels(rev), { phase: 'Pending', ready: false }));
    }));
    await sleep(50);
    for (const name of names) stub!.apply(PODS, pod(name, podIp(32, Number(name.slice(-4))), labels(rev)));
    return names;
  };
  const terminating: Array<Promise<void>> = [];
  /** Deletes a pod as the kubelet does: terminating at once, the engine exits after the grace period, then DELETED. */
  const deletePod = (name: string, rev: number): void => {
    stub!.apply(PODS, pod(name, podIp(32, Number(name.slice(-4))), labels(rev), { deleting: true, ready: false }));
    terminating.push((async () => {
      await sleep(GRACE_MS);
      await terminate(engines.get(name)!);
      engines.delete(name);
      stub!.remove(PODS, 'default', name);
    })());
  };

  let current = await createPods(0, REPLICAS);
  const cfg = configFile(['discovery:', '  kind: k8s', `  port: ${port}`, '  labelSelector: app=vllm']);
  gw = await start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--admin-token', ADMIN, '--discovery', 'k8s', '--kubeconfig', stub.kubeconfig(dir)], SERVE_LISTENING);
  assert.equal(await metric(gw.url, 'ear_discovery_pods', ''), REPLICAS);

  const load = new Load({ gateways: () => [gw!.url], sessions: 12, prefix: 'roll', turnsPerSession: 4, systemChars: 400, pauseMs: 5 }).start();
  await load.served(50);
  for (let rev = 1; rev <= ROLLS; rev++) {
    const old = [...current];
    current = [];
    while (old.length > 0) {
      const batch = Math.min(SURGE, old.length);
      current.push(...await createPods(rev, batch));
      // minReadySeconds: the new pods count as available, then as many old ones go.
      await sleep(MIN_READY_MS);
      for (const name of old.splice(0, batch)) deletePod(name, rev - 1);
      await sleep(BATCH_GAP_MS);
    }
  }
  await Promise.all(terminating);
  const want = new Set(current);
  await until(async () => await metric(gw!.url, 'ear_discovery_pods', '') === REPLICAS && (await (await fetch(`${gw!.url}/metrics`)).text()).includes(`backend="${current.at(-1)}"`),
    { what: 'the gateway to settle on the last revision', intervalMs: 100 });
  await load.served(50);
  const outcomes = await load.stop();
  if (process.env.EAR_TEST_GATEWAY_LOG !== undefined) writeFileSync(`${process.env.EAR_TEST_GATEWAY_LOG}.outcomes`, JSON.stringify(outcomes.filter((o) => o.error !== null)));
  const c = classify(outcomes);
  console.log(report(`rolling update of ${REPLICAS * ROLLS} pods`, c));
  assert.deepEqual(outcomes.filter((o) => o.error !== null).slice(0, 5), [], 'no request failed');
  assert.equal(c.ok > 100, true, `${c.ok} requests served`);
  // Not even a retry: every old pod was drained before its engine went, no request met a closed engine.
  assert.equal(await metric(gw.url, 'ear_upstream_retries_total', ''), 0);
  // The last requests went to pods of the last revision only.
  const late = outcomes.slice(-30).map((o) => o.backend);
  assert.equal(late.every((b) => want.has(b)), true, `late requests on ${[...new Set(late)].join(', ')}`);
  // Bursts were coalesced: far fewer reloads than the 1 200 pod events.
  const reloads = await metric(gw.url, 'ear_discovery_reloads_total', '');
  assert.equal(reloads > 0 && reloads < 200, true, `${reloads} reloads`);
  // A reload may find every pod row still in use while the old pods' rows are purged; it is tried again with
  // the latest list, as the settled state above shows.
  const refused = await metric(gw.url, 'ear_discovery_reload_failures_total', '');
  console.log(`# ${reloads} reloads for ${REPLICAS * ROLLS} pods replaced; ${refused} waited for pod rows and were retried`);
  // Release → free row: every old row, and far fewer sweeps of the index than rows.
  const text = await (await fetch(`${gw.url}/metrics`)).text();
  const freed = await metric(gw.url, 'ear_pod_row_free_seconds_count', '');
  const sweeps = await metric(gw.url, 'ear_kv_purge_sweeps_total', '');
  const buckets = [...text.matchAll(/^ear_pod_row_free_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])] as const);
  const within = (q: number): string => buckets.find(([, n]) => n >= q * freed)?.[0] ?? '?';
  const mean = await metric(gw.url, 'ear_pod_row_free_seconds_sum', '') / freed;
  console.log(`# release → free row: mean ${(mean * 1000).toFixed(0)} ms, median ≤ ${within(0.5)} s, p99 ≤ ${within(0.99)} s; ${freed} rows in ${sweeps} sweeps`);
  // Every old pod's row is free again by the time the gateway has settled on the last revision.
  assert.equal(freed >= REPLICAS * ROLLS, true, `${freed} rows freed`);
  assert.equal(await metric(gw.url, 'ear_kv_pod_rows_purged_total', ''), freed);
  // Rows released together share a sweep (10–12 sweeps for the 300 here; one per row before batching). Loose on
  // purpose: how rows fall into batches depends on timing, but not one sweep for every few rows.
  assert.equal(sweeps <= freed / 5, true, `${sweeps} sweeps for ${freed} rows`);
});
