// The gateway's own Prometheus metrics (GET /metrics). Latency histograms are in seconds, as Prometheus wants.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { FastCounter, FastHistogram, type CounterSeries, type HistogramSeries } from './fast-metrics.js';
import type { KvBackendStats, KvThreadStats } from '../kvevents/kv-events-thread.js';
import type { SessionStoreStats } from '../store/session-store.js';
import { registerEppMetricAliases, type EppAliasSource } from './epp-metric-aliases.js';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320, 640];
const FAST_BUCKETS = [1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1];

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests = new FastCounter({ name: 'ear_requests_total', help: 'Requests answered, by route, status and backend.', labelNames: ['route', 'status', 'backend'], registers: [this.registry] });
  readonly decisionSeconds = new FastHistogram({ name: 'ear_routing_decision_seconds', help: 'Time to route one request (prefix match and policy).', buckets: FAST_BUCKETS, labelNames: ['policy'], registers: [this.registry] });
  readonly featureSeconds = new FastHistogram({ name: 'ear_request_features_seconds', help: 'Time to parse, render, tokenize and hash a request in the route pool (round trip).', buckets: FAST_BUCKETS, registers: [this.registry] });
  readonly queueWaitSeconds = new FastHistogram({ name: 'ear_queue_wait_seconds', help: 'Time a request waited in the gateway before routing (for a route thread).', buckets: LATENCY_BUCKETS, registers: [this.registry] });
  readonly ttftSeconds = new FastHistogram({ name: 'ear_time_to_first_token_seconds', help: 'Request received to first content token sent.', buckets: LATENCY_BUCKETS, labelNames: ['backend'], registers: [this.registry] });
  readonly tpotSeconds = new FastHistogram({ name: 'ear_time_per_output_token_seconds', help: '(E2E − TTFT) / (output tokens − 1).', buckets: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1], labelNames: ['backend'], registers: [this.registry] });
  readonly e2eSeconds = new FastHistogram({ name: 'ear_e2e_request_latency_seconds', help: 'Request received to response ended.', buckets: LATENCY_BUCKETS, labelNames: ['backend'], registers: [this.registry] });
  readonly upstreamBusy = new Counter({ name: 'ear_upstream_busy_total', help: 'Attempts not sent because the backend\'s connection pool had upstreamMaxQueued requests waiting (the request went to another backend, or got 503).', labelNames: ['backend'], registers: [this.registry] });
  readonly upstreamErrors = new Counter({ name: 'ear_upstream_errors_total', help: 'Upstream attempts that failed, by backend and kind (connect, status, midstream).', labelNames: ['backend', 'kind'], registers: [this.registry] });
  readonly streamResumes = new Counter({ name: 'ear_stream_resumes_total', help: 'Streams cut after their first byte, by how they ended: resumed on another engine, finished (only the terminal event was lost), or not resumed (tool_call, unsupported, limit, no_backend: the stream ended with an error event).', labelNames: ['outcome'], registers: [this.registry] });
  readonly retries = new FastCounter({ name: 'ear_upstream_retries_total', help: 'Requests retried on another backend.', registers: [this.registry] });
  readonly decisions = new FastCounter({ name: 'ear_routing_decisions_total', help: 'Routing decisions by policy, backend and reason.', labelNames: ['policy', 'backend', 'reason'], registers: [this.registry] });
  readonly backendUp = new Gauge({ name: 'ear_backend_up', help: '1 if the backend passes its health checks.', labelNames: ['backend'], registers: [this.registry] });
  readonly engineRestarts = new Gauge({ name: 'ear_backend_restarts', help: 'Restarts of the backend\'s engine seen by its /metrics process start time changing, since this backend was added.', labelNames: ['backend'], registers: [this.registry] });
  readonly inFlight = new Gauge({ name: 'ear_backend_in_flight', help: 'Requests in flight per backend (read when scraped).', labelNames: ['backend'], registers: [this.registry] });
  readonly tableSize = new Gauge({ name: 'ear_table_entries', help: 'Entries in each shared table.', labelNames: ['table'], registers: [this.registry] });
  readonly tableDropped = new Gauge({ name: 'ear_table_dropped_total', help: 'What each table\'s bound dropped (evictions, rejected pushes, dropped ring ops) since start.', labelNames: ['table'], registers: [this.registry] });
  readonly admissionWait = new FastHistogram({ name: 'ear_admission_wait_seconds', help: 'Time a request that had to queue waited for admission, by the priority level it left from (requests placed at once are not counted).', buckets: LATENCY_BUCKETS, labelNames: ['level'], registers: [this.registry] });
  readonly clientAborts = new FastCounter({ name: 'ear_client_aborts_total', help: 'Requests the client abandoned before the response ended.', registers: [this.registry] });

  readonly #backends = new Map<string, BackendSeries>();

  /**
   * The series labelled with one backend, made once per backend id. Bounded by the backends present: one that
   * leaves has its series deleted (removeBackend).
   */
  backend (id: string): BackendSeries {
    let s = this.#backends.get(id);
    if (!s) this.#backends.set(id, s = new BackendSeries(this, id));
    return s;
  }

  /**
   * A backend left for good: deletes its series from every metric of the registry with a `backend` label, so a
   * fleet that rolls pods through does not grow /metrics forever. A BackendSeries still held records into
   * series no longer exported; backend(id) makes new ones if the id comes back. Metrics rebuilt from a source
   * on every scrape (the ear_kv_* series, from the kv-events thread's stats) come back while the source lists
   * the id: have the kv-events thread forget it too (KvEventsThread.forget). Returns the series deleted.
   */
  async removeBackend (id: string): Promise<number> {
    this.#backends.delete(id);
    let n = 0;
    for (const m of this.registry.getMetricsAsArray() as unknown[]) {
      if (m instanceof FastCounter || m instanceof FastHistogram) {
        if (m.labelNames.includes('backend')) n += m.removeWhere('backend', id);
        continue;
      }
      // A prom-client metric: its label sets are found through get(), its public read.
      const pm = m as { labelNames?: readonly string[]; get (): Promise<{ values: Array<{ labels: Record<string, string | number> }> }>; remove (labels: Record<string, string | number>): void };
      const names = pm.labelNames ?? [];
      if (!names.includes('backend')) continue;
      const seen = new Set<string>();
      for (const v of (await pm.get()).values) {
        if (v.labels.backend !== id) continue;
        // Only the metric's own labels (a histogram's lines add `le`): one removal per label set.
        const labels = Object.fromEntries(names.flatMap((k) => v.labels[k] === undefined ? [] : [[k, v.labels[k]]]));
        const key = JSON.stringify(labels);
        if (seen.has(key)) continue;
        seen.add(key);
        pm.remove(labels);
        n++;
      }
    }
    return n;
  }

  /** llm-d / Inference Extension names for the same figures (src/telemetry/epp-metric-aliases.ts). */
  registerEppAliases (src: Pick<EppAliasSource, 'pool' | 'backends' | 'queueDepthByLevel'>): void {
    registerEppMetricAliases(this.registry, { ...src, requests: this.requests, decisionSeconds: this.decisionSeconds, ttftSeconds: this.ttftSeconds, e2eSeconds: this.e2eSeconds, tpotSeconds: this.tpotSeconds });
  }

  async text (): Promise<string> {
    return this.registry.metrics();
  }
}

