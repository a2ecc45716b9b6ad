// `ear serve`: the gateway's uWebSockets.js edge. It takes requests in (body limits, auth, rate limits, session and
// priority headers) and hands each to the request pipeline (src/request/) with the uWS transport, which proxies to
// the engines; it also serves the other routes (models, contexts, health, metrics, admin) and keeps the backend list
// (health probes, engine metrics, reloads). See docs/architecture.md#a-requests-life.
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import { performance } from 'node:perf_hooks';
import { RESPONSE_ORIGIN_TTL_S, UPKEEP_EVERY_MS } from '../core/defaults.js';
import { ResponseOrigins } from '../request/response-origin.js';
import { priorityClassOf } from '../request/priority.js';
import { registerAdmissionMetrics } from '../telemetry/admission-metrics.js';
import type { Backend } from '../fleet/backends.js';
import { BackendFleet, type ReadinessCondition } from '../fleet/fleet.js';
import type { GatewayConfig } from '../config/index.js';
import { EarError } from '../errors/errors.js';
import { GatewayMetrics } from '../telemetry/metrics.js';
import { requestId } from '../request/request-id.js';
import { DIALECTS, type Endpoint } from '../dialects/dialect.js';
import { contentCodings, decodeBody } from '../request/body-encoding.js';
import type { RoutingState } from '../fleet/routing-port.js';
import { sessionOf, SESSION_ID_HEADERS } from '../request/session-id.js';
import { ContextRegistry } from './contexts.js';
import { CONTEXT_PATH, decodedParam, mountContexts } from './context-routes.js';
import type { SessionStore } from '../store/session-store.js';
import { readBody, registerClientIoMetrics, ResponseState } from './uws-io.js';
import { registerFaultMetrics, reportFault } from '../request/faults.js';
import type { SharedSessions } from '../store/shared-sessions.js';
import { KvTransferStep } from '../request/kv-transfer-step.js';
import { ClientGate, limitsOf, remoteAddressOf, type AdmittedClient } from '../request/client-gate.js';
import { AdminToken, bearerToken, clientCredential } from '../request/credentials.js';
import { kvTransfersFor } from '../migration/transfers-for.js';
import type { Tracing } from '../telemetry/tracing.js';
import { subscribeRequestSpans } from '../telemetry/request-spans.js';
import { RequestContext } from '../request/context.js';
import { Pipeline, runPipeline, type FeatureFn } from '../request/pipeline.js';
import { subscribeRequestMetrics } from '../telemetry/request-metrics.js';
import { subscribeKvTransferMetrics } from '../telemetry/kv-transfer-metrics.js';
import { UwsTransport } from './uws-transport.js';
import { headTooLarge } from './head-size.js';

export type { FeatureFn };

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

export type { ReadinessCondition };

