// Entry of a data-plane thread (httpThreads ≥ 2; docs/architecture.md#n-data-plane-threads), started by
// http-threads.ts. It listens on the gateway's port beside the other threads and runs the inference routes through
// the one pipeline implementation (src/request/) with its own route pool, upstream pools and metrics; the
// decisions and the bookkeeping are the main thread's (owner-client.ts). The routes it does not serve itself
// (contexts, models, metrics, readiness, admin) it hands to the main thread's loopback listener as they came.
// Kept in gateway/ rather than workers/: it runs the uWS door, a transport, which workers/ may not import.
import { parentPort, workerData } from 'node:worker_threads';
import uWS from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, us_listen_socket } from 'uWebSockets.js';
import { Pool } from 'undici';
import pino from 'pino';
import { Counter } from 'prom-client';
import { Region } from '../core/region.js';
import { RESPONSE_ORIGIN_TTL_S } from '../core/defaults.js';
import { createRoutePool } from '../features/route-pool.js';
import { featureSource, INLINE_HASH_BYTES, THREAD_INLINE_FEATURES_MAX_BYTES } from '../features/inline-features.js';
import { registerRoutePoolMetrics } from '../features/route-pool-metrics.js';
import { DIALECTS } from '../dialects/dialect.js';
import { EarError } from '../errors/errors.js';
import { GatewayMetrics, registerSessionStoreMetrics } from '../telemetry/metrics.js';
import { subscribeRequestMetrics } from '../telemetry/request-metrics.js';
import { subscribeKvTransferMetrics } from '../telemetry/kv-transfer-metrics.js';
import { startTracing } from '../telemetry/tracing.js';
import { subscribeRequestSpans } from '../telemetry/request-spans.js';
import { registerUpstreamSocketMetrics } from '../upstream/upstream-metrics.js';
import { installProcessFaultHandlers, registerFaultMetrics, reportFault, setFaultSink } from '../request/faults.js';
import { Pipeline } from '../request/pipeline.js';
import { ResponseOrigins } from '../request/response-origin.js';
import { KvTransferStep } from '../request/kv-transfer-step.js';
import { kvTransfersFor } from '../migration/transfers-for.js';
import { remoteAddressOf, type AdmittedClient, type ClientLimits, type GatedRoute } from '../request/client-gate.js';
import type { Backend } from '../fleet/backends.js';
import { readBody, registerClientIoMetrics, ResponseState } from './uws-io.js';
import { completion, connectionAddress, FORWARDED_ADDRESS, listenOn, type DoorCore } from './server.js';
import { OwnerClient } from './owner-client.js';
import { OwnerSessions } from './owner-sessions.js';
import { parseSessionStoreSpec } from '../store/session-store.js';
import { createSessionStore } from '../store/create.js';
import { SharedSessions } from '../store/shared-sessions.js';
import { KeyRingWriter } from './key-ring.js';
import { headTooLarge } from './head-size.js';
import type { HttpThreadData, ToThread, ToThreadItem } from './owner-protocol.js';

const data = workerData as HttpThreadData;
const port = parentPort!;
const { config } = data;
const log = pino({ level: process.env.EAR_LOG_LEVEL ?? 'info' }).child({ component: 'http-thread', thread: data.thread });
setFaultSink((err, where, requestId) => log.error({ err, where, requestId }, `unexpected fault (${where}); the thread serves on`));
installProcessFaultHandlers();

