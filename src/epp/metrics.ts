// The endpoint picker's own series, on the gateway's registry (its /metrics): ext_proc streams by how they
// ended, and which of the endpoints it named the proxy used. Decisions, TTFT and latency per backend are the
// gateway's series (ear_routing_decisions_total, ear_time_to_first_token_seconds, …), recorded the same way.
import { Counter, Gauge, type Registry } from 'prom-client';

/** How a stream's request ended at the picker. */
export type EppOutcome =
  | 'routed' // endpoints named; the request went to the proxy's upstream
  | 'passthrough' // not an inference request (no body, another path): an endpoint named without admission
  | 'shed' // admission's queue was full: 429
  | 'rate_limited' // the client's token bucket was empty (rateLimits): 429
  | 'no_endpoint' // nothing serves the model among the allowed endpoints: 503
  | 'queue_timeout' // waited for admission past queueTimeoutMs: 504
  | 'rejected' // the request itself was wrong (400, 404, 413)
  | 'draining' // waited for admission until the picker shut down: 503
  | 'aborted' // the proxy ended the stream before an answer
  | 'error'; // anything else (500)

/** Which endpoint served: the first named, a later one (the proxy's fallback), or one the picker did not name. */
export type ServedKind = 'primary' | 'fallback' | 'unlisted' | 'unreported';

export class EppMetrics {
  readonly requests: Counter<'outcome'>;
  readonly served: Counter<'kind'>;
  readonly aborts: Counter<'phase'>;
  readonly streams: Gauge;

  constructor (registry: Registry, active: () => number) {
    this.requests = new Counter({ name: 'ear_epp_requests_total', help: 'ext_proc requests by outcome (routed, passthrough, shed, rate_limited, no_endpoint, queue_timeout, rejected, draining, aborted, error).', labelNames: ['outcome'], registers: [registry] });
    this.served = new Counter({ name: 'ear_epp_served_total', help: 'Responses by which named endpoint served them (primary, fallback, unlisted, unreported), from x-gateway-destination-endpoint-served.', labelNames: ['kind'], registers: [registry] });
    this.aborts = new Counter({ name: 'ear_epp_stream_aborts_total', help: 'ext_proc streams that ended before their response did (proxy or client went away), by phase (queued, request, response).', labelNames: ['phase'], registers: [registry] });
    this.streams = new Gauge({ name: 'ear_epp_streams_active', help: 'ext_proc streams open now.', registers: [registry], collect () { this.set(active()); } });
  }
}