export interface Gateway {
  readonly port: number;
  /** The process's backends (fleet.ts), which the uWS edge serves. */
  readonly fleet: BackendFleet;
  readonly backends: readonly Backend[];
  readonly metrics: GatewayMetrics;
  /** The request pipeline: its events (src/request/channels.ts) are this gateway's requests'. */
  readonly pipeline: Pipeline;
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

function assertNativeUws (): void {
  // The pinned build ships binaries for these ABIs only; anything else silently falls back to a slow shim.
  if (!['93', '108', '115'].includes(process.versions.modules)) {
    throw new Error(`uWebSockets.js has no native build for Node ABI ${process.versions.modules}: run EAR on Node 20`);
  }
}

/** The methods a public route takes (its 405's Allow header), or null for a path that is no route (404). */
function allowedMethods (url: string): string | null {
  if (Object.values(DIALECTS).some((d) => d.path === url) || url === CONTEXT_PATH) return 'POST';
  if (url.startsWith(`${CONTEXT_PATH}/`)) return 'GET, DELETE';
  if (url === '/') return 'HEAD';
  return ['/v1/models', '/health', '/ready', '/metrics'].includes(url) ? 'GET' : null;
}

export async function startGateway (deps: GatewayDeps): Promise<Gateway> {
  assertNativeUws();
  const { config } = deps;
  const now = deps.now ?? (() => performance.now());
  const metrics = new GatewayMetrics();
  registerClientIoMetrics(metrics.registry);
  registerFaultMetrics(metrics.registry);
  // The live backends (draining ones until their requests end). A backend's index is the pod row it leases in
  // the shared tables: a row is released when its backend has gone, and reused by a later one.
  const fleet = new BackendFleet({ config, state: deps.state, onGone: (id) => metrics.removeBackend(id), now, readiness: deps.readiness });
  const { backends, state } = fleet;
  const release = (b: Backend): void => fleet.release(b);
  // Explicit contexts: the registry wraps the routing state to keep a context's session bound and alive.
  const contexts = new ContextRegistry({ maxContexts: config.maxContexts, sessionIdleMs: config.sessionIdleMs, registry: metrics.registry, store: deps.sessionStore, clock: deps.clock, now });
  contexts.attach(state);
  const kvTransfers = new KvTransferStep(kvTransfersFor(config), state, now, release);
  let draining = false;
  let inFlight = 0;
  let idle: (() => void) | null = null;
  // API keys (compared in constant time) and rate limits, for every /v1 route (client-gate.ts). A request whose
  // body names no OpenAI `user` counts against its API key's id (an HMAC of the key, never the key).
  const gate = new ClientGate(config, metrics.registry, now);
  const wallClock = deps.clock ?? Date.now;
  /** A limited client's every answer (errors and streams too) carries its rate-limit headers, OpenAI's style. */
  const admitted = (rs: ResponseState, answer: AdmittedClient | EarError): AdmittedClient | EarError => {
    const limits = limitsOf(answer);
    // Every API's answers carry OpenAI's names (x-ratelimit-*); Anthropic's carry Anthropic's too
    // (anthropic-ratelimit-*): a client of either SDK reads its own.
    if (limits !== null) {
      rs.extraHeaders = () => {
        const openai = limits.headers('openai', wallClock());
        return rs.dialect?.errors === 'anthropic' ? [...openai, ...limits.headers('anthropic', wallClock())] : openai;
      };
    }
    return answer;
  };
  const tracing = deps.tracing ?? null;

  const pipeline = new Pipeline({
    policy: config.policy, maxAttempts: config.maxAttempts, maxResumes: config.maxResumes, maxResumeBytes: config.maxResumeBytes, state, features: deps.features, backends, sessions: deps.sessions ?? null, kvTransfers, now,
    hold: (b) => fleet.hold(b), release, onSessionCompleted: deps.onSessionCompleted,
    responses: new ResponseOrigins({ store: contexts.store, ttlSeconds: RESPONSE_ORIGIN_TTL_S }), maxRetentionTtlMs: config.maxRetentionTtlMs
  });
  // The path publishes; metrics (and spans, with tracing on) subscribe.
  const unsubscribe = [subscribeRequestMetrics(pipeline, metrics), subscribeKvTransferMetrics(pipeline, metrics.registry, () => state.migrationStats?.() ?? null)];
  if (tracing !== null) unsubscribe.push(subscribeRequestSpans(pipeline, tracing));

  const app: TemplatedApp = uWS.App();

  function completion (endpoint: Endpoint) {
    const dialect = DIALECTS[endpoint];
    return (res: HttpResponse, req: HttpRequest) => {
      // Everything from req is read now: it is gone after this handler returns.
      const t0 = now();
      const tooLarge = headTooLarge(req, config.maxHeaderBytes);
      // Anthropic's clients (Claude Code) send their key as x-api-key: a credential as a bearer token is.
      const auth = clientCredential(req.getHeader('authorization'), req.getHeader('x-api-key'));
      const declaredLength = req.getHeader('content-length');
      const encoding = req.getHeader('content-encoding');
      const query = req.getQuery() ?? '';
      const priorityHeader = req.getHeader('x-ear-priority');
      const rid = requestId(req.getHeader('x-request-id'));
      const traceparent = req.getHeader('traceparent');
      const tracestate = traceparent === '' ? '' : req.getHeader('tracestate');
      const headerValues = SESSION_ID_HEADERS.map((h) => req.getHeader(h));
      const { sessionId, parentSessionId } = sessionOf((h) => headerValues[SESSION_ID_HEADERS.indexOf(h)] ?? '');
      const apiKey = bearerToken(auth);
      const rs = new ResponseState(res);
      rs.dialect = dialect;
      rs.requestId = rid;
      const ridHeader: [string, string] = ['x-request-id', rid];
      if (tooLarge !== null) return rs.fail(tooLarge, [ridHeader]);
      if (draining) return rs.fail(new EarError('EAR_ERR_DRAINING', 'the gateway is shutting down'), [ridHeader]);
      const client = admitted(rs, gate.admit(dialect.path, auth, () => remoteAddressOf(res)));
      if (client instanceof EarError) return rs.fail(client, [ridHeader]);
      let priorityClass: number;
      let codings: string[];
      try {
        priorityClass = priorityClassOf(priorityHeader, apiKey, config.apiKeyPriority);
        codings = contentCodings(encoding);
      } catch (err) {
        return rs.fail(err, [ridHeader]);
      }
      const run = (body: Buffer): void => {
        inFlight++;
        const ctx = new RequestContext(pipeline, {
          id: rid, endpoint, via: 'http', startedAt: t0, keyUser: client.user, priorityClass, sessionId, parentSessionId, body, traceparent, tracestate, abort: rs,
          query, limits: client.limits, ownEnginePriority: apiKey !== null && config.enginePriorityKeys.includes(apiKey)
        });
        // runPipeline answers every failure itself: a rejection is a fault of EAR's, reported with the request's id.
        runPipeline(ctx, new UwsTransport(rs, rid)).catch((err: unknown) => reportFault(err, 'request', rid)).finally(() => { if (--inFlight === 0 && idle) idle(); });
      };
      readBody(rs, config, (body) => {
        if (codings.length === 0) return run(body);
        decodeBody(body, codings, config.maxBodyBytes).then((decoded) => { if (!rs.aborted) run(decoded); }, (err) => rs.fail(err, [ridHeader]));
      }, declaredLength);
    };
  }

  for (const d of Object.values(DIALECTS)) app.post(d.path, completion(d.endpoint));
  // Claude Code's first call: whether the base URL answers at all.
  app.head('/', (res) => { res.cork(() => res.writeStatus('200 OK').end()); });
  mountContexts(app, {
    config, contexts, metrics, state, pipeline,
    admit: (auth, rs) => admitted(rs, gate.admit('/v1/context', auth, () => remoteAddressOf(rs.res))), backends, now, clock: wallClock,
    draining: () => draining,
    track: (p) => {
      inFlight++;
      void p.finally(() => { if (--inFlight === 0 && idle) idle(); });
    }
  });


  app.get('/v1/models', (res, req) => {
    const rs = new ResponseState(res);
    const tooLarge = headTooLarge(req, config.maxHeaderBytes);
    if (tooLarge !== null) return rs.fail(tooLarge);
    const client = admitted(rs, gate.admit('/v1/models', clientCredential(req.getHeader('authorization'), req.getHeader('x-api-key')), () => remoteAddressOf(res)));
    if (client instanceof EarError) return rs.fail(client);
    const ids = new Set<string>();
    for (const b of backends) if (b.health === 'healthy' && !b.draining) for (const m of b.models) ids.add(m);
    const created = Math.floor(Date.now() / 1000);
    const data = [...ids].sort().map((id) => ({ id, object: 'model', created, owned_by: 'ear' }));
    rs.send(200, JSON.stringify({ object: 'list', data }), [['content-type', 'application/json']]);
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
      metrics.engineRestarts.set({ backend: b.id }, b.restarts);
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
    if (!adminAuthorized(req.getHeader('authorization'))) return rs.fail(new EarError('EAR_ERR_UNAUTHORIZED', 'admin token required'));
    const list = backends.map((b) => ({ id: b.id, url: b.config.url, role: b.config.role, health: b.health, draining: b.draining, models: [...b.models], engineLoad: b.engineLoad }));
    rs.send(200, JSON.stringify({ backends: list }), [['content-type', 'application/json']]);
  });
  app.get('/admin/sessions/:id', (res, req) => {
    const rs = new ResponseState(res);
    if (!adminAuthorized(req.getHeader('authorization'))) return rs.fail(new EarError('EAR_ERR_UNAUTHORIZED', 'admin token required'));
    const id = decodedParam(req.getParameter(0) ?? '');
    if (id === null) return rs.fail(new EarError('EAR_ERR_BAD_REQUEST', 'the session id is not valid percent-encoded UTF-8'));
    const answer = (): void => {
      const s = state.session(id);
      if (!s) return rs.fail(new EarError('EAR_ERR_NOT_FOUND', `no session "${id}"`));
      rs.send(200, JSON.stringify({ id, ...s }), [['content-type', 'application/json']]);
    };
    // With a shared store, the shared record first: every replica then shows the same figures.
    if (deps.sessions) deps.sessions.refresh(id).then(answer, (err) => rs.fail(err));
    else answer();
  });
  app.any('/*', (res, req) => {
    const rs = new ResponseState(res);
    const tooLarge = headTooLarge(req, config.maxHeaderBytes);
    if (tooLarge !== null) return rs.fail(tooLarge);
    const url = req.getUrl();
    // Anthropic's clients read Anthropic's error shape on its routes (/v1/messages and below); others OpenAI's.
    rs.dialect = url === DIALECTS.messages.path || url.startsWith(`${DIALECTS.messages.path}/`) ? DIALECTS.messages : null;
    const allow = allowedMethods(url);
    // The path is echoed cut short: uWS takes paths of tens of KB, and an error need not reflect them whole.
    const shown = url.length > 256 ? `${url.slice(0, 256)}…` : url;
    // RFC 9110 §15.5.6: a 405 names the methods the route takes.
    if (allow !== null) rs.fail(new EarError('EAR_ERR_METHOD', `method ${req.getMethod().toUpperCase()} is not allowed on ${shown}`), [['allow', allow]]);
    else rs.fail(new EarError('EAR_ERR_NOT_FOUND', `no route ${shown}`));
  });

  const readiness = (): ReadinessCondition => fleet.readiness(draining);
  await fleet.start();
  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(config.host, config.port, (token) => (token ? resolve(token) : reject(new Error(`cannot listen on ${config.host}:${config.port}`))));
  });
  const port = uWS.us_socket_local_port(listenSocket);
  // The upkeep: releases come with first tokens, ends and scrapes, this catches timeouts and starvation; and it
  // expires idle sessions a bounded slice at a time, so the session table follows the live sessions at any rate.
  const admissionTimer = setInterval(() => { state.tick(now()); }, UPKEEP_EVERY_MS);
  admissionTimer.unref();
  registerAdmissionMetrics(metrics.registry, () => state.admissionStats(now()));
  metrics.registerEppAliases({
    pool: () => config.discovery?.inferencePool ?? '',
    backends: () => backends.map((b) => ({ id: b.id, ready: b.health === 'healthy' && !b.draining, inFlight: b.inFlight, load: b.engineLoad })),
    queueDepthByLevel: () => state.admissionStats(now()).depthByLevel
  });

  let closing: Promise<void> | null = null;
  return {
    pipeline,
    port,
    fleet,
    backends,
    metrics,
    contexts,
    gate,
    checkHealth: () => fleet.checkHealth(),
    readiness,
    reload: (next) => fleet.reload(next),
    reconfigure (next) {
      gate.reconfigure(next);
      adminToken.replace(next.adminToken);
    },
    enter: (b) => fleet.hold(b),
    exit: release,
    close () {
      closing ??= (async () => {
        draining = true;
        uWS.us_listen_socket_close(listenSocket);
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
        await fleet.close();
        await contexts.close();
        for (const u of unsubscribe) u();
      })();
      return closing;
    }
  };
}
