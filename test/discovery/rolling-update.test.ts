// Rolling updates under traffic (test/fixtures/rolling-update.ts): a real `ear serve --discovery k8s` follows a
// stub API server through a Deployment's rollout while a closed-loop load runs through it: not one request may
// fail, and every new pod is in service once its row frees.
//   - 300 pods at maxSurge 100 with rows enough for them (maxPods 512: 300 + 100 surging + the pods draining).
//     Whether a new pod finds its row free or waits for it depends on how fast this machine purges released rows:
//     the waits are counted here, not forbidden; how many there are is bench/rollout-rows.ts's figure.
//   - 6 pods at maxSurge 6 with 8 rows: the new pods run out of rows while the old ones drain, wait for a row
//     (ear_pod_rows_waiting, warned once) and join as rows come free, and no client sees it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { classify, report } from '../fixtures/load.js';
import { metric } from '../fixtures/processes.js';
import { rollOut, type Rolled, type Rollout } from '../fixtures/rolling-update.js';

/** What every rollout must show: no failed request, not even a retry, requests served while it ran, the last ones on the last revision. */
async function servedThrough (r: Rolled, what: string): Promise<void> {
  const c = classify(r.outcomes);
  console.log(report(what, c));
  assert.deepEqual(r.outcomes.filter((x) => x.error !== null).slice(0, 5), [], 'no request failed');
  // Under traffic: requests were served between the first new pod and the last old pod gone.
  const during = r.outcomes.filter((x) => x.error === null && x.t0 >= r.rollout.from && x.t1 <= r.rollout.to).length;
  assert.ok(during > 0, `${during} requests served during the rollout`);
  // Not even a retry: every old pod was drained before its engine went, no request met a closed engine.
  assert.equal(await metric(r.gw.url, 'ear_upstream_retries_total', ''), 0);
  const want = new Set(r.current);
  const late = r.outcomes.slice(-30).map((x) => x.backend);
  assert.equal(late.every((b) => want.has(b)), true, `late requests on ${[...new Set(late)].join(', ')}`);
  // Rows never fail a reload: a pod that finds none waits for one.
  assert.equal(await metric(r.gw.url, 'ear_discovery_reload_failures_total', ''), 0);
  // Every pod of the last revision is in service (rollOut waited for it), none is left waiting for a row, and
  // the old ones are gone from the gateway's series.
  const text = await (await fetch(`${r.gw.url}/metrics`)).text();
  const up = [...text.matchAll(/^ear_backend_up\{backend="([^"]+)"\} 1$/gm)].map((m) => m[1]).sort();
  assert.deepEqual(up, [...r.current].sort());
  assert.equal(await metric(r.gw.url, 'ear_pod_rows_waiting', ''), 0);
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
    // A new pod that finds every row in use waits for one (counted once) and is in service once a row frees
    // (servedThrough): at most every new pod waited. That none has to, with 512 rows for 300 + 100 surging + the
    // batch draining, is a matter of this machine's pace: bench/rollout-rows.ts reports it.
    assert.ok(waits <= o.replicas * o.rolls, `${waits} pods waited for a row`);
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
