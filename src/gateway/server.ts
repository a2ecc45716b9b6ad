// `ear serve`: the gateway's data plane. uWebSockets.js terminates client traffic; per-request work that grows
// with the prompt (parse, render, tokenize, hash) runs in a piscina pool; routing runs inline against the
// shared tables; upstream-client.ts proxies to the engines. See ARCHITECTURE.md "Request lifecycle".
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { performance } from 'node:perf_hooks';
import { NoCandidateError } from '../core/policy.js';
import { DEFAULT_CLASS, PRIORITY_CLASSES } from '../core/admission.js';
import { registerAdmissionMetrics } from './admission-metrics.js';
import { Backend, probe, scrape } from './backends.js';
import type { GatewayConfig } from '../config/index.js';
import { GatewayError } from './errors.js';
import { GatewayMetrics } from './metrics.js';
import { attempt, noBackendAnswered, type AttemptResult } from './proxy.js';
import { requestId } from './request-id.js';
import type { Endpoint } from './request-body.js';
import type { Features } from './features.js';
import type { DropReason, Placement, RoutingInput, RoutingState } from './routing-state.js';
import { sessionOf, SESSION_ID_HEADERS } from './session-id.js';
import { StreamObserver } from './stream-observer.js';
import { ContextRegistry } from './contexts.js';
import { CONTEXT_PATH, decodedParam, mountContexts } from './context-routes.js';
import type { SessionStore } from '../store/session-store.js';
import { readBody, ResponseState } from './uws-io.js';
import type { SharedSessions } from './shared-sessions.js';
import { KvTransferStep } from './kv-transfer-step.js';
import { ClientGate, remoteAddressOf } from './client-gate.js';
import { AdminToken, bearerToken } from './credentials.js';
import { requestHeaders } from './upstream-headers.js';
import { kvTransfersFor } from '../migration/transfers-for.js';
import { waitForAdmission, type AdmissionWaitDeps } from './admission-wait.js';
import { routeFacts } from './route-facts.js';
import type { RequestTrace, Tracing } from '../telemetry/tracing.js';
import { clientTraceHeaders, type TraceHeaders } from '../telemetry/traceparent.js';

export type FeatureFn = (endpoint: Endpoint, body: Buffer, sessionId: string | null) => Promise<Features>;

export interface GatewayDeps {
  config: Readonly<GatewayConfig>;
  /** The routing state over `backends`: the gateway's live list, which it fills (and changes on reloads) afterwards. */
  state: (backends: readonly Backend[]) => RoutingState;
  features: FeatureFn;
  /** Time source in ms (performance.now by default). */
  now?: () => number;
  /** Session state shared with other replicas (`--session-store redis://…`); none with `memory`. */
  sessions?: SharedSessions | null;
  /** Where explicit contexts are recorded (--session-store); default: an in-process memory store. */
  sessionStore?: SessionStore;
  /** Wall clock (ms) for contexts' creation and expiry (Date.now by default; tests pass a fake one). */
  clock?: () => number;
  /** A request of a session completed: its model, the engine path and the body forwarded (no kv_transfer_params of the client's or a connector's). */
  onSessionCompleted?: (sessionId: string, model: string, path: string, body: Buffer) => void;
  /** Spans for OpenAI requests (src/telemetry/); null or absent: tracing is off and costs a null check. */
  tracing?: Tracing | null;
  /**
   * A condition besides the gateway's own (not draining, a healthy backend) that /ready reports: an active-passive
   * follower is not ready (src/ha/). Read on every probe; its fields other than `ready` go into the answer's body.
   */
  readiness?: () => ReadinessCondition;
}

export interface ReadinessCondition {
  ready: boolean;
  /** Why not, for people reading the probe's body. */
  reason?: string;
  [detail: string]: unknown;
}

