// The OpenTelemetry side of tracing.ts, loaded (dynamically) only when tracing is on. NodeSDK reads the OTEL_*
// variables (exporter, protocol, endpoint, headers, sampler, resource, batch sizes); EAR adds no
// instrumentation of its own libraries and turns the SDK's metrics and logs pipelines off (EAR's metrics are on
// /metrics). Contexts are passed by hand from span to span, never through AsyncLocalStorage: the request path
// hops through uWS callbacks and piscina, which an async context does not follow.
// Only W3C trace context (traceparent, tracestate) is read from clients and sent to engines, whatever
// OTEL_PROPAGATORS says: those are the only trace headers upstream-headers.ts lets through.
import { createHash } from 'node:crypto';
import { NodeSDK, resources } from '@opentelemetry/sdk-node';
import { defaultTextMapGetter, defaultTextMapSetter, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Context, type ContextManager, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import type {
  AdmissionOutcome, AdmissionTrace, ProxiedTrace, RequestStart, RequestTrace, RoutingFacts, Tracing, TransferFacts, TransferTrace, UpstreamTrace, UsageFacts
} from './tracing.js';
import type { TraceHeaders } from '../upstream/traceparent.js';

const propagator = new W3CTraceContextPropagator();

/**
 * The global context manager: none that follows async calls. EAR passes contexts by hand, and the SDK's default
 * (AsyncLocalStorage) would tax every async hop of the process for nothing.
 */
const BY_HAND: ContextManager = {
  active: () => ROOT_CONTEXT,
  with: (_ctx, fn, thisArg, ...args) => fn.apply(thisArg, args),
  bind: (_ctx, target) => target,
  enable () { return this; },
  disable () { return this; }
};

/** The service name when neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES gives one. */
const DEFAULT_SERVICE_NAME = 'ear';

function serviceNameDefault (env: NodeJS.ProcessEnv): string | undefined {
  if ((env.OTEL_SERVICE_NAME ?? '').trim() !== '') return undefined;
  if (/(^|,)\s*service\.name\s*=/.test(env.OTEL_RESOURCE_ATTRIBUTES ?? '')) return undefined;
  return DEFAULT_SERVICE_NAME;
}

/** A session id as traces show it: a short digest (ids may be guessable or carry user data). */
function sessionHash (id: string): string {
  return createHash('sha256').update(id).digest('hex').slice(0, 16);
}

function errorType (error: unknown): string {
  if (error === null || error === undefined) return '_OTHER';
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && code !== '') return code;
  return (error as Error).name ?? '_OTHER';
}

/**
 * A gateway time (epoch ms read off the monotonic clock, timeOrigin + performance.now()) as the SDK wants it: a
 * performance.now() value, which it maps to wall time with the same Date.now() anchor as the spans it stamps
 * itself. An epoch value would be taken as is, and the monotonic clock drifts from the wall clock over days.
 */
function perfTime (t: number): number {
  return t > performance.timeOrigin ? t - performance.timeOrigin : t;
}

function fail (span: Span, type: string, message: string): void {
  span.setAttribute('error.type', type);
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}

/**
 * The resource's detectors: OTEL_NODE_RESOURCE_DETECTORS if set, else env and host only. The SDK's default also
 * runs the process detector, whose process.command_args would export EAR's command line, --api-key and
 * --admin-token included: the process facts that matter are added without it.
 */
function detectors (env: NodeJS.ProcessEnv): resources.ResourceDetector[] | undefined {
  if ((env.OTEL_NODE_RESOURCE_DETECTORS ?? '').trim() !== '') return undefined;
  return [resources.envDetector, resources.hostDetector];
}

export function startOtelTracing (env: NodeJS.ProcessEnv = process.env): Tracing {
  const base = resources.defaultResource().merge(resources.resourceFromAttributes({
    'process.pid': process.pid, 'process.runtime.name': 'nodejs', 'process.runtime.version': process.versions.node
  }));
  const sdk = new NodeSDK({
    serviceName: serviceNameDefault(env), resource: base, resourceDetectors: detectors(env),
    contextManager: BY_HAND,
    instrumentations: [], metricReaders: [], logRecordProcessors: []
  });
  sdk.start();
  const tracer = trace.getTracer('ear');
  const servers = new ServerAddresses();
  return {
    request: (r) => new OtelRequest(tracer, r, servers),
    proactiveTransfer (t) {
      const span = tracer.startSpan('ear.kv_transfer', {
        kind: SpanKind.INTERNAL,
        // The thread reports a move once it ended; its source leg is what it timed.
        startTime: perfTime(t.endTime - t.seconds * 1000),
        attributes: { 'ear.migration.kind': 'proactive', 'ear.migration.source': t.source, 'ear.migration.target': t.target }
      }, ROOT_CONTEXT);
      transferFacts(span, t);
      span.end(perfTime(t.endTime));
    },
    shutdown: () => sdk.shutdown()
  };
}