const now = (): number => performance.timeOrigin + performance.now();
const region = new Region(data.shared);
// One scratch area: the thread's key ring (asm/key-ring.ts) in most of it, and the inline hasher's tokens and keys
// (bodies up to THREAD_INLINE_FEATURES_MAX_BYTES) in its last INLINE_HASH_BYTES. One area a thread, not two, is what
// lets 64 threads fit the region (ear.ts, dataPlaneScratch). Without one (every area claimed: restarts past the
// spares) its block keys travel in its messages, and a `character` thread's inline hasher claims on its own (and
// the thread fails to start, logged, if that finds none either).
let keyRing: KeyRingWriter | null = null;
let inlineArea: { ptr: number; bytes: number } | undefined;
try {
  const area = region.claimScratch();
  inlineArea = { ptr: area.ptr + area.bytes - INLINE_HASH_BYTES, bytes: INLINE_HASH_BYTES };
  keyRing = new KeyRingWriter(region, area.ptr, area.bytes - INLINE_HASH_BYTES);
} catch (err) {
  log.warn({ err }, 'no scratch area for a key ring: block keys go to the main thread in messages');
}
const metrics = new GatewayMetrics();
// A departed backend's series leave this thread's registry as they leave the owner's: the scrape sums every thread's.
const owner = new OwnerClient(port, config, region, keyRing, (id) => {
  metrics.removeBackend(id).catch((err: unknown) => log.warn({ err, backend: id }, 'could not drop a departed backend\'s series'));
});
registerClientIoMetrics(metrics.registry);
registerUpstreamSocketMetrics(metrics.registry);
registerFaultMetrics(metrics.registry);
const taken = new Counter({ name: 'ear_http_thread_requests_total', help: 'Requests to the inference routes each data-plane thread took, refused at its door or not (httpThreads ≥ 2).', labelNames: ['thread'], registers: [metrics.registry] }).labels(String(data.thread));
let observeQueueWait = (_seconds: number): void => {};
const pool = createRoutePool(data.shared, {
  threads: data.routeThreads, tokenizer: config.tokenizer, blockSize: config.blockSize,
  sessionsPerThread: config.sessionsPerRouteThread, sessionIdleMs: config.sessionIdleMs, remote: config.remoteTokenizer,
  onQueueWait: (seconds) => observeQueueWait(seconds), frozenTokenizer: data.frozenTokenizer,
  onThreadError: (err) => reportFault(err, 'route-thread')
});
registerRoutePoolMetrics(metrics.registry, () => pool.stats());
observeQueueWait = (seconds) => metrics.queueWaitSeconds.observe(seconds);

// A shared session store (redis): the thread's own client, so its turns' round trips load no other thread; the
// session table they adopt into is the main thread's (owner-sessions.ts).
// Its ups and downs are logged at debug: the main thread's client logs the store's once, not once per thread (each
// client counts its own in ear_session_store_state_changes_total).
const spec = parseSessionStoreSpec(config.sessionStore, 'sessionStore');
const storeLog = log.child({ component: 'session-store' });
const store = spec.kind === 'memory'
  ? null
  : createSessionStore(spec, {
    sessionTtlMs: config.sessionIdleMs, maxSessions: config.maxSessions, redis: { commandTimeoutMs: config.sessionStoreTimeoutMs },
    logger: { warn: (o, msg) => storeLog.debug(o, msg), info: (o, msg) => storeLog.debug(o, msg) }
  });
if (store !== null && data.storeWaitMs > 0) await store.whenUp(data.storeWaitMs);
const sessions = store === null ? null : new SharedSessions({ store, now, local: new OwnerSessions(owner) });
if (sessions !== null) registerSessionStoreMetrics(metrics.registry, sessions);