export interface Gateway {
  readonly port: number;
  readonly backends: readonly Backend[];
  readonly metrics: GatewayMetrics;
  /** Explicit contexts (POST /v1/context). */
  readonly contexts: ContextRegistry;
  /** API keys and rate limits of the client routes (the endpoint picker checks its requests with it too). */
  readonly gate: ClientGate;
  /** Runs one round of health probes now (also runs on a timer). */
  checkHealth (): Promise<void>;
  /**
   * Applies a new backend list without dropping requests: new ids are added (and probed), ids that are gone, or
   * whose URL changed, drain (no new requests) and close once their requests end, and their pod rows are
   * purged and reused. Reloads apply one after another. Other settings need a restart.
   */
  reload (config: Readonly<GatewayConfig>): Promise<void>;
  /**
   * The client credentials and limits of `config` from now on: API keys, rate limits, the admin token (SIGHUP).
   * Requests already admitted are not checked again.
   */
  reconfigure (config: Readonly<GatewayConfig>): void;
  /** What /ready answers: not draining, a healthy backend, and `readiness` of the deps (active-passive). */
  readiness (): ReadinessCondition;
  /**
   * A request sent to `b` by another path than this server's (the endpoint picker, whose proxy sends it) holds
   * it until `exit`: a backend that a reload removed closes, and its row is freed, once the last one lets go.
   */
  enter (b: Backend): void;
  exit (b: Backend): void;
  /** Stops accepting, lets in-flight requests finish (up to drainTimeoutMs), then closes everything. */
  close (): Promise<void>;
}

const ADMISSION_TICK_MS = 100;

const UPSTREAM_PATH: Record<Endpoint, '/v1/chat/completions' | '/v1/completions'> = { chat: '/v1/chat/completions', completions: '/v1/completions' };

const newObserver = (contentType: string): StreamObserver => new StreamObserver(contentType);

const NO_TRACE: TraceHeaders = [];

/** A request's trace span, or with tracing off the client's trace headers to forward as they came. */
interface RequestTracing {
  span: RequestTrace | null;
  forward: TraceHeaders;
}

const UNTRACED: RequestTracing = { span: null, forward: NO_TRACE };

function assertNativeUws (): void {
  // The pinned build ships binaries for these ABIs only; anything else silently falls back to a slow shim.
  if (!['93', '108', '115'].includes(process.versions.modules)) {
    throw new Error(`uWebSockets.js has no native build for Node ABI ${process.versions.modules}: run EAR on Node 20`);
  }
}

/** Whether a backend other than `failed` (and those excluded) could take a retry. */
function hasOther (state: RoutingState, model: string, exclude: Set<number>, failed: number): boolean {
  const had = exclude.has(failed);
  exclude.add(failed);
  const any = state.hasCandidate(model, exclude);
  if (!had) exclude.delete(failed);
  return any;
}

/** The priority class a request asks for: x-ear-priority (a class name or its rank), else its API key's, else normal. */
export function priorityClassOf (header: string, apiKey: string | null, byKey: Readonly<Record<string, string>>): number {
  const v = header.trim().toLowerCase();
  if (v !== '') {
    const byName = (PRIORITY_CLASSES as readonly string[]).indexOf(v);
    if (byName >= 0) return byName;
    if (/^[0-9]$/.test(v) && Number(v) < PRIORITY_CLASSES.length) return Number(v);
    throw new GatewayError('EAR_ERR_BAD_HEADER', `x-ear-priority must be one of ${PRIORITY_CLASSES.join(', ')} (or 0-${PRIORITY_CLASSES.length - 1}), got "${header.slice(0, 32)}"`);
  }
  if (apiKey !== null && Object.hasOwn(byKey, apiKey)) return (PRIORITY_CLASSES as readonly string[]).indexOf(byKey[apiKey]);
  return DEFAULT_CLASS;
}

function dropError (reason: DropReason, waitedMs: number): Error {
  if (reason === 'timeout') return new GatewayError('EAR_ERR_QUEUE_TIMEOUT', `the request waited ${Math.round(waitedMs / 1000)} s for admission and timed out; the backends are at capacity`);
  if (reason === 'shutdown') return new GatewayError('EAR_ERR_DRAINING', `the gateway shut down after ${Math.round(waitedMs / 1000)} s of waiting for admission (drainTimeoutMs)`);
  return new NoCandidateError();
}

