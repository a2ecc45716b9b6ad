// The request pipeline (docs/architecture.md#a-requests-life): every request that `ear serve` or `ear epp` takes in
// goes through the same phases — features, the token charge, admit, route, migrate, then the transport's send —
// with one retry loop and one end. A process has one pipeline (the process core's, src/gateway/core.ts) for all its doors. The transport (uWS, ext_proc) owns accept and proxy; metrics and traces subscribe to the events
// the phases publish (channels.ts).
import type { Backend } from '../fleet/backends.js';
import type { Features } from '../features/features.js';
import type { Endpoint } from '../dialects/dialect.js';
import type { KvTransferStep } from './kv-transfer-step.js';
import type { Placements } from '../fleet/routing-port.js';
import type { SharedSessions } from '../store/shared-sessions.js';
import { ownerOf, type ResponseOrigins } from './response-origin.js';
import { EarError } from '../errors/errors.js';
import { isUpstreamTimeout } from '../upstream/errors.js';
import { clientTraceHeaders, type TraceHeaders } from '../upstream/traceparent.js';
import { admit, noBackend } from './admit.js';
import { enginePriorityFor } from './engine-priority.js';
import { withPriorityField } from '../features/priority-field.js';
import { withAgenticContext } from './agentic-field.js';
import { channels, type SendMessage } from './channels.js';
import type { RequestContext } from './context.js';
import { features } from './features.js';
import { settleRetention } from './hints.js';
import { migrate } from './migrate.js';
import { reroute, routed } from './route.js';
import { resume } from './resume.js';
import { chargeTokens, settleTokens } from './token-charge.js';
import type { AttemptResult, SendResult, Transport } from './transport.js';

/** Where a request's features are computed (the route pool, or inline for small bodies). */
export type FeatureFn = (endpoint: Endpoint, body: Buffer, sessionId: string | null) => Promise<Features>;

export interface PipelineOptions {
  /** The routing policy's name (metrics and spans). */
  policy: string;
  /** Attempts per request: the first and its retries on other backends (ext_proc's requests get one: the proxy does the fallbacks). */
  maxAttempts: number;
  /** Times a stream cut after its first byte may go on on another engine (0: never; docs/resume.md). */
  maxResumes?: number;
  /** The most bytes of a stream kept to resume it from (past them, a cut ends it). */
  maxResumeBytes?: number;
  state: Placements;
  features: FeatureFn;
  /** The live backend list. */
  backends: readonly Backend[];
  /** Session state shared with other replicas; null with `memory`. */
  sessions: SharedSessions | null;
  /** The KV connectors' source legs (never run for ext_proc's requests: EAR does not send them); null: none. */
  kvTransfers: KvTransferStep | null;
  now: () => number;
  /** A request is sent to `b` (its in-flight count), until `release`: a removed backend closes once released by all. */
  hold (b: Backend): void;
  release (b: Backend): void;
  /** A session's request completed (2xx): its model, the engine path and the body forwarded. */
  onSessionCompleted?: (sessionId: string, model: string, path: string, body: Buffer) => void;
  /** Which backend produced each stored response (Responses API); null: previous_response_id is not followed. */
  responses?: ResponseOrigins | null;
  /** The longest prefix retention a hint may ask for (ms; config maxRetentionTtlMs): longer ones are clamped. */
  maxRetentionTtlMs?: number;
}

/** maxRetentionTtlMs's default: Anthropic's longest cache_control TTL. */
export const DEFAULT_MAX_RETENTION_TTL_MS = 3_600_000;

export class Pipeline {
  readonly policy: string;
  readonly maxAttempts: number;
  readonly maxResumes: number;
  readonly maxResumeBytes: number;
  readonly state: Placements;
  readonly features: FeatureFn;
  readonly backends: readonly Backend[];
  readonly sessions: SharedSessions | null;
  readonly kvTransfers: KvTransferStep | null;
  readonly now: () => number;
  readonly hold: (b: Backend) => void;
  readonly release: (b: Backend) => void;
  readonly onSessionCompleted: PipelineOptions['onSessionCompleted'];
  readonly responses: ResponseOrigins | null;
  readonly maxRetentionTtlMs: number;

  constructor (o: PipelineOptions) {
    this.policy = o.policy;
    this.maxAttempts = o.maxAttempts;
    this.maxResumes = o.maxResumes ?? 0;
    this.maxResumeBytes = o.maxResumeBytes ?? 4 << 20;
    this.state = o.state;
    this.features = o.features;
    this.backends = o.backends;
    this.sessions = o.sessions;
    this.kvTransfers = o.kvTransfers;
    this.now = o.now;
    this.hold = o.hold;
    this.release = o.release;
    this.onSessionCompleted = o.onSessionCompleted;
    this.responses = o.responses ?? null;
    this.maxRetentionTtlMs = o.maxRetentionTtlMs ?? DEFAULT_MAX_RETENTION_TTL_MS;
  }
}

const NO_TRACE: TraceHeaders = [];

/** Runs `ctx` through the phases with `transport`; never rejects: a failure is answered through the transport. */
export async function runPipeline (ctx: RequestContext, transport: Transport): Promise<void> {
  if (channels.start.hasSubscribers) channels.start.publish({ ctx });
  try {
    await attempts(ctx, transport);
  } catch (err) {
    ctx.outcome.error = err;
    transport.fail(ctx, err);
    if (channels.error.hasSubscribers) channels.error.publish({ ctx, error: err });
  } finally {
    const s = transport.settle(ctx);
    ctx.outcome.status = s.status;
    ctx.outcome.aborted = s.aborted;
    settleTokens(ctx);
    settleRetention(ctx);
    if (channels.done.hasSubscribers) channels.done.publish({ ctx, at: ctx.pipeline.now(), toolCall: ctx.outcome.toolCall, retention: ctx.retention });
  }
}

