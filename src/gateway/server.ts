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
import type { AdmittedClient, ClientLimits, GatedRoute } from '../request/client-gate.js';
import { RequestContext } from '../request/context.js';
import { runPipeline, type FeatureFn, type Pipeline } from '../request/pipeline.js';
import { UwsTransport } from './uws-transport.js';
import { headTooLarge } from './head-size.js';
import { ProcessCore, type CoreDeps, type ReadinessCondition } from './core.js';
import { HttpThreads, type HttpThreadsOptions } from './http-threads.js';
import type { SharedRegion } from '../core/region.js';

export type { FeatureFn, ReadinessCondition };

/** What startGateway takes: the process core's deps (core.ts), and the shared region when httpThreads ≥ 2. */
export interface GatewayDeps extends CoreDeps {
  /** The data-plane threads' start (config httpThreads ≥ 2): the region they share, and where they log. */
  threads?: { shared: SharedRegion; log: HttpThreadsOptions['log']; entry?: URL };
}

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
  /** The data-plane threads (httpThreads ≥ 2), null when the main thread serves HTTP itself. */
  readonly threads: HttpThreads | null;
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
  let threads: HttpThreads | null = null;
  let closeOwner = (): void => {};
  try {
    if (core.config.httpThreads > 1 && deps.threads !== undefined) {
      // The main thread decides; N threads serve the port (docs/architecture.md#n-data-plane-threads).
      const owner = await listenSockets(core, { host: '127.0.0.1', port: 0, forwarded: true, metricsText: () => threads!.metricsText() });
      closeOwner = owner.close;
      threads = new HttpThreads({ core, shared: deps.threads.shared, ownerPort: owner.port, threads: core.config.httpThreads, log: deps.threads.log, entry: deps.threads.entry });
      port = await threads.start();
    } else {
      port = await listenHttp(core);
    }
  } catch (err) {
    await core.close();
    await threads?.stop();
    closeOwner();
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
    reconfigure: (next) => {
      core.reconfigure(next);
      threads?.gate();
    },
    enter: (b) => fleet.hold(b),
    exit: (b) => fleet.release(b),
    threads,
    close: async () => {
      await core.close();
      await threads?.stop();
      closeOwner();
    }
  };
}

/**
 * What a request route of the uWS door asks of its process: the process core on the main thread, or a data-plane
 * thread's stand-in that asks the main thread (http-thread.ts), whose client admission answers later.
 */
export interface DoorCore {
  readonly config: Readonly<GatewayConfig>;
  readonly now: () => number;
  readonly clock: () => number;
  readonly pipeline: Pipeline;
  readonly draining: boolean;
  refused (route: string, status: number): void;
  track (p: Promise<unknown>): void;
  /** The client at the gate (API key, request rate limit); throws or rejects with the refusal (401, 429). */
  admitClient (route: GatedRoute, auth: string, address: () => string, limited: (l: ClientLimits) => void): AdmittedClient | Promise<AdmittedClient>;
  /** A request came to an inference route (a data-plane thread counts its own, refused or not). */
  taken? (): void;
}

/**
 * Where a handler learns its client's address (for per-IP limits): the connection's, or, on the main thread's
 * loopback listener that data-plane threads hand routes to, the header the thread wrote (FORWARDED_ADDRESS).
 */
export type AddressOf = (res: HttpResponse, req: HttpRequest) => () => string;

/** The header a data-plane thread puts the client's address in when it hands a request to the main thread. */
export const FORWARDED_ADDRESS = 'x-ear-client-address';

export const connectionAddress: AddressOf = (res) => () => remoteAddressOf(res);
const forwardedAddress: AddressOf = (_res, req) => {
  const a = req.getHeader(FORWARDED_ADDRESS);
  return () => a;
};

