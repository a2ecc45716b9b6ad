// Rolling updates under traffic, as the Deployment controller runs them with maxSurge S / maxUnavailable 0, a
// batch every 250 ms: a batch of new pods is created (Pending, then Running and Ready), and only then as many old
// pods terminate (deletionTimestamp, not Ready), their engines keep serving through a grace period and then exit,
// and the pods are DELETED. A real `ear serve --discovery k8s` follows the stub API server while a closed-loop
// load runs through it: not one request may fail. The engines are light in-process servers (fake-engine.ts), each
// on its own loopback address.
//   - 300 pods at maxSurge 100 with rows enough for them (maxPods 512: 300 + 100 surging + the pods draining).
//   - 6 pods at maxSurge 6 with 8 rows: the new pods run out of rows while the old ones drain, wait for a row
//     (ear_pod_rows_waiting, warned once) and join as rows come free, and no client sees it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { KubeApiStub, PODS, pod } from '../fixtures/k8s-api-server.js';
import { fakeEngine, type FakeEngine } from '../fixtures/fake-engine.js';
import { configFile, podIp } from '../fixtures/k8s-pods.js';
import { classify, Load, report, type Outcome } from '../fixtures/load.js';
import { ADMIN, metric, SERVE_LISTENING, start, stop, type Proc } from '../fixtures/processes.js';
import { freePort } from '../store/redis-server.js';
import { until } from '../fixtures/wait.js';

/**
 * minReadySeconds-like pause before a batch of old pods goes, and the pause after. Short on purpose: old pods'
 * rows are released by the dozen and must be free again before the next batches run out of rows. Rows released
 * together are purged in one sweep of the prefix index (KvThreadChain, ixClearPods), so the pace does not depend
 * on a sweep per row.
 */
const MIN_READY_MS = 250;
const BATCH_GAP_MS = 250;
/** terminationGracePeriod: how long a terminating pod's engine still answers (the gateway drains it meanwhile). */
const GRACE_MS = 3000;

