// A backend that leaves for good takes its series out of /metrics: a fleet that rolls pods through must not
// grow the export without bound.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GatewayMetrics, registerKvEventMetrics } from '../../src/telemetry/metrics.js';
import { FastCounter, FastHistogram } from '../../src/telemetry/fast-metrics.js';
import type { KvBackendStats, KvThreadStats } from '../../src/kvevents/kv-events-thread.js';

function record (m: GatewayMetrics, id: string): void {
  const b = m.backend(id);
  b.ttft.observe(0.2);
  b.e2e.observe(1.5);
  b.tpot.observe(0.02);
  b.requests('/v1/chat/completions', 200).inc();
  b.decisions('ear', 'affinity').inc();
  m.upstreamErrors.inc({ backend: id, kind: 'connect' });
  m.upstreamErrors.inc({ backend: id, kind: 'midstream' });
  m.backendUp.set({ backend: id }, 1);
  m.inFlight.set({ backend: id }, 3);
}

test('removeBackend deletes a backend\'s series from every metric labelled by backend, and only its own', async () => {
  const m = new GatewayMetrics();
  // The kv-events thread's counters, rebuilt from its stats on every scrape.
  const kv = [{ id: 'pod-a' }, { id: 'pod-b' }].map((b) => ({ ...b, events: 4, confirmedBlocks: 2, offloadedBlocks: 0, active: false, lastApplyLagMs: null }) as unknown as KvBackendStats);
  registerKvEventMetrics(m.registry, async () => ({ backends: kv, applyLagP50Ms: null, applyLagP99Ms: null, purged: 1, purgedPods: 2, stale: 3, retiredDropped: 4 }) as unknown as KvThreadStats);
  record(m, 'pod-a');
  record(m, 'pod-b');
  m.decisionSeconds.labels('ear').observe(1e-5);
  const before = await m.text();
  const a = before.split('\n').filter((l) => l.includes('backend="pod-a"'));
  assert.ok(a.length > 50, `${a.length} lines for pod-a`);
  for (const name of ['ear_requests_total', 'ear_time_to_first_token_seconds_bucket', 'ear_e2e_request_latency_seconds_sum',
    'ear_time_per_output_token_seconds_count', 'ear_upstream_errors_total', 'ear_routing_decisions_total', 'ear_backend_up',
    'ear_backend_in_flight', 'ear_kv_events_total', 'ear_kv_index_blocks']) {
    assert.ok(a.some((l) => l.startsWith(name + '{')), `${name} has pod-a before`);
  }
  for (const line of ['ear_kv_backends_purged_total 1', 'ear_kv_pod_rows_purged_total 2', 'ear_kv_stale_ops_total 3', 'ear_kv_retired_backends_dropped_total 4']) {
    assert.ok(before.includes(`\n${line}\n`), line);
  }
  const kept = before.split('\n').filter((l) => l.includes('backend="pod-b"'));
  // The thread forgets pod-a too (KvEventsThread.forget), so its ear_kv_* series do not come back.
  kv.splice(0, 1);
  const n = await m.removeBackend('pod-a');
  assert.equal(n, 9, 'three histograms, two fast counters, two error kinds, two gauges (the kv series went with the thread\'s stats)');
  const after = await m.text();
  assert.equal(after.split('\n').filter((l) => l.includes('pod-a')).length, 0, after.split('\n').filter((l) => l.includes('pod-a')).join('\n'));
  assert.deepEqual(after.split('\n').filter((l) => l.includes('backend="pod-b"')), kept, 'the other backend is untouched');
  assert.match(after, /ear_routing_decision_seconds_count\{policy="ear"\} 1/, 'metrics without a backend label untouched');
  // The id comes back (a new backend on some row): its series start from zero.
  m.backend('pod-a').requests('/v1/chat/completions', 200).inc();
  assert.match(await m.text(), /ear_requests_total\{route="\/v1\/chat\/completions",status="200",backend="pod-a"\} 1\n/);
  assert.equal(await m.removeBackend('never-seen'), 0);
});

test('fast metrics: removeWhere deletes the series with that label value and keeps the rest', async () => {
  const h = new FastHistogram({ name: 'h', help: 'H.', buckets: [1], labelNames: ['route', 'backend'] });
  const c = new FastCounter({ name: 'c', help: 'C.', labelNames: ['backend'] });
  for (const b of ['x', 'y']) {
    h.labels('/a', b).observe(0.5);
    h.labels('/b', b).observe(2);
    c.labels(b).inc();
  }
  assert.equal(h.removeWhere('backend', 'x'), 2);
  assert.equal(c.removeWhere('backend', 'x'), 1);
  assert.equal(c.removeWhere('backend', 'x'), 0);
  const hv = (await h.get()).values;
  assert.ok(hv.length > 0 && hv.every((v) => v.labels.backend === 'y'));
  assert.deepEqual((await c.get()).values.map((v) => v.labels), [{ backend: 'y' }]);
});