/** The handler of an inference route (a dialect's path): accept, read the body, then the pipeline. */
export function completion (door: DoorCore, endpoint: Endpoint, addressOf: AddressOf) {
  const { config, now, pipeline } = door;
  const wallClock = door.clock;
  const dialect = DIALECTS[endpoint];
  const route = dialect.path;
  return (res: HttpResponse, req: HttpRequest) => {
    // Everything from req is read now: it is gone after this handler returns.
    const t0 = now();
    door.taken?.();
    const header: HeaderOf = (h) => req.getHeader(h);
    const tooLarge = headTooLarge(req, config.maxHeaderBytes);
    const auth = credentialOf(header);
    const declaredLength = req.getHeader('content-length');
    const query = req.getQuery() ?? '';
    const rid = requestId(req.getHeader('x-request-id'));
    const address = addressOf(res, req);
    const rs = new ResponseState(res);
    rs.dialect = dialect;
    rs.requestId = rid;
    const ridHeader: [string, string] = ['x-request-id', rid];
    // A refusal before the pipeline: answered in the API's shape, counted once (the pipeline counts the rest).
    const refuse = (err: unknown, headers: ReadonlyArray<[string, string]> = [ridHeader], close = false): void => {
      if (!rs.live) return;
      rs.fail(err, headers, close);
      if (rs.status > 0) door.refused(route, rs.status);
    };
    if (tooLarge !== null) return refuse(tooLarge);
    if (door.draining) return refuse(new EarError('EAR_ERR_DRAINING', 'the gateway is shutting down'));
    let client;
    let head;
    try {
      client = door.admitClient(route, auth, address, limitHeadersOn(rs, wallClock));
      head = readRequestHead(header, auth, config);
    } catch (err) {
      return refuse(err);
    }
    const h = head;
    const run = (c: AdmittedClient, body: Buffer): void => {
      if (!rs.live) return;
      const ctx = new RequestContext(pipeline, {
        id: rid, endpoint, via: 'http', startedAt: t0, keyUser: c.user, priorityClass: h.priorityClass, sessionId: h.sessionId, parentSessionId: h.parentSessionId,
        body, traceparent: h.traceparent, tracestate: h.tracestate, abort: rs, query, limits: c.limits, ownEnginePriority: h.ownEnginePriority
      });
      // runPipeline answers every failure itself: a rejection is a fault of EAR's, reported with the request's id.
      door.track(runPipeline(ctx, new UwsTransport(rs, rid)).catch((err: unknown) => reportFault(err, 'request', rid)));
    };
    const decoded = (c: AdmittedClient, body: Buffer): void => {
      if (h.codings.length === 0) return run(c, body);
      decodeBody(body, h.codings, config.maxBodyBytes).then((d) => { if (!rs.aborted) run(c, d); }, (err) => refuse(err));
    };
    if (!(client instanceof Promise)) {
      const c = client;
      readBody(rs, config, (body) => decoded(c, body), declaredLength, refuse);
      return;
    }
    // A data-plane thread: the owner's gate answers while the body arrives; the request goes on when both have.
    let admitted: AdmittedClient | null = null;
    let got: Buffer | null = null;
    client.then((c) => {
      admitted = c;
      if (got !== null) decoded(c, got);
    }, (err) => refuse(err));
    readBody(rs, config, (body) => {
      got = body;
      if (admitted !== null) decoded(admitted, body);
    }, declaredLength, refuse);
  };
}

export interface ListenOptions {
  host: string;
  port: number;
  /**
   * The main thread's loopback listener for data-plane threads (httpThreads ≥ 2): they hand it the routes they do
   * not serve themselves, with the client's address in FORWARDED_ADDRESS.
   */
  forwarded?: boolean;
  /** /metrics answers this text instead of the registry's own (the threads' sums). */
  metricsText?: () => Promise<string>;
}

/** The uWS door on `core`: every HTTP route, on config.host:port. Resolves the port it listens on; stops accepting when the core drains. */
export async function listenHttp (core: ProcessCore): Promise<number> {
  return (await listenSockets(core, { host: core.config.host, port: core.config.port })).port;
}

/** listenHttp on `opts`; `close` closes the listener (the loopback one is not closed by the drain: the threads hand it routes while they drain). */
async function listenSockets (core: ProcessCore, opts: ListenOptions): Promise<{ port: number; close: () => void }> {
  const { config, metrics, state, backends, gate } = core;
  const wallClock = core.clock;
  const app: TemplatedApp = uWS.App();
  const addressOf = opts.forwarded === true ? forwardedAddress : connectionAddress;
  // A data-plane thread bounded the client's head before it handed the request on, with a header of its own added.
  const headLimit = opts.forwarded === true ? Number.MAX_SAFE_INTEGER : config.maxHeaderBytes;

  for (const d of Object.values(DIALECTS)) app.post(d.path, completion(core, d.endpoint, addressOf));
  // Claude Code's first call: whether the base URL answers at all.
  app.head('/', (res) => { res.cork(() => res.writeStatus('200 OK').end()); });
  mountContexts(app, core, addressOf, headLimit);

  app.get('/v1/models', (res, req) => {
    const rs = new ResponseState(res);
    const tooLarge = headTooLarge(req, headLimit);
    if (tooLarge !== null) return rs.fail(tooLarge);
    try {
      admitClient(gate, '/v1/models', credentialOf((h) => req.getHeader(h)), addressOf(res, req), limitHeadersOn(rs, wallClock));
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
    (opts.metricsText ?? (() => metrics.text()))().then((text) => rs.send(200, text, [['content-type', metrics.registry.contentType]]), (err) => rs.fail(err));
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
    const tooLarge = headTooLarge(req, headLimit);
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

  const listenSocket = await listenOn(app, opts.host, opts.port);
  let open = true;
  const close = (): void => {
    if (open) uWS.us_listen_socket_close(listenSocket);
    open = false;
  };
  if (opts.forwarded !== true) core.onDrain(close);
  return { port: uWS.us_socket_local_port(listenSocket), close };
}

/** `app` listening on host:port (uWS sets SO_REUSEPORT: threads listen on one port and the kernel spreads connections). */
export function listenOn (app: TemplatedApp, host: string, port: number): Promise<us_listen_socket> {
  return new Promise<us_listen_socket>((resolve, reject) => {
    app.listen(host, port, (token) => (token ? resolve(token) : reject(new Error(`cannot listen on ${host}:${port}`))));
  });
}