/**
 * One backend's children of the labelled metrics: the request path calls these instead of building a label
 * object per request. The maps are bounded by what keys them (routes × statuses, routing reasons).
 */
export class BackendSeries {
  readonly ttft: HistogramSeries;
  readonly e2e: HistogramSeries;
  readonly tpot: HistogramSeries;
  readonly #requests = new Map<string, CounterSeries>();
  readonly #decisions = new Map<string, CounterSeries>();

  constructor (readonly metrics: GatewayMetrics, readonly id: string) {
    this.ttft = metrics.ttftSeconds.labels(id);
    this.e2e = metrics.e2eSeconds.labels(id);
    this.tpot = metrics.tpotSeconds.labels(id);
  }

  /** ear_requests_total{route, status, backend}. */
  requests (route: string, status: number): CounterSeries {
    const key = route + status;
    let c = this.#requests.get(key);
    if (!c) this.#requests.set(key, c = this.metrics.requests.labels(route, String(status), this.id));
    return c;
  }

  /** ear_routing_decisions_total{policy, backend, reason}. */
  decisions (policy: string, reason: string): CounterSeries {
    const key = policy + ' ' + reason;
    let c = this.#decisions.get(key);
    if (!c) this.#decisions.set(key, c = this.metrics.decisions.labels(policy, this.id, reason));
    return c;
  }
}