function transferFacts (span: Span, t: TransferFacts): void {
  span.setAttribute('ear.migration.connector', t.mode);
  span.setAttribute('ear.migration.outcome', t.ok ? 'ok' : 'failed');
  span.setAttribute('ear.migration.bytes', t.bytes);
  span.setAttribute('ear.migration.tokens', t.tokens);
  if (!t.ok) fail(span, 'transfer_failed', t.failure ?? 'the transfer failed');
}

/** server.address and server.port of each backend URL, parsed once (bounded: backends come from config). */
class ServerAddresses {
  static readonly MAX = 4096;
  readonly #byUrl = new Map<string, { address: string; port: number }>();

  of (url: string): { address: string; port: number } {
    let a = this.#byUrl.get(url);
    if (a === undefined) {
      const u = new URL(url);
      a = { address: u.hostname, port: Number(u.port || (u.protocol === 'https:' ? 443 : 80)) };
      if (this.#byUrl.size >= ServerAddresses.MAX) this.#byUrl.clear();
      this.#byUrl.set(url, a);
    }
    return a;
  }
}

const NO_ADMISSION: AdmissionTrace = { end () {} };

class OtelRequest implements RequestTrace {
  readonly #tracer: Tracer;
  readonly #servers: ServerAddresses;
  readonly #span: Span;
  readonly #ctx: Context;
  readonly recording: boolean;

