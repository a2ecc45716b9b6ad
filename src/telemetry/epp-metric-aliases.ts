// The same figures under the names llm-d's endpoint picker exports (`llm_d_epp_*`, llm-d router 0.9+) and the
// Gateway API Inference Extension's older names it still writes (`inference_pool_*`,
// `inference_extension_scheduler_e2e_duration_seconds`), so dashboards and autoscalers built for llm-d read EAR.
// Only where the meaning is the same: pool figures from the engines' own /metrics as EAR polls them, the
// admission queue, the routing decision time, requests answered and their latencies. Derived when scraped from what EAR already
// keeps (no work on the request path). Labels are bounded: the pool name, one series per live backend (a
// backend that leaves is gone at the next scrape), admission levels, HTTP statuses; never a session, user or
// request id. llm-d's per-request model / fairness labels are exported empty (EAR does not key its counts by
// them), which Prometheus reads as absent.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { FastCounter, FastHistogram } from './fast-metrics.js';

/** What one backend contributes: its id (pod name under discovery), health, and its engine's last figures. */
export interface AliasBackend {
  id: string;
  ready: boolean;
  /** Requests EAR has in flight on it. */
  inFlight: number;
  load: { running: number; waiting: number; kvUsage: number } | null;
}

export interface EppAliasSource {
  /** The InferencePool's name ('' when EAR has none): the `name` / `inference_pool` label. */
  pool (): string;
  backends (): Iterable<AliasBackend>;
  /** Requests waiting for admission, by priority level. */
  queueDepthByLevel (): readonly number[];
  /** ear_requests_total{route, status, backend}. */
  requests: FastCounter;
  /** ear_routing_decision_seconds{policy}. */
  decisionSeconds: FastHistogram;
  /** ear_time_to_first_token_seconds, ear_e2e_request_latency_seconds, ear_time_per_output_token_seconds {backend}. */
  ttftSeconds: FastHistogram;
  e2eSeconds: FastHistogram;
  tpotSeconds: FastHistogram;
}

interface PoolStats { ready: number; n: number; kv: [number, number]; queue: [number, number]; running: [number, number] }

function meanStd (xs: number[]): [number, number] {
  if (xs.length === 0) return [0, 0];
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const variance = xs.reduce((a, b) => a + (b - mean) ** 2, 0) / xs.length;
  return [mean, Math.sqrt(variance)];
}

function poolStats (backends: Iterable<AliasBackend>): PoolStats {
  const kv: number[] = [];
  const queue: number[] = [];
  const running: number[] = [];
  let ready = 0;
  for (const b of backends) {
    if (!b.ready) continue;
    ready++;
    if (b.load === null) continue;
    kv.push(b.load.kvUsage);
    queue.push(b.load.waiting);
    running.push(b.load.running);
  }
  return { ready, n: kv.length, kv: meanStd(kv), queue: meanStd(queue), running: meanStd(running) };
}

/**
 * A counter that only goes up although it sums series that can vanish (a departed backend's ear_requests_total
 * series are deleted): each scrape adds the growth of every series seen last time, so a deletion is not read by
 * Prometheus as a counter reset. `last` holds one entry per live source series.
 */
class MonotonicSum {
  readonly #last = new Map<string, number>();
  total = 0;