/** Counters the kv-events thread keeps per backend, exported as `ear_kv_<name>_total{backend}`. */
const KV_COUNTERS: Array<[keyof KvBackendStats, string, string]> = [
  ['batches', 'batches', 'KV-event batches applied (live and replayed).'],
  ['events', 'events', 'KV events applied.'],
  ['blocksStored', 'blocks_stored', 'Blocks added to the prefix index by BlockStored events.'],
  ['blocksRemoved', 'blocks_removed', 'Block tiers removed from the prefix index by BlockRemoved events.'],
  ['cleared', 'all_blocks_cleared', 'AllBlocksCleared events applied.'],
  ['gaps', 'gaps', 'Sequence gaps seen on the live stream.'],
  ['replays', 'replays', 'Replay requests sent to the engine.'],
  ['replayedBatches', 'replayed_batches', 'Batches recovered from the engine\'s replay buffer.'],
  ['resyncs', 'resyncs', 'Resyncs (engine restart or loss replay could not cover): the backend\'s entries were cleared.'],
  ['restarts', 'restarts', 'Of the resyncs, engine restarts: a replayed batch differed from the one applied, or /metrics showed a new process.'],
  ['reconnectChecks', 'reconnect_checks', 'Checks that the engine is the same process after its KV-event socket reconnected.'],
  ['joinChecks', 'join_checks', 'Replays asked when the KV-event socket first joined the engine, for what it published before.'],
  ['decodeErrors', 'decode_errors', 'Frames or payloads that did not decode (skipped).'],
  ['skippedEvents', 'unknown_events', 'Events of unknown type (skipped).'],
  ['unplaceable', 'unplaceable_events', 'BlockStored events whose parent block had no mapping (skipped).'],
  ['blockSizeMismatch', 'block_size_mismatch_events', 'BlockStored events with a block size other than the gateway\'s (skipped).'],
  ['otherGroups', 'other_group_events', 'Events of KV cache groups other than 0 (skipped).'],
  ['unsupportedExtras', 'unsupported_extra_blocks', 'Blocks whose extra keys (multimodal, prompt embeds) the gateway does not hash (skipped).'],
  ['malformed', 'malformed_events', 'Events that contradict themselves (skipped).'],
  ['unknownRemoved', 'unknown_removed_blocks', 'BlockRemoved hashes with no mapping.'],
  ['mapDrops', 'map_drops', 'Engine-hash mappings dropped at kvMaxMappedBlocks (their keys left the index).'],
  ['socketErrors', 'socket_errors', 'Socket errors (each followed by a backoff).'],
  ['handlerErrors', 'handler_errors', 'Exceptions while applying a batch (caught).']
];

/**
 * Exports the kv-events thread's counters: the thread is asked once per scrape (all metrics share the answer).
 * Counters are cumulative per backend id since the gateway started.
 */
export function registerKvEventMetrics (registry: Registry, read: () => Promise<KvThreadStats>): void {
  let pending: Promise<KvThreadStats | null> | null = null;
  const fetch = (): Promise<KvThreadStats | null> => {
    pending ??= read().catch(() => null).finally(() => setTimeout(() => { pending = null; }, 50).unref());
    return pending;
  };
  for (const [field, name, help] of KV_COUNTERS) {
    new Counter({
      name: `ear_kv_${name}_total`, help, labelNames: ['backend'], registers: [registry],
      async collect () {
        const s = await fetch();
        if (!s) return;
        this.reset();
        for (const b of s.backends) this.inc({ backend: b.id }, Number(b[field]));
      }
    });
  }
  new Gauge({
    name: 'ear_kv_index_blocks', help: 'Blocks each backend holds per its KV events, by tier (gpu = confirmed, offloaded).', labelNames: ['backend', 'tier'], registers: [registry],
    async collect () {
      const s = await fetch();
      if (!s) return;
      this.reset();
      for (const b of s.backends) {
        this.set({ backend: b.id, tier: 'gpu' }, b.confirmedBlocks);
        this.set({ backend: b.id, tier: 'offloaded' }, b.offloadedBlocks);
      }
    }
  });
  new Gauge({
    name: 'ear_kv_last_apply_lag_seconds', help: 'Engine event timestamp to applied, for each backend\'s last batch.', labelNames: ['backend'], registers: [registry],
    async collect () {
      const s = await fetch();
      if (!s) return;
      this.reset();
      for (const b of s.backends) if (b.active && b.lastApplyLagMs !== null) this.set({ backend: b.id }, b.lastApplyLagMs / 1000);
    }
  });
  new Gauge({
    name: 'ear_kv_apply_lag_seconds', help: 'Engine event timestamp to applied over the last 4096 batches (all backends), by quantile.', labelNames: ['quantile'], registers: [registry],
    async collect () {
      const s = await fetch();
      if (!s) return;
      this.reset();
      if (s.applyLagP50Ms !== null) this.set({ quantile: '0.5' }, s.applyLagP50Ms / 1000);
      if (s.applyLagP99Ms !== null) this.set({ quantile: '0.99' }, s.applyLagP99Ms / 1000);
    }
  });
  const totals: Array<[keyof KvThreadStats, string, string]> = [
    ['purged', 'ear_kv_backends_purged_total', 'Backends whose KV-event entries were purged (removed, drained or down).'],
    ['purgedPods', 'ear_kv_pod_rows_purged_total', 'Released pod rows whose every index entry was purged.'],
    ['purgeSweeps', 'ear_kv_purge_sweeps_total', 'Sweeps of the prefix index that purged released pod rows (rows released together share one).'],
    ['stale', 'ear_kv_stale_ops_total', 'Record ops dropped because their pod row was released after they were decided (old lease).'],
    ['retiredDropped', 'ear_kv_retired_backends_dropped_total', 'Departed backends whose counters were dropped at the bound (oldest first).']
  ];
  for (const [field, name, help] of totals) registerTotal(registry, name, help, async () => { const s = await fetch(); return s === null ? null : Number(s[field]); });
}

