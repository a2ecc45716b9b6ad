// llm-d / Inference Extension metric names over EAR's own figures: right values, bounded series, counters that
// never go down when a backend's series are deleted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GatewayMetrics } from '../../src/telemetry/metrics.js';
import type { AliasBackend } from '../../src/telemetry/epp-metric-aliases.js';

function value (text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(series + ' '));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

test('pool gauges average the ready engines\' figures; per-endpoint series follow the live backends', async () => {
  const m = new GatewayMetrics();
  let backends: AliasBackend[] = [
    { id: 'vllm-0', ready: true, inFlight: 5, load: { running: 4, waiting: 2, kvUsage: 0.5 } },
    { id: 'vllm-1', ready: true, inFlight: 1, load: { running: 2, waiting: 0, kvUsage: 0.25 } },
    { id: 'vllm-2', ready: false, inFlight: 0, load: { running: 9, waiting: 9, kvUsage: 0.9 } },
    { id: 'vllm-3', ready: true, inFlight: 2, load: null }
  ];
  m.registerEppAliases({ pool: () => 'llama', backends: () => backends, queueDepthByLevel: () => [3, 0, 1] });
  let t = await m.text();
  assert.equal(value(t, 'llm_d_epp_ready_endpoints{name="llama"}'), 3);
  assert.equal(value(t, 'inference_pool_ready_pods{name="llama"}'), 3);
  assert.equal(value(t, 'llm_d_epp_average_kv_cache_utilization{name="llama"}'), 0.375);
  assert.equal(value(t, 'inference_pool_average_queue_size{name="llama"}'), 1);
  assert.equal(value(t, 'llm_d_epp_average_running_requests{name="llama"}'), 3);
  assert.equal(value(t, 'llm_d_epp_std_dev_running_requests{name="llama"}'), 1);
  assert.equal(value(t, 'llm_d_epp_per_endpoint_queue_size{name="llama",model_server_endpoint="vllm-0"}'), 2);
  assert.equal(value(t, 'inference_pool_per_pod_queue_size{name="llama",model_server_pod="vllm-2"}'), 9);
  assert.equal(value(t, 'llm_d_epp_flow_control_queue_size{fairness_id="",priority="0",inference_pool="llama",model_name="",target_model_name=""}'), 3);
  assert.equal(value(t, 'llm_d_epp_flow_control_queue_size{fairness_id="",priority="2",inference_pool="llama",model_name="",target_model_name=""}'), 1);
  assert.equal(value(t, 'llm_d_epp_request_running{model_name="",target_model_name="",fairness_id="",priority=""}'), 8);
  backends = backends.slice(0, 1);
  await new Promise((resolve) => setTimeout(resolve, 60));
  t = await m.text();
  assert.equal(t.split('\n').filter((l) => l.startsWith('llm_d_epp_per_endpoint_queue_size{')).length, 1, 'a departed backend has no series');
  assert.equal(value(t, 'llm_d_epp_ready_endpoints{name="llama"}'), 1);
  // No labels but the bounded ones: nothing per session, user or request.
  for (const l of t.split('\n').filter((x) => x.startsWith('llm_d_epp_') || x.startsWith('inference_'))) assert.doesNotMatch(l, /session|user|request_id/, l);
});

test('request counters sum ear_requests_total and never decrease when a backend\'s series are deleted', async () => {
  const m = new GatewayMetrics();
  m.registerEppAliases({ pool: () => '', backends: () => [], queueDepthByLevel: () => [] });
  m.backend('a').requests('/v1/chat/completions', 200).inc(5);
  m.backend('a').requests('/v1/chat/completions', 503).inc(2);
  m.backend('b').requests('/v1/chat/completions', 200).inc(3);
  let t = await m.text();
  assert.equal(value(t, 'llm_d_epp_request_total{model_name="",target_model_name="",fairness_id="",priority=""}'), 10);
  assert.equal(value(t, 'llm_d_epp_request_error_total{model_name="",target_model_name="",fairness_id="",priority="",error_code="503"}'), 2);
  await m.removeBackend('a');
  m.backend('b').requests('/v1/chat/completions', 200).inc(1);
  t = await m.text();
  assert.equal(value(t, 'llm_d_epp_request_total{model_name="",target_model_name="",fairness_id="",priority=""}'), 11, 'a deleted series keeps what it counted');
  assert.equal(value(t, 'llm_d_epp_request_error_total{model_name="",target_model_name="",fairness_id="",priority="",error_code="503"}'), 2);
  // The same id back: its new series counts from zero.
  m.backend('a').requests('/v1/chat/completions', 200).inc(1);
  t = await m.text();
  assert.equal(value(t, 'llm_d_epp_request_total{model_name="",target_model_name="",fairness_id="",priority=""}'), 12);
});

test('scheduler e2e histogram merges the routing decision time of every policy', async () => {
  const m = new GatewayMetrics();
  m.registerEppAliases({ pool: () => '', backends: () => [], queueDepthByLevel: () => [] });
  m.decisionSeconds.labels('ear').observe(2e-5);
  m.decisionSeconds.labels('ear').observe(3e-3);
  m.decisionSeconds.labels('random').observe(2e-5);
  const t = await m.text();
  for (const name of ['llm_d_epp_scheduler_e2e_duration_seconds', 'inference_extension_scheduler_e2e_duration_seconds']) {
    assert.equal(value(t, `${name}_count`), 3);
    assert.equal(value(t, `${name}_bucket{le="0.000025"}`), 2);
    assert.equal(value(t, `${name}_bucket{le="+Inf"}`), 3);
    assert.ok(Math.abs(value(t, `${name}_sum`)! - 3.04e-3) < 1e-12);
  }
});

test('request latency histograms merge every backend\'s and keep their counts when a backend\'s series go', async () => {
  const m = new GatewayMetrics();
  m.registerEppAliases({ pool: () => '', backends: () => [], queueDepthByLevel: () => [] });
  m.backend('a').e2e.observe(0.3);
  m.backend('a').e2e.observe(3);
  m.backend('b').e2e.observe(0.3);
  m.backend('b').ttft.observe(0.02);
  const L = 'model_name="",target_model_name="",fairness_id="",priority=""';
  let t = await m.text();
  assert.equal(value(t, `llm_d_epp_request_duration_seconds_count{${L}}`), 3);
  assert.equal(value(t, `llm_d_epp_request_duration_seconds_bucket{${L},le="0.5"}`), 2);
  assert.equal(value(t, `llm_d_epp_request_ttft_seconds_bucket{${L},streaming="",le="0.025"}`), 1);
  await m.removeBackend('a');
  m.backend('b').e2e.observe(1);
  t = await m.text();
  assert.equal(value(t, `llm_d_epp_request_duration_seconds_count{${L}}`), 4, 'a departed backend\'s observations stay counted');
  assert.equal(value(t, `llm_d_epp_request_duration_seconds_bucket{${L},le="0.5"}`), 2);
  assert.equal(value(t, `llm_d_epp_request_duration_seconds_bucket{${L},le="+Inf"}`), 4);
  assert.ok(Math.abs(value(t, `llm_d_epp_request_duration_seconds_sum{${L}}`)! - 4.6) < 1e-9);
});
