// `ear serve`: the gateway's uWebSockets.js door. It takes requests in (accept: src/request/accept.ts, then the
// body read and bounded) and hands each to the process core's request pipeline (core.ts, src/request/) with the
// uWS transport, which proxies to the engines; it also serves the other routes (models, contexts, health,
// metrics, admin). See docs/architecture.md#a-requests-life.
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp, us_listen_socket } from 'uWebSockets.js';
import type { Backend } from '../fleet/backends.js';
import type { BackendFleet } from '../fleet/fleet.js';
import type { GatewayConfig } from '../config/index.js';
import { EarError } from '../errors/errors.js';
import type { GatewayMetrics } from '../telemetry/metrics.js';
import { requestId } from '../request/request-id.js';
import { DIALECTS, type Endpoint } from '../dialects/dialect.js';
import { decodeBody } from '../request/body-encoding.js';
import type { ContextRegistry } from './contexts.js';
import { CONTEXT_PATH, decodedParam, mountContexts } from './context-routes.js';
import { limitHeadersOn, readBody, ResponseState } from './uws-io.js';
import { reportFault } from '../request/faults.js';
import { remoteAddressOf, type ClientGate } from '../request/client-gate.js';
import { admitClient, credentialOf, readRequestHead, type HeaderOf } from '../request/accept.js';
import { RequestContext } from '../request/context.js';
import { runPipeline, type FeatureFn, type Pipeline } from '../request/pipeline.js';
import { UwsTransport } from './uws-transport.js';
import { headTooLarge } from './head-size.js';
import { ProcessCore, type CoreDeps, type ReadinessCondition } from './core.js';

export type { FeatureFn, ReadinessCondition };

/** What startGateway takes: the process core's deps (core.ts). */
export type GatewayDeps = CoreDeps;