/** What registerPodRowMetrics reads at each scrape. */
export interface PodRowSource {
  /** Rows leased or releasing, and of them releasing (drained or draining, not yet free). */
  rows (): { capacity: number; used: number; releasing: number };
  /** Released rows waiting for their purge on the kv-events chain (queued or in the sweep). */
  purgesWaiting (): number;
  /** Backends waiting for a pod row now, and how many ever had to (src/fleet/fleet.ts). */
  waits (): { waiting: number; waited: number };
}

/**
 * The pod rows: how many are taken, how many wait for their purge, and how long a released row took to be free
 * again (release → purge confirmed). Returns the function that records one such time (seconds).
 */
export function registerPodRowMetrics (registry: Registry, src: PodRowSource): (seconds: number) => void {
  const rows = new Gauge({
    name: 'ear_pod_rows', help: 'Pod rows by state: leased (a backend on it), releasing (its backend left, purge not yet confirmed), free.',
    labelNames: ['state'], registers: [registry],
    collect () {
      const r = src.rows();
      this.set({ state: 'leased' }, r.used - r.releasing);
      this.set({ state: 'releasing' }, r.releasing);
      this.set({ state: 'free' }, r.capacity - r.used);
    }
  });
  void rows;
  new Gauge({
    name: 'ear_pod_row_purges_waiting', help: 'Released pod rows waiting for the kv-events thread to purge them (batched: one sweep for all).',
    registers: [registry], collect () { this.set(src.purgesWaiting()); }
  });
  new Gauge({
    name: 'ear_pod_rows_waiting', help: 'Backends waiting for a pod row (every row leased or releasing); each joins as a row comes free.',
    registers: [registry], collect () { this.set(src.waits().waiting); }
  });
  registerTotal(registry, 'ear_pod_row_waits_total', 'Backends that found every pod row in use and had to wait for one (raise maxPods if it keeps counting).', () => src.waits().waited);
  const free = new Histogram({
    name: 'ear_pod_row_free_seconds', help: 'Time from a backend\'s release (its lease moved) to its pod row free again (index purge confirmed).',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10], registers: [registry]
  });
  return (seconds) => free.observe(seconds);
}

/**
 * A counter that mirrors a running total kept elsewhere (a thread's or a table's stats), read when scraped;
 * `read` answering null leaves the last value.
 */
export function registerTotal (registry: Registry, name: string, help: string, read: () => number | null | Promise<number | null>): void {
  new Counter({
    name, help, registers: [registry],
    async collect () {
      const v = await read();
      if (v === null) return;
      this.reset();
      this.inc(v);
    }
  });
}

/**
 * How the routing decisions walked the prefix index (src/core/router.ts PrefixWalkStats): from block 0, or from the
 * blocks a session's last turn found its pod holding; and of the latter, those its pod's loss ring vouched for after
 * the pod lost blocks. Few walks from a hint on session traffic say the hints do not hold (the index's capacity,
 * precise mode's short TTL), and each whole walk reads the index once per block of the prompt.
 */
export function registerPrefixWalkMetrics (registry: Registry, read: () => { full: number; shortcut: number; shortcutAfterLoss: number }): void {
  new Counter({
    name: 'ear_prefix_walks_total',
    help: 'Routing decisions\' walks of the prefix index, by where they started: block 0 (whole) or a session\'s hint.',
    labelNames: ['start'],
    registers: [registry],
    collect () {
      const w = read();
      this.reset();
      this.inc({ start: 'block0' }, w.full);
      this.inc({ start: 'hint' }, w.shortcut);
    }
  });
  registerTotal(registry, 'ear_prefix_hints_after_loss_total',
    'Walks from a session\'s hint although its pod had lost blocks since: its loss ring named none of the hint\'s, or the first.',
    () => read().shortcutAfterLoss);
}

