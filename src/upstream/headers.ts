// Every header EAR sends to an engine, in one place: an allowlist, not a filter. Nothing of the client's
// request is copied upstream except its request id (requestId() keeps it only if it is a short token) and W3C
// trace context: with tracing on, EAR's own upstream span's traceparent (and the trace's tracestate); with
// tracing off, the client's traceparent and tracestate as they came, if valid (src/telemetry/traceparent.ts). So a
// client's Authorization, Cookie, Host, hop-by-hop headers (Connection, Keep-Alive, TE, Trailer,
// Transfer-Encoding, Upgrade, Proxy-*) and EAR's own x-ear-* headers never reach an engine. The upstream client
// adds `host` (the backend's, from config) and `content-length` (of the body it sends).
//
// The body is not a header but obeys the same rule: a client's kv_transfer_params are stripped
// (request-body.ts, context-prefill.ts); only a KV connector's own reach an engine.
import type { TraceHeaders } from './traceparent.js';

/** The names EAR may send upstream, besides host and content-length. */
export const UPSTREAM_HEADER_NAMES = ['content-type', 'x-request-id', 'authorization', 'traceparent', 'tracestate'] as const;

export type UpstreamHeaders = ReadonlyArray<readonly [string, string]>;

const NO_TRACE: TraceHeaders = [];

/** A request's headers to an engine: the JSON content type, its (sanitized) request id and its trace context, if any. */
export function requestHeaders (rid: string, trace: TraceHeaders = NO_TRACE): UpstreamHeaders {
  if (trace.length === 0) return [['content-type', 'application/json'], ['x-request-id', rid]];
  return [['content-type', 'application/json'], ['x-request-id', rid], ...trace];
}

/**
 * The headers every request to one backend carries: its engine's own API key (vLLM --api-key), from the
 * backend's config only, never a client's.
 */
export function backendHeaders (apiKey: string | null): UpstreamHeaders {
  return apiKey === null ? [] : [['authorization', `Bearer ${apiKey}`]];
}