export interface Gateway {
  readonly port: number;
  /** The process core this door serves from (the endpoint picker's door takes it too). */
  readonly core: ProcessCore;
  /** The process's backends (fleet.ts). */
  readonly fleet: BackendFleet;
  readonly backends: readonly Backend[];
  readonly metrics: GatewayMetrics;
  /** The request pipeline: its events (src/request/channels.ts) are this gateway's requests'. */
  readonly pipeline: Pipeline;
  /** Explicit contexts (POST /v1/context). */
  readonly contexts: ContextRegistry;
  /** API keys and rate limits of the client routes (every door checks its requests with it). */
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

/** The process core (core.ts) and the uWS door on it, listening: what `ear serve` runs, and tests start. */
export async function startGateway (deps: GatewayDeps): Promise<Gateway> {
  assertNativeUws();
  const core = new ProcessCore(deps);
  await core.start();
  let port: number;
  try {
    port = await listenHttp(core);
  } catch (err) {
    await core.close();
    throw err;
  }
  const { fleet } = core;
  return {
    port,
    core,
    fleet,
    pipeline: core.pipeline,
    backends: core.backends,
    metrics: core.metrics,
    contexts: core.contexts,
    gate: core.gate,
    checkHealth: () => fleet.checkHealth(),
    readiness: () => core.readiness(),
    reload: (next) => fleet.reload(next),
    reconfigure: (next) => core.reconfigure(next),
    enter: (b) => fleet.hold(b),
    exit: (b) => fleet.release(b),
    close: () => core.close()
  };
}

/** The uWS door on `core`: every HTTP route, on config.host:port. Resolves the port it listens on; stops accepting when the core drains. */
export async function listenHttp (core: ProcessCore): Promise<number> {
  const { config, now, metrics, fleet, state, backends, gate, pipeline } = core;
  const wallClock = core.clock;
  const app: TemplatedApp = uWS.App();

  function completion (endpoint: Endpoint) {
    const dialect = DIALECTS[endpoint];
    const route = dialect.path;
    return (res: HttpResponse, req: HttpRequest) => {
      // Everything from req is read now: it is gone after this handler returns.
      const t0 = now();
      const header: HeaderOf = (h) => req.getHeader(h);
      const tooLarge = headTooLarge(req, config.maxHeaderBytes);
      const auth = credentialOf(header);
      const declaredLength = req.getHeader('content-length');
      const query = req.getQuery() ?? '';
      const rid = requestId(req.getHeader('x-request-id'));
      const rs = new ResponseState(res);
      rs.dialect = dialect;
      rs.requestId = rid;
      const ridHeader: [string, string] = ['x-request-id', rid];
      // A refusal before the pipeline: answered in the API's shape, counted once (the pipeline counts the rest).
      const refuse = (err: unknown, headers: ReadonlyArray<[string, string]> = [ridHeader], close = false): void => {
        if (!rs.live) return;
        rs.fail(err, headers, close);
        if (rs.status > 0) core.refused(route, rs.status);
      };
      if (tooLarge !== null) return refuse(tooLarge);
      if (core.draining) return refuse(new EarError('EAR_ERR_DRAINING', 'the gateway is shutting down'));
      let client;
      let head;
      try {
        client = admitClient(gate, route, auth, () => remoteAddressOf(res), limitHeadersOn(rs, wallClock));
        head = readRequestHead(header, auth, config);
      } catch (err) {
        return refuse(err);
      }
      const { user, limits } = client;
      const h = head;
      const run = (body: Buffer): void => {
        const ctx = new RequestContext(pipeline, {
          id: rid, endpoint, via: 'http', startedAt: t0, keyUser: user, priorityClass: h.priorityClass, sessionId: h.sessionId, parentSessionId: h.parentSessionId,
          body, traceparent: h.traceparent, tracestate: h.tracestate, abort: rs, query, limits, ownEnginePriority: h.ownEnginePriority
        });
        // runPipeline answers every failure itself: a rejection is a fault of EAR's, reported with the request's id.
        core.track(runPipeline(ctx, new UwsTransport(rs, rid)).catch((err: unknown) => reportFault(err, 'request', rid)));
      };
      readBody(rs, config, (body) => {
        if (h.codings.length === 0) return run(body);
        decodeBody(body, h.codings, config.maxBodyBytes).then((decoded) => { if (!rs.aborted) run(decoded); }, (err) => refuse(err));
      }, declaredLength, refuse);
    };
  }

  for (const d of Object.values(DIALECTS)) app.post(d.path, completion(d.endpoint));
  // Claude Code's first call: whether the base URL answers at all.
  app.head('/', (res) => { res.cork(() => res.writeStatus('200 OK').end()); });
  mountContexts(app, core);

  app.get('/v1/models', (res, req) => {
    const rs = new ResponseState(res);
    const tooLarge = headTooLarge(req, config.maxHeaderBytes);
    if (tooLarge !== null) return rs.fail(tooLarge);
    try {
      admitClient(gate, '/v1/models', credentialOf((h) => req.getHeader(h)), () => remoteAddressOf(res), limitHeadersOn(rs, wallClock));
    } catch (err) {
      return rs.fail(err);
    }
    const ids = new Set<string>();
    for (const b of backends) if (b.health === 'healthy' && !b.draining) for (const m of b.models) ids.add(m);
    const created = Math.floor(Date.now() / 1000);
    const data = [...ids].sort().map((id) => ({ id, object: 'model', created, owned_by: 'ear' }));
    rs.send(200, JSON.stringify({ object: 'list', data }), [['content-type', 'application/json']]);
  });
  app.get('/health', (res) => { res.cork(() => res.writeStatus('200 OK').end()); });
  app.get('/ready', (res) => {
    const r = core.readiness();
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

  const adminAuthorized = (auth: string): boolean => core.adminToken.matches(auth);
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
    if (core.sessions !== null) core.sessions.refresh(id).then(answer, (err) => rs.fail(err));
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

  const listenSocket = await new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(config.host, config.port, (token) => (token ? resolve(token) : reject(new Error(`cannot listen on ${config.host}:${config.port}`))));
  });
  core.onDrain(() => uWS.us_listen_socket_close(listenSocket));
  return uWS.us_socket_local_port(listenSocket);
}