/** What registerRetentionMetrics reads at each scrape (the routing host's, src/core/retention.ts). */
export interface RetentionSource {
  retained: number;
  resumed: number;
  expired: number;
  overShare: number;
  live: number;
  liveBlocks: number;
}

/**
 * Prefix retention as the routing host holds it (docs/retention.md): records live now and their blocks, records
 * made, and how they ended (evictions apart: ear_retained_prefix_evictions_total). The host is the main thread's
 * whatever the data-plane threads: what they retain reaches it with each turn's end.
 */
export function registerRetentionMetrics (registry: Registry, read: () => RetentionSource): void {
  new Gauge({ name: 'ear_retained_prefixes', help: 'Retained prefixes now (sessions in their tool gap, or kept for a client\'s retention hint).', registers: [registry], collect () { this.set(read().live); } });
  new Gauge({ name: 'ear_retained_prefix_blocks', help: 'KV blocks of the retained prefixes now.', registers: [registry], collect () { this.set(read().liveBlocks); } });
  registerTotal(registry, 'ear_retained_prefixes_total', 'Prefixes retained: turns that ended in a tool call in a session, or carried a retention hint.', () => read().retained);
  new Counter({
    name: 'ear_retained_prefixes_ended_total', help: 'Retained prefixes that ended, by how: resumed (the session\'s next turn came), expired (its TTL ran out), over_share (dropped beyond retention.maxShare of its engine\'s KV).',
    labelNames: ['reason'], registers: [registry],
    collect () {
      const s = read();
      this.reset();
      this.inc({ reason: 'resumed' }, s.resumed);
      this.inc({ reason: 'expired' }, s.expired);
      this.inc({ reason: 'over_share' }, s.overShare);
    }
  });
}

/** What registerSessionStoreMetrics reads at each scrape (src/store/shared-sessions.ts). */
export interface SessionStoreSource {
  store: { stats (): SessionStoreStats };
  follows: { bind: number; cas: number };
  rerouted: number;
}

/** The shared session store's state and counters (ear_session_store_*), read from its stats() when scraped. */
export function registerSessionStoreMetrics (registry: Registry, src: SessionStoreSource): void {
  new Gauge({
    name: 'ear_session_store_up', help: '1 while the shared session store answers; 0 while down or not yet reached (the replica runs on its local session table).',
    // With data-plane threads each has a client of its own: up only while every client is (their scrape's minimum).
    labelNames: ['kind'], registers: [registry], aggregator: 'min',
    collect () {
      const s = src.store.stats();
      this.reset();
      this.set({ kind: s.kind }, s.state === 'up' ? 1 : 0);
    }
  });
  const counter = (name: string, help: string, read: (s: SessionStoreStats) => number): void => registerTotal(registry, name, help, () => read(src.store.stats()));
  new Counter({
    name: 'ear_session_store_degraded_total', help: 'Session store calls answered degraded, by reason: down (failed fast), timeout, error. The request went on from the local table.',
    labelNames: ['reason'], registers: [registry],
    collect () {
      const s = src.store.stats();
      this.reset();
      this.inc({ reason: 'down' }, s.fastFails);
      this.inc({ reason: 'timeout' }, s.timeouts);
      this.inc({ reason: 'error' }, s.errors);
    }
  });
  counter('ear_session_store_calls_total', 'Session store calls made (replays not included).', (s) => s.calls);
  counter('ear_session_store_state_changes_total', 'Session store up/down changes (each logged once).', (s) => s.stateChanges);
  counter('ear_session_store_replayed_total', 'Sessions whose writes made while the store was down were replayed when it came back.', (s) => s.replayed);
  counter('ear_session_store_backlog_dropped_total', 'Sessions whose writes made while the store was down were dropped (backlog bound, or a replay that failed).', (s) => s.backlogDropped);
  new Gauge({
    name: 'ear_session_store_backlog', help: 'Sessions whose writes wait for the store to come back.', registers: [registry],
    collect () { this.set(src.store.stats().backlog); }
  });
  new Counter({
    name: 'ear_session_store_follows_total', help: 'Binding writes lost to another replica (bind: first writer; cas: a host change), after which this replica followed the winner\'s host.',
    labelNames: ['op'], registers: [registry],
    collect () {
      this.reset();
      this.inc({ op: 'bind' }, src.follows.bind);
      this.inc({ op: 'cas' }, src.follows.cas);
    }
  });
  registerTotal(registry, 'ear_session_store_reroutes_total', 'Requests routed a second time to follow the shared binding another replica made.', () => src.rerouted);
}