  add (entries: Iterable<[string, number]>): void {
    const seen = new Set<string>();
    for (const [key, value] of entries) {
      seen.add(key);
      const prev = this.#last.get(key);
      // A series recreated after a deletion starts from 0 again (seen here as a drop; one deleted and recreated
      // between two scrapes and already past its old value is undercounted by that old value).
      this.total += prev === undefined || value < prev ? value : value - prev;
      this.#last.set(key, value);
    }
    for (const key of this.#last.keys()) if (!seen.has(key)) this.#last.delete(key);
  }
}

export function registerEppMetricAliases (registry: Registry, src: EppAliasSource): void {
  let cached: { at: number; stats: PoolStats } | null = null;
  // The pool gauges of one scrape share one pass over the backends.
  const stats = (): PoolStats => {
    const now = Date.now();
    if (cached === null || now - cached.at > 50) cached = { at: now, stats: poolStats(src.backends()) };
    return cached.stats;
  };
  const poolGauge = (name: string, help: string, read: (s: PoolStats) => number | null): void => {
    new Gauge({
      name, help, labelNames: ['name'], registers: [registry],
      collect () {
        this.reset();
        const v = read(stats());
        if (v !== null) this.set({ name: src.pool() }, v);
      }
    });
  };
  const withLoad = (f: (s: PoolStats) => number) => (s: PoolStats): number | null => (s.n === 0 ? null : f(s));
  for (const [prefix, ready] of [['llm_d_epp', 'ready_endpoints'], ['inference_pool', 'ready_pods']] as const) {
    poolGauge(`${prefix}_${ready}`, 'The number of ready endpoints in the inference pool (backends passing EAR\'s health checks).', (s) => s.ready);
    poolGauge(`${prefix}_average_kv_cache_utilization`, 'The average KV cache utilization of the pool\'s ready engines (0..1, as they report it).', withLoad((s) => s.kv[0]));
    poolGauge(`${prefix}_average_queue_size`, 'The average number of requests waiting in the ready engines\' own queues.', withLoad((s) => s.queue[0]));
    poolGauge(`${prefix}_average_running_requests`, 'The average number of requests running on the pool\'s ready engines.', withLoad((s) => s.running[0]));
  }
  poolGauge('llm_d_epp_std_dev_kv_cache_utilization', 'The standard deviation of KV cache utilization across the pool\'s ready engines.', withLoad((s) => s.kv[1]));
  poolGauge('llm_d_epp_std_dev_queue_size', 'The standard deviation of the ready engines\' queue sizes.', withLoad((s) => s.queue[1]));
  poolGauge('llm_d_epp_std_dev_running_requests', 'The standard deviation of the ready engines\' running requests.', withLoad((s) => s.running[1]));

  for (const [name, label] of [['llm_d_epp_per_endpoint_queue_size', 'model_server_endpoint'], ['inference_pool_per_pod_queue_size', 'model_server_pod']] as const) {
    new Gauge({
      name, help: 'Requests waiting in each engine\'s own queue, as it reports it (one series per live backend).', labelNames: ['name', label], registers: [registry],
      collect () {
        this.reset();
        const pool = src.pool();
        for (const b of src.backends()) if (b.load !== null) this.set({ name: pool, [label]: b.id }, b.load.waiting);
      }
    });
  }

  new Gauge({
    name: 'llm_d_epp_flow_control_queue_size', help: 'Requests held in EAR\'s admission queue, by priority level (EAR keys no fairness id or model here: those labels are empty).',
    labelNames: ['fairness_id', 'priority', 'inference_pool', 'model_name', 'target_model_name'], registers: [registry],
    collect () {
      this.reset();
      const pool = src.pool();
      src.queueDepthByLevel().forEach((n, level) => this.set({ fairness_id: '', priority: String(level), inference_pool: pool, model_name: '', target_model_name: '' }, n));
    }
  });

  const requestTotal = new MonotonicSum();
  const errorTotals = new Map<string, MonotonicSum>();
  const readRequests = async (): Promise<void> => {
    const { values } = await src.requests.get();
    requestTotal.add(values.map((v) => [JSON.stringify(v.labels), v.value]));
    const byStatus = new Map<string, Array<[string, number]>>();
    for (const v of values) {
      const status = String(v.labels.status);
      if (Number(status) < 400) continue;
      let list = byStatus.get(status);
      if (list === undefined) byStatus.set(status, list = []);
      list.push([JSON.stringify(v.labels), v.value]);
    }
    for (const [status, entries] of byStatus) {
      let sum = errorTotals.get(status);
      if (sum === undefined) errorTotals.set(status, sum = new MonotonicSum());
      sum.add(entries);
    }
    // A status no longer present keeps its total (counters do not go down); statuses are a small fixed set.
    for (const [status, sum] of errorTotals) if (!byStatus.has(status)) sum.add([]);
  };
  const modelLabels = { model_name: '', target_model_name: '', fairness_id: '', priority: '' };
  new Counter({
    name: 'llm_d_epp_request_total', help: 'Requests EAR answered (all routes, statuses and backends).',
    labelNames: ['model_name', 'target_model_name', 'fairness_id', 'priority'], registers: [registry],
    async collect () {
      await readRequests();
      this.reset();
      this.inc(modelLabels, requestTotal.total);
    }
  });
  new Counter({
    name: 'llm_d_epp_request_error_total', help: 'Requests EAR answered with an error status, by status code.',
    labelNames: ['model_name', 'target_model_name', 'fairness_id', 'priority', 'error_code'], registers: [registry],
    async collect () {
      await readRequests();
      this.reset();
      for (const [status, sum] of errorTotals) this.inc({ ...modelLabels, error_code: status }, sum.total);
    }
  });

  new Gauge({
    name: 'llm_d_epp_request_running', help: 'Requests EAR has in flight on the engines.', labelNames: ['model_name', 'target_model_name', 'fairness_id', 'priority'], registers: [registry],
    collect () {
      let n = 0;
      for (const b of src.backends()) n += b.inFlight;
      this.reset();
      this.set(modelLabels, n);
    }
  });

  const merged = (name: string, help: string, source: FastHistogram, labels: Record<string, string> = {}): void => {
    registry.registerMetric(new MergedHistogram(name, help, source, labels) as never);
  };
  for (const name of ['llm_d_epp_scheduler_e2e_duration_seconds', 'inference_extension_scheduler_e2e_duration_seconds']) {
    merged(name, 'Time to pick an endpoint for one request (EAR\'s routing decision: prefix match and policy), all policies.', src.decisionSeconds);
  }
  merged('llm_d_epp_request_duration_seconds', 'End-to-end request latency (received to response ended), all backends.', src.e2eSeconds, modelLabels);
  merged('llm_d_epp_request_ttft_seconds', 'Time to first token (received to first content token sent), all backends.', src.ttftSeconds, { ...modelLabels, streaming: '' });
  merged('llm_d_epp_request_streaming_tpot_seconds', 'Time per output token, (E2E - TTFT) / (output tokens - 1), all backends.', src.tpotSeconds, modelLabels);
}

/**
 * A histogram that exports the sum of another one's series over all their labels (same buckets), with `labels`
 * on every line. Monotonic like MonotonicSum: a source series that is deleted (a departed backend's) keeps what
 * it counted, so the sum never looks like a counter reset.
 */
class MergedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly labelNames: readonly string[];
  readonly #buckets = new Map<string, MonotonicSum>();
  readonly #sum = new MonotonicSum();
  readonly #count = new MonotonicSum();

