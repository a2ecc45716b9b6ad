// What EAR asks of tracing, as plain interfaces. The request path holds none of it: request-spans.ts subscribes
// these to the pipeline's events when tracing is on. The OpenTelemetry SDK behind them (otel-tracing.ts) is
// imported only when otel-env.ts says tracing is on, so an unconfigured gateway never loads it.
//
// Spans (docs/tracing.md): one SERVER span per OpenAI request (continuing the client's traceparent), and under
// it `ear.admission` (queued time, scheduler level), `ear.route` (policy, pod, matched prefix blocks,
// candidates; one per attempt), `ear.kv_transfer` (a migration's or a P/D prefill's KV move) and one CLIENT span
// per upstream attempt, whose context is the traceparent the engine gets. ear-proactive's idle moves are root
// spans `ear.kv_transfer` of their own. `ear epp` makes the same server, admission and route spans per picked
// request; the proxy sends the request, so instead of a CLIENT span the response is watched on the server span
// (ProxiedTrace), whose context the engine gets. Times are the gateway clock's (epoch ms) or performance.now() ms: the
// SDK takes both.
import type { TraceHeaders } from '../upstream/traceparent.js';
import type { TransferFacts } from '../request/kv-transfer-step.js';

export type { TransferFacts };
import { tracingDecision, type Env } from './otel-env.js';

export interface RequestStart {
  /** The OpenAI route (/v1/chat/completions or /v1/completions). */
  path: string;
  /** The client's traceparent and tracestate headers ('' when absent). */
  traceparent: string;
  tracestate: string;
  /** When the request arrived. */
  startTime: number;
  requestId: string;
  /**
   * How the request reached EAR: 'http' (ear serve, the default) or 'ext_proc' (ear epp: Envoy asks which
   * endpoint, then sends the request itself); the server span is named `ext_proc POST <path>` for the latter.
   */
  via?: 'http' | 'ext_proc';
}

export interface Tracing {
  request (r: RequestStart): RequestTrace;
  /** An idle session moved by ear-proactive's migration thread: a root span of its own. */
  proactiveTransfer (t: TransferFacts & { source: string; target: string; seconds: number; endTime: number }): void;
  /** Ends the spans' export: flushes what is buffered (on drain). */
  shutdown (): Promise<void>;
}

export interface RequestTrace {
  /** False when the sampler dropped this request: nothing it is told is recorded (facts need not be computed). */
  readonly recording: boolean;
  /** The request's parsed facts. The session id is recorded as a hash, never as sent. */
  features (model: string, sessionId: string | null, promptTokens: number, promptBlocks: number): void;
  /** `startTime`: when the request was submitted to admission (default: now); the span ends with AdmissionTrace.end. */
  admission (priorityClass: number, startTime?: number): AdmissionTrace;
  routed (r: RoutingFacts): void;
  transfer (kind: 'migration' | 'pd', source: string, target: string): TransferTrace;
  upstream (backend: string, url: string, attempt: number): UpstreamTrace;
  /** ear epp: the response another proxy sends, watched in passing (facts on the server span). */
  proxied (): ProxiedTrace;
  /** The client's answer: its status (0 if none was sent), whether the client went away, the error answered with. */
  end (status: number, aborted: boolean, error: unknown): void;
}

/**
 * A request EAR routes but does not send (ear epp): no CLIENT span (the proxy makes the call), so the engine's
 * parent is the server span, which lasts until the response's end (the route span ends at the decision, and
 * names the primary even when the proxy falls back).
 */
export interface ProxiedTrace {
  /** traceparent (and tracestate) for the engine: the server span's context. */
  readonly headers: TraceHeaders;
  /** The endpoint the proxy reports as having served (null: not reported) and how it relates to those named. */
  served (endpoint: string | null, relation: 'primary' | 'fallback' | 'unlisted' | 'unreported'): void;
  /** The first content token passed; `ttftMs` from the request's arrival. */
  firstToken (ttftMs: number): void;
  usage (u: UsageFacts): void;
  /** The stream ended before the response did (client gone, proxy reset or cancel): the span ends in error. */
  abandoned (phase: 'queued' | 'response'): void;
}

export type AdmissionOutcome = 'released' | 'queue_full' | 'timeout' | 'shutdown' | 'no_candidate' | 'cancelled' | 'error';

export interface AdmissionTrace {
  /** `level`: the scheduler level the request was released from (null if it was not released). */
  end (outcome: AdmissionOutcome, waitMs: number, level: number | null, promoted: boolean): void;
}

export interface RoutingFacts {
  policy: string;
  pod: string;
  reason: string;
  /** 0 for the first placement, n for the n-th retry. */
  attempt: number;
  /** When the decision was made (the routing state's clock). */
  decidedAt: number;
  /** Backends that could take the request (serve the model, healthy, not draining, not excluded). */
  candidates: number;
  /** Leading prompt blocks the prefix index places on the chosen pod (null if the state does not say). */
  matchedBlocks: number | null;
  /** The pod the session moves from, for a migration. */
  migrateFrom: string | null;
  /** ear epp: the endpoints named after the primary for the proxy to fall back on. */
  fallbacks?: number;
  /** ear epp: whether the proxy's endpoint subset (subset hint or conformance header) restricted the candidates. */
  subsetHint?: boolean;
}


export interface TransferTrace {
  /** traceparent (and tracestate) for the source leg's requests: this span's context. */
  readonly headers: TraceHeaders;
  /** `servedBy`: the backend the request went to after the transfer (the source again, if it failed). */
  end (t: TransferFacts, servedBy: string): void;
}

export interface UsageFacts {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number | null;
}

export interface UpstreamTrace {
  /** traceparent (and tracestate) for the engine: this span's context. */
  readonly headers: TraceHeaders;
  /** The first content token passed; `ttftMs` from the request's arrival. */
  firstToken (ttftMs: number): void;
  /**
   * The attempt's outcome: `kind` as proxy.ts's AttemptResult (done, retryable, broken, busy, aborted), the
   * engine's status if it answered, the usage it reported.
   */
  end (kind: string, status: number | null, usage: UsageFacts | null, error: unknown): void;
}

export interface TracingLogger {
  info (obj: object, msg: string): void;
  warn (obj: object, msg: string): void;
}

/** Tracing as the environment asks: null (and nothing of OpenTelemetry loaded) when off. */
export async function startTracing (env: Env = process.env, log?: TracingLogger): Promise<Tracing | null> {
  const d = tracingDecision(env);
  if (!d.enabled) return null;
  const { startOtelTracing } = await import('./otel-tracing.js');
  const t = startOtelTracing();
  log?.info({ reason: d.reason }, 'tracing on');
  return t;
}