// A request holds its backend on this thread's copy; the owner holds the real one for each of its placements.
const hold = (b: Backend): void => { b.inFlight++; };
const release = (b: Backend): void => { b.inFlight--; };
const pipeline = new Pipeline({
  policy: config.policy, maxAttempts: config.maxAttempts, maxResumes: config.maxResumes, maxResumeBytes: config.maxResumeBytes,
  maxRetentionTtlMs: config.maxRetentionTtlMs, state: owner, features: featureSource(region, config, pool, THREAD_INLINE_FEATURES_MAX_BYTES, inlineArea), backends: owner.backends, sessions,
  kvTransfers: new KvTransferStep(kvTransfersFor(config), owner, now, release), now, hold, release,
  onSessionCompleted: config.policy === 'ear-proactive'
    ? (sessionId, model, path, body) => owner.post({ t: 'sessionCompleted', sessionId, model, path, body: new Uint8Array(body) })
    : undefined,
  responses: new ResponseOrigins({ store: owner.origins, ttlSeconds: RESPONSE_ORIGIN_TTL_S })
});
subscribeRequestMetrics(pipeline, metrics);
subscribeKvTransferMetrics(pipeline, metrics.registry, () => null);
// OTEL_* as the process has them (a worker starts with a copy of its environment): each thread exports the spans of
// the requests it serves through an SDK of its own; off, the SDK is not even loaded, as on the main thread.
const tracing = await startTracing(process.env, log.child({ component: 'tracing' }));
if (tracing !== null) subscribeRequestSpans(pipeline, tracing);

let draining = false;
let inFlight = 0;
let listenSocket: us_listen_socket | null = null;

const door: DoorCore = {
  config, now, clock: Date.now, pipeline,
  get draining () { return draining; },
  refused: (route, status) => { metrics.requests.labels(route, String(status), '').inc(); },
  track: (p) => {
    inFlight++;
    void p.finally(() => { if (--inFlight === 0 && draining) owner.post({ t: 'drained' }); });
  },
  admitClient: (route: GatedRoute, auth: string, address: () => string, limited: (l: ClientLimits) => void): AdmittedClient | Promise<AdmittedClient> =>
    owner.admitClient(route, auth, address, limited),
  taken: () => taken.inc()
};

const app = uWS.App();
for (const d of Object.values(DIALECTS)) app.post(d.path, completion(door, d.endpoint, connectionAddress));
app.head('/', (res) => { res.cork(() => res.writeStatus('200 OK').end()); });
app.get('/health', (res) => { res.cork(() => res.writeStatus('200 OK').end()); });
app.any('/*', handOff);

/** Headers not carried either way: the connection's own, and the length (the body is sent whole). */
const HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length', 'host', 'date', 'upgrade', FORWARDED_ADDRESS]);

/** Connections to the main thread's loopback listener, for the routes handed to it. */
const owned = new Pool(`http://127.0.0.1:${data.ownerPort}`, { connections: 16 });

const NOT_IN_A_VALUE = /[^\t\x20-\x7e\x80-\xff]/;

/** A route this thread does not serve: sent as it came to the owner's loopback listener, and its answer back. */
function handOff (res: HttpResponse, req: HttpRequest): void {
  const method = req.getMethod().toUpperCase();
  const query = req.getQuery();
  const url = query ? `${req.getUrl()}?${query}` : req.getUrl();
  const headers: Record<string, string> = {};
  let bad = null as string | null;
  req.forEach((k, v) => {
    if (HOP.has(k)) return;
    if (NOT_IN_A_VALUE.test(v)) bad ??= k;
    headers[k] = v;
  });
  headers[FORWARDED_ADDRESS] = remoteAddressOf(res);
  const declaredLength = req.getHeader('content-length');
  const tooLarge = headTooLarge(req, config.maxHeaderBytes);
  const rs = new ResponseState(res);
  if (tooLarge !== null) return rs.fail(tooLarge);
  // A value the HTTP client will not send on (RFC 9110 §5.5: no controls but HTAB): the client's mistake.
  if (bad !== null) return rs.fail(new EarError('EAR_ERR_BAD_REQUEST', `the ${bad.slice(0, 64)} header holds a character HTTP does not allow in a value`));
  const send = (body: Buffer | null): void => {
    // The path goes as it came (a Pool takes it verbatim; a URL would resolve `/v1/../admin` into another route).
    door.track(owned.request({ path: url, method: method as 'GET', headers, body }).then(async (r) => {
      const out: Array<[string, string]> = [];
      for (const [k, v] of Object.entries(r.headers)) {
        if (HOP.has(k) || v === undefined) continue;
        for (const x of Array.isArray(v) ? v : [v]) out.push([k, x]);
      }
      const body = Buffer.from(await r.body.arrayBuffer());
      rs.send(r.statusCode, method === 'HEAD' ? '' : body, out);
    }).catch((err: unknown) => {
      const code = (err as { code?: unknown }).code;
      // The main thread's parser closed it unanswered (what it does to such a request from a client): so does this one.
      if ((code === 'UND_ERR_SOCKET' || code === 'ECONNRESET') && rs.live && !rs.headersSent) {
        rs.ended = true;
        res.close();
        return;
      }
      rs.fail(code === 'UND_ERR_INVALID_ARG'
        ? new EarError('EAR_ERR_BAD_REQUEST', `the request cannot be handed on (${(err as Error).message})`)
        : new EarError('EAR_ERR_INTERNAL', `the main thread did not answer (${(err as Error).message})`));
    }));
  };
  if (method === 'GET' || method === 'HEAD' || (declaredLength === '' && req.getHeader('transfer-encoding') === '')) send(null);
  else readBody(rs, config, send, declaredLength);
}