const dir = mkdtempSync(join(tmpdir(), 'ear-k8s-roll-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** An engine that exits as vLLM does on SIGTERM: no new connections, the requests in flight finish. */
async function terminate (e: FakeEngine): Promise<void> {
  const closed = new Promise((r) => e.server.close(r));
  e.server.closeIdleConnections();
  const t = setTimeout(() => e.server.closeAllConnections(), 1000);
  await closed;
  clearTimeout(t);
}

interface Rollout {
  replicas: number;
  surge: number;
  rolls: number;
  maxPods: number;
  /** Loopback block of the pods' IPs (podIp), one per case. */
  ipBlock: number;
}

interface Rolled {
  gw: Proc;
  outcomes: Outcome[];
  /** The pods of the last revision. */
  current: string[];
  seconds: number;
}

/** Runs a rollout under load; `check` reads the gateway before it is stopped. */
async function rollOut (o: Rollout, check: (r: Rolled) => Promise<void>): Promise<void> {
  const t0 = performance.now();
  const engines = new Map<string, FakeEngine>();
  const stub = await new KubeApiStub().start();
  let gw: Proc | undefined;
  try {
    const port = await freePort();
    let next = 0;
    const labels = (rev: number): Record<string, string> => ({ app: 'vllm', 'pod-template-hash': `rev${rev}`, 'llm-d.ai/model': 'm' });
    const ipOf = (name: string): string => podIp(o.ipBlock, Number(name.slice(-4)));
    /** Creates pods of revision `rev` as the ReplicaSet and kubelet would: engine up, Pending, then Running and Ready. */
    const createPods = async (rev: number, n: number): Promise<string[]> => {
      const names: string[] = [];
      for (let i = 0; i < n; i++) names.push(`vllm-rev${rev}-${String(next++).padStart(4, '0')}`);
      await Promise.all(names.map(async (name) => {
        engines.set(name, await fakeEngine('m', 'ok', { host: ipOf(name), port }));
        stub.apply(PODS, pod(name, null, labels(rev), { phase: 'Pending', ready: false }));
      }));
      await sleep(50);
      for (const name of names) stub.apply(PODS, pod(name, ipOf(name), labels(rev)));
      return names;
    };
    const terminating: Array<Promise<void>> = [];
    /** Deletes a pod as the kubelet does: terminating at once, the engine exits after the grace period, then DELETED. */
    const deletePod = (name: string, rev: number): void => {
      stub.apply(PODS, pod(name, ipOf(name), labels(rev), { deleting: true, ready: false }));
      terminating.push((async () => {
        await sleep(GRACE_MS);
        await terminate(engines.get(name)!);
        engines.delete(name);
        stub.remove(PODS, 'default', name);
      })());
    };

    let current = await createPods(0, o.replicas);
    const cfg = configFile([`maxPods: ${o.maxPods}`, 'discovery:', '  kind: k8s', `  port: ${port}`, '  labelSelector: app=vllm']);
    gw = await start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--admin-token', ADMIN, '--discovery', 'k8s', '--kubeconfig', stub.kubeconfig(dir)], SERVE_LISTENING);
    const g = gw;
    assert.equal(await metric(g.url, 'ear_discovery_pods', ''), o.replicas);

    const load = new Load({ gateways: () => [g.url], sessions: 12, prefix: `roll${o.replicas}`, turnsPerSession: 4, systemChars: 400, pauseMs: 5 }).start();
    await load.served(50);
    for (let rev = 1; rev <= o.rolls; rev++) {
      const old = [...current];
      current = [];
      while (old.length > 0) {
        const batch = Math.min(o.surge, old.length);
        current.push(...await createPods(rev, batch));
        // minReadySeconds: the new pods count as available, then as many old ones go.
        await sleep(MIN_READY_MS);
        for (const name of old.splice(0, batch)) deletePod(name, rev - 1);
        await sleep(BATCH_GAP_MS);
      }
    }
    await Promise.all(terminating);
    const last = current.at(-1);
    await until(async () => await metric(g.url, 'ear_discovery_pods', '') === o.replicas && await metric(g.url, 'ear_pod_rows_waiting', '') === 0 &&
      (await (await fetch(`${g.url}/metrics`)).text()).includes(`backend="${last}"`),
    { what: 'the gateway to settle on the last revision', intervalMs: 100 });
    await load.served(50);
    const outcomes = await load.stop();
    if (process.env.EAR_TEST_GATEWAY_LOG !== undefined) writeFileSync(`${process.env.EAR_TEST_GATEWAY_LOG}.outcomes`, JSON.stringify(outcomes.filter((x) => x.error !== null)));
    await check({ gw: g, outcomes, current, seconds: (performance.now() - t0) / 1000 });
  } finally {
    if (process.env.EAR_TEST_GATEWAY_LOG !== undefined && gw !== undefined) writeFileSync(process.env.EAR_TEST_GATEWAY_LOG, gw.out());
    await stop(gw);
    await Promise.all([...engines.values()].map((e) => e.close()));
    await stub.close();
  }
}

/** What every rollout must show: no failed request, not even a retry, the last requests on the last revision. */
async function servedThrough (r: Rolled, what: string): Promise<void> {
  const c = classify(r.outcomes);
  console.log(report(what, c));
  assert.deepEqual(r.outcomes.filter((x) => x.error !== null).slice(0, 5), [], 'no request failed');
  assert.equal(c.ok > 100, true, `${c.ok} requests served`);
  // Not even a retry: every old pod was drained before its engine went, no request met a closed engine.
  assert.equal(await metric(r.gw.url, 'ear_upstream_retries_total', ''), 0);
  const want = new Set(r.current);
  const late = r.outcomes.slice(-30).map((x) => x.backend);
  assert.equal(late.every((b) => want.has(b)), true, `late requests on ${[...new Set(late)].join(', ')}`);
  // Rows never fail a reload: a pod that finds none waits for one.
  assert.equal(await metric(r.gw.url, 'ear_discovery_reload_failures_total', ''), 0);
}

test('a rolling update of 300 pods at maxSurge 100 under traffic fails no request', async () => {
  const o: Rollout = { replicas: 300, surge: 100, rolls: 1, maxPods: 512, ipBlock: 32 };
  await rollOut(o, async (r) => {
    await servedThrough(r, `rolling update of ${o.replicas} pods at maxSurge ${o.surge}`);
    const url = r.gw.url;
    // Bursts were coalesced: far fewer reloads than the pod events (4 per pod).
    const reloads = await metric(url, 'ear_discovery_reloads_total', '');
    assert.equal(reloads > 0 && reloads < 200, true, `${reloads} reloads`);
    const waits = await metric(url, 'ear_pod_row_waits_total', '');
    // Release → free row: every old row, and far fewer sweeps of the index than rows.
    const text = await (await fetch(`${url}/metrics`)).text();
    const freed = await metric(url, 'ear_pod_row_free_seconds_count', '');
    const sweeps = await metric(url, 'ear_kv_purge_sweeps_total', '');
    const buckets = [...text.matchAll(/^ear_pod_row_free_seconds_bucket\{le="([^"]+)"\} (\d+)$/gm)].map((m) => [m[1], Number(m[2])] as const);
    const within = (q: number): string => buckets.find(([, n]) => n >= q * freed)?.[0] ?? '?';
    const mean = await metric(url, 'ear_pod_row_free_seconds_sum', '') / freed;
    console.log(`# ${reloads} reloads for ${o.replicas * o.rolls} pods replaced; ${waits} pods waited for a row; ${r.seconds.toFixed(1)} s`);
    console.log(`# release → free row: mean ${(mean * 1000).toFixed(0)} ms, median ≤ ${within(0.5)} s, p99 ≤ ${within(0.99)} s; ${freed} rows in ${sweeps} sweeps`);
    // 512 rows hold 300 + 100 surging + the batch draining: no pod had to wait.
    assert.equal(waits, 0);
    assert.equal(freed >= o.replicas * o.rolls, true, `${freed} rows freed`);
    assert.equal(await metric(url, 'ear_kv_pod_rows_purged_total', ''), freed);
    // Rows released together share a sweep. Loose on purpose: how rows fall into batches depends on timing.
    assert.equal(sweeps <= freed / 5, true, `${sweeps} sweeps for ${freed} rows`);
  });
});

test('with rows for fewer pods than a rollout needs, the new pods wait for rows (counted, warned once) and no request fails', async () => {
  const o: Rollout = { replicas: 6, surge: 6, rolls: 1, maxPods: 8, ipBlock: 33 };
  await rollOut(o, async (r) => {
    await servedThrough(r, `rolling update of ${o.replicas} pods at maxSurge ${o.surge} on ${o.maxPods} rows`);
    // Discovery takes 8 of the 12 ready pods (6 old, 2 new); once the old 6 terminate, the other 4 new are listed
    // while the old rows are still releasing: they wait, and join as the rows come free.
    const waits = await metric(r.gw.url, 'ear_pod_row_waits_total', '');
    console.log(`# ${waits} pods waited for a row; ${r.seconds.toFixed(1)} s`);
    assert.equal(waits >= 1 && waits <= 4, true, `${waits} pods waited for a row`);
    const warned = r.gw.out().split('\n').filter((l) => l.includes('every pod row is in use'));
    assert.equal(warned.length, 1, `warned ${warned.length} times`);
    assert.match(warned[0], /"maxPods":8/);
    assert.equal(await metric(r.gw.url, 'ear_pod_rows', '{state="free"}'), o.maxPods - o.replicas);
  });
});