async function attempts (ctx: RequestContext, transport: Transport): Promise<void> {
  const p = ctx.pipeline;
  const { state, now } = p;
  await features(ctx);
  if (ctx.abort.aborted) return;
  const charged = chargeTokens(ctx);
  if (charged !== undefined) await charged;
  const first = await admit(ctx);
  if (first === null) return;
  const input = ctx.input!;
  const model = input.model;
  let last: AttemptResult | null = null;
  // Through ext_proc the proxy sends the request and does the fallbacks among the endpoints named: one attempt.
  const maxAttempts = ctx.via === 'ext_proc' ? 1 : p.maxAttempts;
  for (let n = 0; n < maxAttempts; n++) {
    let placement = first;
    if (n === 0) routed(ctx, first, 0, null);
    else {
      const next = await reroute(ctx, n);
      if (next === null) break;
      placement = next;
    }
    const migrated = migrate(ctx, placement);
    const step = migrated instanceof Promise ? await migrated : migrated;
    ctx.placement = step.placement;
    if (ctx.abort.aborted) {
      const t = now();
      state.finished(step.placement, input, null, false, t);
      step.arrived?.(t);
      ctx.shared?.completed(t);
      return;
    }
    const b = step.placement.backend;
    const body = withPriorityField(withAgenticContext(step.body, ctx, b), enginePriorityFor(ctx, b));
    const send: SendMessage = { ctx, backend: b, attempt: n, endpoints: transport.endpoints?.(ctx, b) ?? null, headers: ctx.via === 'http' ? forwardedTrace(ctx) : NO_TRACE };
    if (channels.send.hasSubscribers) channels.send.publish(send);
    p.hold(b);
    let r: SendResult;
    try {
      r = await transport.send(ctx, {
        backend: b,
        body,
        attempt: n,
        endpoints: send.endpoints,
        final: n === maxAttempts - 1 || !hasOther(ctx, b.index),
        headers: send.headers,
        firstToken: () => {
          if (ctx.firstTokenAt > 0) return;
          const t = now();
          ctx.firstTokenAt = t;
          step.arrived?.(t);
          state.firstToken(ctx.placement!, t);
          if (channels.firstToken.hasSubscribers) channels.firstToken.publish({ ctx, at: t, backend: ctx.placement!.backend });
        }
      });
    } finally {
      // The placement may have moved meanwhile (the proxy served it elsewhere): the hold moved with it.
      p.release(ctx.placement!.backend);
    }
    const tEnd = now();
    step.arrived?.(tEnd);
    const served = ctx.placement!;
    ctx.usage = r.usage;
    ctx.contentEvents = r.contentEvents;
    ctx.outcome.toolCall = r.toolCall === true;
    if (channels.sent.hasSubscribers) channels.sent.publish({ ctx, backend: served.backend, result: r });
    const retain = { toolCall: ctx.outcome.toolCall && ctx.sessionId !== null, ttlMs: ctx.retention?.ttlMs ?? null };
    state.finished(served, input, r.usage, r.result.kind === 'done' && r.result.ok !== false, tEnd, retain);
    ctx.shared?.completed(tEnd);
    last = r.result;
    // Busy (its connection queue is full) or failed before any byte reached the client: the next-best backend.
    if (last.kind === 'busy' || last.kind === 'retryable') {
      ctx.exclude.add(served.backend.index);
      continue;
    }
    // Cut after its first byte: the stream goes on elsewhere, or ends with an error event.
    if (last.kind === 'cut') {
      ctx.exclude.add(served.backend.index);
      await resume(ctx, transport, body, served.backend.id, last.error);
      return;
    }
    if (last.kind === 'done') {
      ctx.outcome.backend = served.backend.id;
      if (r.responseId != null && last.status < 300 && ctx.features!.store) p.responses?.remember(r.responseId, served.backend, ownerOf(ctx));
      if (ctx.sessionId !== null && last.status < 300 && ctx.dialect.kvTransfer) p.onSessionCompleted?.(ctx.sessionId, model, ctx.path, ctx.forward);
    }
    return;
  }
  if (last !== null && last.kind === 'busy') throw new EarError('EAR_ERR_OVERLOADED', 'every backend that serves the model has its connection queue full; retry later', { retryAfterSeconds: 1 });
  if (last !== null && last.kind === 'retryable') throw noBackendAnswered(last);
  throw noBackend(ctx);
}

/**
 * The client's answer when every attempt was retryable: 504 if the last backend tried did not answer in time
 * (engines that accept and never answer), else 502.
 */
function noBackendAnswered (last: AttemptResult & { kind: 'retryable' }): EarError {
  if (isUpstreamTimeout(last.error)) return new EarError('EAR_ERR_UPSTREAM_TIMEOUT', `no backend answered in time (last: ${(last.error as Error).message})`);
  return new EarError('EAR_ERR_UPSTREAM', `no backend could serve the request (last: ${last.status === null ? 'connection failed' : `status ${last.status}`})`);
}

/** Whether a backend other than `failed` (and those excluded) could take a retry. */
function hasOther (ctx: RequestContext, failed: number): boolean {
  const exclude = ctx.exclude;
  const had = exclude.has(failed);
  exclude.add(failed);
  const any = ctx.pipeline.state.hasCandidate(ctx.input!.model, exclude);
  if (!had) exclude.delete(failed);
  return any;
}

/** With tracing off, the client's valid trace headers go to the engine unchanged. */
function forwardedTrace (ctx: RequestContext): TraceHeaders {
  return ctx.traceparent === '' ? NO_TRACE : clientTraceHeaders(ctx.traceparent, ctx.tracestate);
}