// The owner's messages come in batches (threads/batched-port.ts), each in the order it sent them.
port.on('message', (batch: ToThreadItem[]) => {
  owner.receiveBatch(batch, fromOwner);
});

/** The owner's messages that are not the owner client's business. */
function fromOwner (m: ToThread): void {
  switch (m.t) {
    case 'metrics':
      metrics.registry.getMetricsAsJSON().then((json) => owner.post({ t: 'metrics', id: m.id, json }), (err) => {
        reportFault(err, 'http-thread');
        owner.post({ t: 'metrics', id: m.id, json: [] });
      });
      return;
    case 'drain':
      // Stop accepting (the other threads' listeners take the port's new connections, until they close theirs too);
      // requests on open connections are refused (503) while those in flight finish.
      draining = true;
      if (listenSocket !== null) uWS.us_listen_socket_close(listenSocket);
      listenSocket = null;
      if (inFlight === 0) owner.post({ t: 'drained' });
      return;
    case 'stop':
      // After this turn: the answers that messages before it in the same batch settled (a 503 for what still
      // waited at the drain deadline) are written in its microtasks, before the connections close.
      setImmediate(stop);
  }
}

function stop (): void {
  if (listenSocket !== null) uWS.us_listen_socket_close(listenSocket);
  listenSocket = null;
  // Clients' keep-alive connections too: a thread that ends with a socket open aborts the process
  // (uv_loop_close with open handles). The pinned build has TemplatedApp.close(), though its types omit it.
  (app as unknown as { close (): void }).close();
  void (async () => {
    await Promise.all(owner.backends.map((b) => b.pool.close().catch(() => {})));
    await owned.close().catch(() => {});
    await pool.close();
    // Its store's replies still on their way (a turn's service) are read and adopted, then the connection ends.
    await sessions?.close().catch(() => {});
    // Spans still buffered go out before the thread ends (the main thread flushes its own on drain).
    await tracing?.shutdown().catch(() => {});
    owner.flush();
    process.exit(0);
  })();
}

// Its route threads are loaded before it takes a connection (they are the first request's features). If they
// cannot load, the thread ends: its uncaughtException handler would keep it alive, never listening, and the owner
// waits for it to listen or exit (http-threads.ts).
try {
  await pool.ready();
} catch (err) {
  log.error({ err }, 'the route threads cannot load: this data-plane thread ends');
  process.exit(1);
}
listenOn(app, config.host, data.port).then((token) => {
  listenSocket = token;
  owner.post({ t: 'listening', port: uWS.us_socket_local_port(token), keyRing: keyRing?.base ?? null });
}, (err: unknown) => {
  log.error({ err }, 'cannot listen');
  process.exit(1);
});
