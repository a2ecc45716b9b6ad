// The gateway's own Prometheus metrics (GET /metrics). Latency histograms are in seconds, as Prometheus wants.
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 40, 80, 160, 320, 640];
const FAST_BUCKETS = [1e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 0.1];

export class GatewayMetrics {
  readonly registry = new Registry();
  readonly requests = new Counter({ name: 'ear_requests_total', help: 'Requests answered, by route, status and backend.', labelNames: ['route', 'status', 'backend'], registers: [this.registry] });
  readonly decisionSeconds = new Histogram({ name: 'ear_routing_decision_seconds', help: 'Time to route one request (prefix match and policy).', buckets: FAST_BUCKETS, labelNames: ['policy'], registers: [this.registry] });
  readonly featureSeconds = new Histogram({ name: 'ear_request_features_seconds', help: 'Time to parse, render, tokenize and hash a request in the route pool (round trip).', buckets: FAST_BUCKETS, registers: [this.registry] });
  readonly queueWaitSeconds = new Histogram({ name: 'ear_queue_wait_seconds', help: 'Time a request waited for admission.', buckets: LATENCY_BUCKETS, registers: [this.registry] });
  readonly ttftSeconds = new Histogram({ name: 'ear_time_to_first_token_seconds', help: 'Request received to first content token sent.', buckets: LATENCY_BUCKETS, labelNames: ['backend'], registers: [this.registry] });
  readonly tpotSeconds = new Histogram({ name: 'ear_time_per_output_token_seconds', help: '(E2E − TTFT) / (output tokens − 1).', buckets: [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5, 1], labelNames: ['backend'], registers: [this.registry] });
  readonly e2eSeconds = new Histogram({ name: 'ear_e2e_request_latency_seconds', help: 'Request received to response ended.', buckets: LATENCY_BUCKETS, labelNames: ['backend'], registers: [this.registry] });
  readonly upstreamErrors = new Counter({ name: 'ear_upstream_errors_total', help: 'Upstream attempts that failed, by backend and kind (connect, status, midstream).', labelNames: ['backend', 'kind'], registers: [this.registry] });
  readonly retries = new Counter({ name: 'ear_upstream_retries_total', help: 'Requests retried on another backend.', registers: [this.registry] });
  readonly decisions = new Counter({ name: 'ear_routing_decisions_total', help: 'Routing decisions by policy, backend and reason.', labelNames: ['policy', 'backend', 'reason'], registers: [this.registry] });
  readonly backendUp = new Gauge({ name: 'ear_backend_up', help: '1 if the backend passes its health checks.', labelNames: ['backend'], registers: [this.registry] });
  readonly inFlight = new Gauge({ name: 'ear_backend_in_flight', help: 'Requests in flight per backend.', labelNames: ['backend'], registers: [this.registry] });
  readonly tableSize = new Gauge({ name: 'ear_table_entries', help: 'Entries in each shared table.', labelNames: ['table'], registers: [this.registry] });
  readonly tableDropped = new Gauge({ name: 'ear_table_dropped_total', help: 'What each table\'s bound dropped (evictions, rejected pushes, dropped ring ops) since start.', labelNames: ['table'], registers: [this.registry] });
  readonly clientAborts = new Counter({ name: 'ear_client_aborts_total', help: 'Requests the client abandoned before the response ended.', registers: [this.registry] });

  async text (): Promise<string> {
    return this.registry.metrics();
  }
}