  constructor (tracer: Tracer, r: RequestStart, servers: ServerAddresses) {
    this.#tracer = tracer;
    this.#servers = servers;
    const parent = r.traceparent === '' ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, { traceparent: r.traceparent, tracestate: r.tracestate }, defaultTextMapGetter);
    const name = r.via === 'ext_proc' ? `ext_proc POST ${r.path}` : `POST ${r.path}`;
    this.#span = tracer.startSpan(name, {
      kind: SpanKind.SERVER,
      startTime: perfTime(r.startTime),
      attributes: { 'http.request.method': 'POST', 'url.path': r.path, 'http.route': r.path, 'url.scheme': 'http', 'ear.request_id': r.requestId,
        // Messages and Responses are conversations too (OTel GenAI names no operation of their own for them).
        'gen_ai.operation.name': r.path === '/v1/completions' ? 'text_completion' : 'chat' }
    }, parent);
    this.recording = this.#span.isRecording();
    this.#ctx = trace.setSpan(parent, this.#span);
  }

  /**
   * A request the sampler dropped has no child spans (they would record nothing): the engine is given the
   * server span's context, unsampled, so the trace id still goes along.
   */
  #unsampledHeaders: TraceHeaders | null = null;

  #unsampled (): TraceHeaders {
    return (this.#unsampledHeaders ??= this.#inject(this.#span));
  }

  /** The W3C headers that make `span` (a child of this request's) an engine's parent. */
  #inject (span: Span): TraceHeaders {
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(this.#ctx, span), carrier, defaultTextMapSetter);
    return Object.entries(carrier);
  }

  #child (name: string, kind: SpanKind, startTime?: number): Span {
    return this.#tracer.startSpan(name, { kind, startTime }, this.#ctx);
  }

  features (model: string, sessionId: string | null, promptTokens: number, promptBlocks: number): void {
    if (!this.recording) return;
    const s = this.#span;
    s.setAttribute('gen_ai.request.model', model);
    s.setAttribute('ear.prompt_tokens', promptTokens);
    s.setAttribute('ear.prompt_blocks', promptBlocks);
    if (sessionId !== null) s.setAttribute('ear.session.hash', sessionHash(sessionId));
  }

  admission (priorityClass: number, startTime?: number): AdmissionTrace {
    if (!this.recording) return NO_ADMISSION;
    const span = this.#child('ear.admission', SpanKind.INTERNAL, startTime === undefined ? undefined : perfTime(startTime));
    span.setAttribute('ear.priority_class', priorityClass);
    return {
      end (outcome: AdmissionOutcome, waitMs: number, level: number | null, promoted: boolean) {
        span.setAttribute('ear.admission.outcome', outcome);
        span.setAttribute('ear.admission.wait_ms', waitMs);
        if (level !== null) span.setAttribute('ear.scheduler.level', level);
        if (promoted) span.setAttribute('ear.scheduler.promoted', true);
        if (outcome !== 'released' && outcome !== 'cancelled') fail(span, outcome, `admission: ${outcome}`);
        span.end();
      }
    };
  }

  routed (r: RoutingFacts): void {
    if (!this.recording) return;
    const span = this.#child('ear.route', SpanKind.INTERNAL, perfTime(r.decidedAt));
    if (span.isRecording()) {
      span.setAttribute('ear.policy', r.policy);
      span.setAttribute('ear.pod', r.pod);
      span.setAttribute('ear.route.reason', r.reason);
      span.setAttribute('ear.route.attempt', r.attempt);
      span.setAttribute('ear.route.candidates', r.candidates);
      if (r.matchedBlocks !== null) span.setAttribute('ear.route.matched_blocks', r.matchedBlocks);
      if (r.migrateFrom !== null) span.setAttribute('ear.migration.source', r.migrateFrom);
      if (r.fallbacks !== undefined) span.setAttribute('ear.route.fallbacks', r.fallbacks);
      if (r.subsetHint !== undefined) span.setAttribute('ear.route.subset_hint', r.subsetHint);
    }
    span.end();
  }

  transfer (kind: 'migration' | 'pd', source: string, target: string): TransferTrace {
    if (!this.recording) return { headers: this.#unsampled(), end () {} };
    const span = this.#child('ear.kv_transfer', SpanKind.INTERNAL);
    span.setAttribute('ear.migration.kind', kind);
    span.setAttribute('ear.migration.source', source);
    span.setAttribute('ear.migration.target', target);
    return {
      headers: this.#inject(span),
      end (t: TransferFacts, servedBy: string) {
        transferFacts(span, t);
        span.setAttribute('ear.migration.served_by', servedBy);
        span.end();
      }
    };
  }

  upstream (backend: string, url: string, attempt: number): UpstreamTrace {
    if (!this.recording) return { headers: this.#unsampled(), firstToken () {}, end () {} };
    const server = this.#servers.of(url);
    const span = this.#tracer.startSpan('POST', {
      kind: SpanKind.CLIENT,
      attributes: { 'http.request.method': 'POST', 'server.address': server.address, 'server.port': server.port, 'ear.backend': backend, 'ear.attempt': attempt }
    }, this.#ctx);
    const headers = this.#inject(span);
    const serverSpan = this.#span;
    return {
      headers,
      firstToken (ttftMs: number) {
        span.addEvent('gen_ai.first_token', { 'ear.ttft_ms': ttftMs });
        span.setAttribute('ear.ttft_ms', ttftMs);
        serverSpan.setAttribute('ear.ttft_ms', ttftMs);
      },
      end (kind: string, status: number | null, usage: UsageFacts | null, error: unknown) {
        if (status !== null && status > 0) span.setAttribute('http.response.status_code', status);
        span.setAttribute('ear.upstream.outcome', kind);
        if (usage !== null) {
          span.setAttribute('gen_ai.usage.input_tokens', usage.promptTokens);
          span.setAttribute('gen_ai.usage.output_tokens', usage.completionTokens);
          if (usage.cachedTokens !== null) span.setAttribute('ear.usage.cached_tokens', usage.cachedTokens);
        }
        if (kind === 'retryable') fail(span, status === null ? errorType(error) : String(status), status === null ? `no answer: ${(error as Error)?.message ?? 'connection failed'}` : `engine answered ${status}`);
        else if (kind === 'broken' || kind === 'cut') fail(span, errorType(error), 'the engine failed mid-response');
        else if (kind === 'busy') fail(span, 'queue_full', 'the backend\'s connection queue was full; not sent');
        else if (kind === 'aborted') span.setAttribute('ear.client_aborted', true);
        else if (status !== null && status >= 500) fail(span, String(status), `engine answered ${status}`);
        span.end();
      }
    };
  }

  proxied (): ProxiedTrace {
    if (!this.recording) return { headers: this.#unsampled(), served () {}, firstToken () {}, usage () {}, abandoned () {} };
    const s = this.#span;
    return {
      headers: this.#inject(s),
      served (endpoint, relation) {
        s.setAttribute('ear.served.relation', relation);
        if (endpoint !== null) s.setAttribute('ear.served.endpoint', endpoint);
      },
      firstToken (ttftMs) {
        s.addEvent('gen_ai.first_token', { 'ear.ttft_ms': ttftMs });
        s.setAttribute('ear.ttft_ms', ttftMs);
      },
      usage (u) {
        s.setAttribute('gen_ai.usage.input_tokens', u.promptTokens);
        s.setAttribute('gen_ai.usage.output_tokens', u.completionTokens);
        if (u.cachedTokens !== null) s.setAttribute('ear.usage.cached_tokens', u.cachedTokens);
      },
      abandoned (phase) {
        s.setAttribute('ear.ext_proc.abandoned_phase', phase);
        fail(s, 'stream_aborted', phase === 'queued' ? 'the ext_proc stream ended while the request waited for admission' : 'the ext_proc stream ended before the response did');
      }
    };
  }

  end (status: number, aborted: boolean, error: unknown): void {
    const s = this.#span;
    if (status > 0) s.setAttribute('http.response.status_code', status);
    if (aborted) s.setAttribute('ear.client_aborted', true);
    if (error !== null && error !== undefined) s.setAttribute('error.type', errorType(error));
    if (status >= 500) s.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : `status ${status}` });
    s.end();
  }
}