function retryAfter (err: unknown): Array<[string, string]> {
  return err instanceof GatewayError && err.retryAfterSeconds !== null ? [['retry-after', String(err.retryAfterSeconds)]] : [];
}

function hasCtl (v: string): boolean {
  for (let i = 0; i < v.length; i++) {
    const c = v.charCodeAt(i);
    if (c === 13 || c === 10 || c === 0) return true;
  }
  return false;
}

export async function startGateway (deps: GatewayDeps): Promise<Gateway> {
  assertNativeUws();
  const { config } = deps;
  const now = deps.now ?? (() => performance.now());
  const metrics = new GatewayMetrics();
  const decisionSeconds = metrics.decisionSeconds.labels(config.policy);
  // The live backends (draining ones until their requests end). A backend's index is the pod row it leases in
  // the shared tables: a row is released when its backend has gone, and reused by a later one.
  const backends: Backend[] = [];
  // Explicit contexts: the registry wraps the routing state to keep a context's session bound and alive.
  const contexts = new ContextRegistry({ maxContexts: config.maxContexts, sessionIdleMs: config.sessionIdleMs, registry: metrics.registry, store: deps.sessionStore, clock: deps.clock, now });
  const state = contexts.routing(deps.state(backends));
  const admissionDeps: AdmissionWaitDeps = { state, now, metrics, decisionSeconds };
  const kvTransfers = new KvTransferStep(kvTransfersFor(config), state, metrics.registry, now, release);
  for (const c of config.backends) {
    const b = new Backend(state.admit(c.id), c, config);
    backends.push(b);
    state.backendChanged(b, 0);
  }
  let draining = false;
  let inFlight = 0;
  let idle: (() => void) | null = null;
  // API keys (compared in constant time) and rate limits, for every /v1 route (client-gate.ts). A request whose
  // body names no OpenAI `user` counts against its API key's id (an HMAC of the key, never the key).
  const gate = new ClientGate(config, metrics.registry, now);
  const tracing = deps.tracing ?? null;

  const app: TemplatedApp = uWS.App();

  function completion (endpoint: Endpoint) {
    return (res: HttpResponse, req: HttpRequest) => {
      // Everything from req is read now: it is gone after this handler returns.
      const t0 = now();
      const auth = req.getHeader('authorization');
      const declaredLength = req.getHeader('content-length');
      const priorityHeader = req.getHeader('x-ear-priority');
      const rid = requestId(req.getHeader('x-request-id'));
      const traceparent = req.getHeader('traceparent');
      const tracestate = traceparent === '' ? '' : req.getHeader('tracestate');
      const headerValues = SESSION_ID_HEADERS.map((h) => req.getHeader(h));
      const { sessionId, parentSessionId } = sessionOf((h) => headerValues[SESSION_ID_HEADERS.indexOf(h)] ?? '');
      const apiKey = bearerToken(auth);
      const rs = new ResponseState(res);
      const ridHeader: [string, string] = ['x-request-id', rid];
      if (draining) return rs.fail(new GatewayError('EAR_ERR_DRAINING', 'the gateway is shutting down'), [ridHeader]);
      const client = gate.admit(UPSTREAM_PATH[endpoint], auth, () => remoteAddressOf(res));
      if (client instanceof GatewayError) return rs.fail(client, [ridHeader, ...retryAfter(client)]);
      const keyUser = client.user;
      if (headerValues.some(hasCtl)) {
        return rs.fail(new GatewayError('EAR_ERR_BAD_HEADER', 'header values must not contain CR, LF or NUL'), [ridHeader]);
      }
      let priorityClass: number;
      try {
        priorityClass = priorityClassOf(priorityHeader, apiKey, config.apiKeyPriority);
      } catch (err) {
        return rs.fail(err, [ridHeader]);
      }
      readBody(rs, config, (body) => {
        inFlight++;
        // Tracing on: a span continuing the client's trace. Off: its valid trace headers go upstream unchanged.
        const tr: RequestTracing = tracing !== null
          ? { span: tracing.request({ path: UPSTREAM_PATH[endpoint], traceparent, tracestate, startTime: t0, requestId: rid }), forward: NO_TRACE }
          : traceparent === '' ? UNTRACED : { span: null, forward: clientTraceHeaders(traceparent, tracestate) };
        handle(endpoint, rs, body, rid, sessionId, parentSessionId, priorityClass, keyUser, t0, tr).then(() => handled(rs, ridHeader, tr.span, null), (err) => {
          rs.fail(err, [ridHeader, ...retryAfter(err)]);
          handled(rs, ridHeader, tr.span, err);
        });
      }, declaredLength);
    };
  }

  /** After a completion request's handler settled: whatever happened, the client got an answer. */
  function handled (rs: ResponseState, ridHeader: [string, string], span: RequestTrace | null, err: unknown): void {
    if (!rs.ended && !rs.aborted) rs.fail(new GatewayError('EAR_ERR_INTERNAL', 'internal error'), [ridHeader]);
    span?.end(rs.status, rs.aborted, err);
    if (rs.aborted) metrics.clientAborts.inc();
    if (--inFlight === 0 && idle) idle();
  }

  /**
   * Admission (ARCHITECTURE.md "Request lifecycle" step 3): the placement, already started, once the scheduler
   * releases the request (at once when it can go); null if the client went away while it waited.
   */
  function admit (input: RoutingInput, rs: { onAbort: (() => void) | null }, priorityClass: number, span: RequestTrace | null = null): Promise<Placement | null> {
    return waitForAdmission(admissionDeps, input, rs, priorityClass, span === null ? null : span.admission(priorityClass), dropError);
  }

  async function handle (endpoint: Endpoint, rs: ResponseState, body: Buffer, rid: string, sessionId: string | null, parentSessionId: string | null, priorityClass: number, keyUser: string | null, t0: number, tr: RequestTracing): Promise<void> {
    const route = UPSTREAM_PATH[endpoint];
    const span = tr.span;
    const f0 = now();
    const f = await deps.features(endpoint, body, sessionId);
    metrics.featureSeconds.observe((now() - f0) / 1000);
    span?.features(f.model, sessionId, f.promptTokens, f.blockKeys.length);
    if (rs.aborted) return;
    if (!backends.some((b) => b.models.has(f.model))) {
      metrics.requests.labels(route, '404', '').inc();
      throw new GatewayError('EAR_ERR_MODEL_NOT_FOUND', `The model \`${f.model}\` does not exist.`);
    }
    const input: RoutingInput = { model: f.model, sessionId, parentSessionId, promptTokens: f.promptTokens, blockKeys: f.blockKeys, maxTokens: f.maxTokens, user: f.user ?? keyUser };
    const forward = f.forward ? Buffer.from(f.forward.buffer, f.forward.byteOffset, f.forward.byteLength) : body;
    const exclude = new Set<number>();
    let last: AttemptResult | null = null;
    // Shared session state (shared-sessions.ts): loaded before admission, so the session is ranked by the
    // service every replica saw.
    const shared = deps.sessions?.turn(input) ?? null;
    if (shared !== null) await shared.load();
    let admitted: Placement | null = null;
    try {
      admitted = await admit(input, rs, priorityClass, span);
    } catch (err) {
      if (err instanceof GatewayError && err.code === 'EAR_ERR_QUEUE_FULL') metrics.requests.labels(route, '429', '').inc();
      if (err instanceof GatewayError && err.code === 'EAR_ERR_QUEUE_TIMEOUT') metrics.requests.labels(route, '504', '').inc();
      if (!(err instanceof NoCandidateError)) throw err;
    }
    if (admitted !== null && rs.aborted) {
      // Released as the client went away: it never reached its backend.
      state.finished(admitted, input, null, false, now());
      return;
    }
    if (rs.aborted) return;
    for (let n = 0; n < config.maxAttempts && (n > 0 || admitted !== null); n++) {
      let placement: Placement;
      if (n === 0) {
        const first = admitted!;
        placement = first;
        // Another replica bound the session first: follow it (the admitted placement is undone, not sent).
        if (shared !== null) {
          placement = await shared.placed(first, 0, () => {
            const p = state.route(input, exclude, now(), 0);
            state.finished(first, input, null, false, now());
            state.started(p, input, now());
            return p;
          });
        }
      } else {
        const d0 = now();
        try {
          placement = state.route(input, exclude, d0, n);
        } catch (err) {
          if (!(err instanceof NoCandidateError)) throw err;
          break;
        }
        decisionSeconds.observe((now() - d0) / 1000);
        if (shared !== null) placement = await shared.placed(placement, n, () => state.route(input, exclude, now(), n));
        metrics.retries.inc();
        state.started(placement, input, now());
      }
      if (span !== null && span.recording) span.routed(routeFacts(config.policy, backends, placement, n, f.model, exclude));
      // A migration's or a P/D prefill's KV: the connector's source leg, before the request goes to its backend.
      const src = placement.transferFrom ?? null;
      const transferSpan = span !== null && src !== null && src !== placement.backend
        ? span.transfer(placement.migrating === true ? 'migration' : 'pd', src.id, placement.backend.id)
        : null;
      const step = await kvTransfers.run(placement, input, route, forward, rid, rs, transferSpan?.headers);
      if (transferSpan !== null) transferSpan.end(step.transfer ?? { mode: 'none', ok: false, bytes: 0, tokens: 0 }, step.placement.backend.id);
      if (shared !== null && step.placement.backend.id !== placement.backend.id) shared.reverted(step.placement.backend.id);
      placement = step.placement;
      if (rs.aborted) {
        state.finished(placement, input, null, false, now());
        step.arrived?.(now());
        return;
      }
      const b = placement.backend;
      const series = metrics.backend(b.id);
      series.decisions(config.policy, placement.reason).inc();
      b.inFlight++;
      let firstAt = 0;
      let result: AttemptResult;
      let observer: StreamObserver | null = null;
      // The engine joins the trace under EAR's upstream span (tracing on), or the client's (off).
      const upstream = span === null ? null : span.upstream(b.id, b.config.url, n);
      try {
        ({ result, observer } = await attempt(rs, b.pool, {
          path: route,
          body: step.body,
          headers: requestHeaders(rid, upstream === null ? tr.forward : upstream.headers),
          responseHeaders: [['x-ear-backend', b.id], ['x-request-id', rid]],
          // With no attempt or no other backend left, an engine's 5xx goes to the client as it is.
          final: n === config.maxAttempts - 1 || !hasOther(state, f.model, exclude, b.index),
          observer: newObserver,
          onFirstToken: () => {
            firstAt = now();
            step.arrived?.(firstAt);
            state.firstToken(placement, firstAt);
            series.ttft.observe((firstAt - t0) / 1000);
            upstream?.firstToken(firstAt - t0);
          }
        }));
      } finally {
        release(b);
      }
      const tEnd = now();
      step.arrived?.(tEnd);
      const usage = observer?.usage ?? null;
      upstream?.end(result.kind, 'status' in result ? result.status : null, usage, 'error' in result ? result.error : null);
      state.finished(placement, input, usage, result.kind === 'done', tEnd);
      shared?.completed(tEnd);
      last = result;
      if (result.kind === 'busy') {
        // Busy, not failed: no error is counted against it; this request tries the others.
        metrics.upstreamBusy.inc({ backend: b.id });
        exclude.add(b.index);
        continue;
      }
      if (result.kind === 'retryable') {
        metrics.upstreamErrors.inc({ backend: b.id, kind: result.status === null ? 'connect' : 'status' });
        exclude.add(b.index);
        continue;
      }
      if (result.kind === 'broken') metrics.upstreamErrors.inc({ backend: b.id, kind: 'midstream' });
      if (result.kind === 'done') {
        if (sessionId !== null && result.status < 300) deps.onSessionCompleted?.(sessionId, f.model, route, forward);
        series.requests(route, result.status).inc();
        series.e2e.observe((tEnd - t0) / 1000);
        const out = usage?.completionTokens ?? observer?.contentEvents ?? 0;
        if (firstAt > 0 && out > 1) series.tpot.observe((tEnd - firstAt) / 1000 / (out - 1));
      }
      return;
    }
    if (last && last.kind === 'busy') {
      metrics.requests.labels(route, '503', '').inc();
      throw new GatewayError('EAR_ERR_OVERLOADED', 'every backend that serves the model has its connection queue full; retry later', { retryAfterSeconds: 1 });
    }
    if (last && last.kind === 'retryable') {
      const err = noBackendAnswered(last);
      metrics.requests.labels(route, String(err.status), '').inc();
      throw err;
    }
    metrics.requests.labels(route, '503', '').inc();
    throw new GatewayError('EAR_ERR_NO_BACKEND', `no healthy backend serves the model \`${f.model}\``);
  }

  app.post('/v1/chat/completions', completion('chat'));
  app.post('/v1/completions', completion('completions'));
  mountContexts(app, {
    config, contexts, metrics, state,
    admit: (auth, res) => gate.admit('/v1/context', auth, () => remoteAddressOf(res)), backends, now, clock: deps.clock ?? Date.now,
    features: deps.features,
    // A context's prefill is admitted as its session's request would be; a retry goes at once.
    place: async (input, exclude, t, n, client) => {
      if (n === 0) return admit(input, client, DEFAULT_CLASS);
      const p = state.route(input, exclude, t, n);
      state.started(p, input, now());
      return p;
    },
    placed: (b, reason, n, seconds) => {
      decisionSeconds.observe(seconds);
      metrics.backend(b.id).decisions(config.policy, reason).inc();
      if (n > 0) metrics.retries.inc();
    },
    enter: (b) => { b.inFlight++; },
    leave: release,
    draining: () => draining,
    track: (p) => {
      inFlight++;
      void p.finally(() => { if (--inFlight === 0 && idle) idle(); });
    }
  });

  app.get('/v1/models', (res, req) => {
    const client = gate.admit('/v1/models', req.getHeader('authorization'), () => remoteAddressOf(res));
    if (client instanceof GatewayError) return new ResponseState(res).fail(client, retryAfter(client));
    const ids = new Set<string>();
    for (const b of backends) if (b.health === 'healthy' && !b.draining) for (const m of b.models) ids.add(m);
    const created = Math.floor(Date.now() / 1000);
    const data = [...ids].sort().map((id) => ({ id, object: 'model', created, owned_by: 'ear' }));
    res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'application/json').end(JSON.stringify({ object: 'list', data })));
  });
  app.get('/health', (res) => { res.cork(() => res.writeStatus('200 OK').end()); });
  app.get('/ready', (res) => {
    const r = readiness();
    res.cork(() => res.writeStatus(r.ready ? '200 OK' : '503 Service Unavailable').writeHeader('content-type', 'application/json').end(JSON.stringify(r)));
  });
  app.get('/metrics', (res) => {
    const rs = new ResponseState(res);
    for (const b of backends) {
      metrics.backendUp.set({ backend: b.id }, b.health === 'healthy' ? 1 : 0);
      metrics.inFlight.set({ backend: b.id }, b.inFlight);
    }
    for (const t of state.tableStats()) {
      metrics.tableSize.set({ table: t.table }, t.entries);
      metrics.tableDropped.set({ table: t.table }, t.dropped);
    }
    metrics.text().then((text) => rs.send(200, text, [['content-type', metrics.registry.contentType]]), (err) => rs.fail(err));
  });

  // Compared in constant time (credentials.ts); with no token configured nothing is admitted.
  const adminToken = new AdminToken(config.adminToken);
  const adminAuthorized = (auth: string): boolean => adminToken.matches(auth);
  app.get('/admin/backends', (res, req) => {
    const rs = new ResponseState(res);
    if (!adminAuthorized(req.getHeader('authorization'))) return rs.fail(new GatewayError('EAR_ERR_UNAUTHORIZED', 'admin token required'));
    const list = backends.map((b) => ({ id: b.id, url: b.config.url, role: b.config.role, health: b.health, draining: b.draining, models: [...b.models], engineLoad: b.engineLoad }));
    rs.send(200, JSON.stringify({ backends: list }), [['content-type', 'application/json']]);
  });
  app.get('/admin/sessions/:id', (res, req) => {
    const rs = new ResponseState(res);
    if (!adminAuthorized(req.getHeader('authorization'))) return rs.fail(new GatewayError('EAR_ERR_UNAUTHORIZED', 'admin token required'));
    const id = decodedParam(req.getParameter(0) ?? '');
    if (id === null) return rs.fail(new GatewayError('EAR_ERR_BAD_REQUEST', 'the session id is not valid percent-encoded UTF-8'));
    const answer = (): void => {
      const s = state.session(id);
      if (!s) return rs.fail(new GatewayError('EAR_ERR_NOT_FOUND', `no session "${id}"`));
      rs.send(200, JSON.stringify({ id, ...s }), [['content-type', 'application/json']]);
    };
    // With a shared store, the shared record first: every replica then shows the same figures.
    if (deps.sessions) deps.sessions.refresh(id).then(answer, (err) => rs.fail(err));
    else answer();
  });
  app.any('/*', (res, req) => {
    const rs = new ResponseState(res);
    const url = req.getUrl();
    const known = ['/v1/chat/completions', '/v1/completions', '/v1/models', '/health', '/ready', '/metrics', CONTEXT_PATH].includes(url) || url.startsWith(`${CONTEXT_PATH}/`);
    // The path is echoed cut short: uWS takes paths of tens of KB, and an error need not reflect them whole.
    const shown = url.length > 256 ? `${url.slice(0, 256)}…` : url;
    rs.fail(known ? new GatewayError('EAR_ERR_METHOD', `method ${req.getMethod().toUpperCase()} is not allowed on ${shown}`) : new GatewayError('EAR_ERR_NOT_FOUND', `no route ${shown}`));
  });

  /** Ready: not draining, a healthy backend, and what the caller adds (active-passive: leading). */
  function readiness (): ReadinessCondition {
    const own = draining ? 'the gateway is shutting down' : backends.some((b) => b.health === 'healthy' && !b.draining) ? null : 'no healthy backend';
    const extra = deps.readiness?.() ?? null;
    const ready = own === null && (extra === null || extra.ready);
    const reason = own ?? (extra !== null && !extra.ready ? extra.reason : undefined);
    return extra === null ? { ready, reason } : { ...extra, ready, reason };
  }
  async function checkHealth (): Promise<void> {
    await Promise.all(backends.map(async (b) => {
      if (b.draining) return;
      await probe(b, config.unhealthyAfter);
      state.backendChanged(b, now());
    }));
  }
  async function scrapeAll (): Promise<void> {
    await Promise.all(backends.map(async (b) => {
      if (b.health !== 'healthy' || b.draining) return;
      await scrape(b, now());
      if (b.engineLoad && b.lastScrape > 0) state.engineLoad(b, b.engineLoad, b.lastScrape);
    }));
  }
  /** A request lets go of `b`: a backend a reload removed leaves once the last one has. */
  function release (b: Backend): void {
    if (--b.inFlight === 0 && b.draining) void leave(b);
  }
  /** A drained backend goes: its connections close, it leaves the list, and its pod row is purged and freed. */
  async function leave (b: Backend): Promise<void> {
    if (b.gone) return;
    b.gone = true;
    const i = backends.indexOf(b);
    if (i >= 0) backends.splice(i, 1);
    await b.pool.close().catch(() => {});
    await state.release(b);
    // Its series go too, unless a backend of the same id (a changed URL) took its place.
    if (!backends.some((x) => x.id === b.id)) await metrics.removeBackend(b.id);
  }
  async function applyReload (next: Readonly<GatewayConfig>): Promise<void> {
    const wanted = new Map(next.backends.map((c) => [c.id, c]));
    for (const b of [...backends]) {
      const c = wanted.get(b.id);
      if (b.draining) continue;
      if (c && c.url === b.config.url && c.role === b.config.role && c.kvEvents === b.config.kvEvents && c.replay === b.config.replay && c.kvTopic === b.config.kvTopic && c.kvCapacityBlocks === b.config.kvCapacityBlocks && c.apiKey === b.config.apiKey) {
        wanted.delete(b.id);
        continue;
      }
      b.draining = true;
      state.backendChanged(b, now());
      state.retire(b);
      if (b.inFlight === 0) void leave(b).catch(() => {});
    }
    const added: Backend[] = [];
    let refused: unknown = null;
    for (const c of wanted.values()) {
      let row: number;
      try {
        row = state.admit(c.id);
      } catch (err) {
        // Every pod row in use (old backends still draining): the others join now; the caller may try again.
        refused ??= err;
        continue;
      }
      const b = new Backend(row, c, config);
      backends.push(b);
      added.push(b);
      state.backendChanged(b, now());
    }
    // Probed together: discovery adds pods by the hundred in a rolling update, and one probe after another
    // (up to 2 s each for a pod that does not answer yet) would hold this reload and every one queued after it.
    await Promise.all(added.map(async (b) => {
      await probe(b, config.unhealthyAfter);
      state.backendChanged(b, now());
    }));
    if (refused !== null) throw refused;
  }
  let reloads: Promise<void> = Promise.resolve();
  function reload (next: Readonly<GatewayConfig>): Promise<void> {
    const r = reloads.then(() => applyReload(next));
    reloads = r.catch(() => {});
    return r;
  }
  // Health and the engines' figures (load, KV capacity) before the first request, not one interval later: a
  // request let in while some backends were still unprobed would see only the others, and a session bound to
  // one not yet probed (read back from a shared store after a restart) would be moved off it.
  await checkHealth();
  if (config.metricsIntervalMs > 0) await scrapeAll();
  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(config.host, config.port, (token) => (token ? resolve(token) : reject(new Error(`cannot listen on ${config.host}:${config.port}`))));
  });
  const port = uWS.us_socket_local_port(listenSocket);
  const healthTimer = setInterval(() => { void checkHealth(); }, config.healthIntervalMs);
  // The scheduler's backstop: releases come with first tokens, ends and scrapes; this catches timeouts and starvation.
  const admissionTimer = setInterval(() => { state.tick(now()); }, ADMISSION_TICK_MS);
  admissionTimer.unref();
  registerAdmissionMetrics(metrics.registry, () => state.admissionStats(now()));
  metrics.registerEppAliases({
    pool: () => config.discovery?.inferencePool ?? '',
    backends: () => backends.map((b) => ({ id: b.id, ready: b.health === 'healthy' && !b.draining, inFlight: b.inFlight, load: b.engineLoad })),
    queueDepthByLevel: () => state.admissionStats(now()).depthByLevel
  });
  const metricsTimer = config.metricsIntervalMs > 0 ? setInterval(() => { void scrapeAll(); }, config.metricsIntervalMs) : null;
  healthTimer.unref();
  metricsTimer?.unref();

  let closing: Promise<void> | null = null;
  return {
    port,
    backends,
    metrics,
    contexts,
    gate,
    checkHealth,
    readiness,
    reload,
    reconfigure (next) {
      gate.reconfigure(next);
      adminToken.replace(next.adminToken);
    },
    enter: (b) => { b.inFlight++; },
    exit: release,
    close () {
      closing ??= (async () => {
        draining = true;
        uWS.us_listen_socket_close(listenSocket);
        clearInterval(healthTimer);
        if (metricsTimer) clearInterval(metricsTimer);
        // Requests waiting for admission are in flight too: a healthy backend will serve them as the running ones
        // end, so they drain with the rest; only what still waits at the drain deadline is answered 503.
        if (inFlight > 0) {
          await new Promise<void>((resolve) => {
            idle = resolve;
            setTimeout(resolve, config.drainTimeoutMs).unref();
          });
        }
        clearInterval(admissionTimer);
        state.dropAll('shutdown', now());
        await Promise.all(backends.map((b) => b.pool.close().catch(() => {})));
        await contexts.close();
      })();
      return closing;
    }
  };
}