  constructor (readonly name: string, readonly help: string, readonly source: FastHistogram, readonly labels: Record<string, string>) {
    this.labelNames = Object.keys(labels);
  }

  async get (): Promise<{ name: string; help: string; type: string; aggregator: string; values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> }> {
    const byLe = new Map<string, Array<[string, number]>>();
    const sums: Array<[string, number]> = [];
    const counts: Array<[string, number]> = [];
    for (const v of (await this.source.get()).values) {
      const { le, ...own } = v.labels;
      const key = JSON.stringify(own);
      if (v.metricName?.endsWith('_bucket')) {
        let list = byLe.get(String(le));
        if (list === undefined) byLe.set(String(le), list = []);
        list.push([key, v.value]);
      } else if (v.metricName?.endsWith('_sum')) sums.push([key, v.value]);
      else if (v.metricName?.endsWith('_count')) counts.push([key, v.value]);
    }
    // Bounds in the source's order (ascending, +Inf last); a bound the source stopped listing keeps its total.
    for (const le of byLe.keys()) if (!this.#buckets.has(le)) this.#buckets.set(le, new MonotonicSum());
    for (const [le, acc] of this.#buckets) acc.add(byLe.get(le) ?? []);
    this.#sum.add(sums);
    this.#count.add(counts);
    const values: Array<{ labels: Record<string, string | number>; value: number; metricName: string }> = [];
    for (const [le, acc] of this.#buckets) values.push({ labels: { ...this.labels, le }, value: acc.total, metricName: `${this.name}_bucket` });
    values.push({ labels: { ...this.labels }, value: this.#sum.total, metricName: `${this.name}_sum` });
    values.push({ labels: { ...this.labels }, value: this.#count.total, metricName: `${this.name}_count` });
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  reset (): void {}
}
