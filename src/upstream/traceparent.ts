// W3C Trace Context headers as a client sends them, checked without OpenTelemetry: with tracing off the gateway
// forwards a client's valid `traceparent` (and its `tracestate`) to the engine unchanged, so an engine that
// traces (vLLM with --otlp-traces-endpoint) joins the client's trace; anything malformed is dropped, never sent.
// With tracing on, the SDK's propagator reads them and EAR sends its own span's context instead (tracing.ts).

/** version-traceid-parentid-flags, lower-case hex; a future version may append fields after a dash. */
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_PARENT = '0'.repeat(16);
/** tracestate: at most 32 list members of at most 256 characters each; longer values are dropped. */
export const MAX_TRACESTATE_LENGTH = 512;

/** Whether `v` is a traceparent a receiver must accept (spec §3.2: version ff and all-zero ids are invalid). */
export function validTraceparent (v: string): boolean {
  if (v.length < 55 || v.length > 256) return false;
  const m = TRACEPARENT.exec(v);
  if (m === null) return false;
  if (m[1] === 'ff' || m[2] === ZERO_TRACE || m[3] === ZERO_PARENT) return false;
  // Version 00 has exactly four fields.
  return m[1] !== '00' || m[5] === undefined;
}

/** Printable ASCII only (the spec's list-member characters, commas and spaces). */
function validTracestate (v: string): boolean {
  if (v.length > MAX_TRACESTATE_LENGTH) return false;
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

export type TraceHeaders = ReadonlyArray<readonly [string, string]>;

const NONE: TraceHeaders = [];

/** The client's trace headers to forward as they are: both, traceparent alone, or none when it is not valid. */
export function clientTraceHeaders (traceparent: string, tracestate: string): TraceHeaders {
  if (traceparent === '' || !validTraceparent(traceparent)) return NONE;
  if (tracestate === '' || !validTracestate(tracestate)) return [['traceparent', traceparent]];
  return [['traceparent', traceparent], ['tracestate', tracestate]];
}
