// Assembles a running gateway: the shared region, the kv-events thread (the index's writer), the route pool,
// the session store, the policy, then the process core over them (core.ts: fleet, gate, contexts, metrics, the one
// pipeline) and its uWS door; `ear epp` adds its ext_proc door on the same core. Used by `ear serve`, the end-to-end tests and the e2e evaluation driver.
import { createRegion, podRowsCost, Region, scratchRoom, type PodRowsCost, type SharedRegion } from '../core/region.js';
import { APPROXIMATE_ASSUMED_TTL_MS, PRECISE_ASSUMED_TTL_MS } from '../core/defaults.js';
import { createPolicy } from '../core/policies/index.js';
import { startKvEventsThread, type KvBackendSpec, type KvEventsThread } from '../kvevents/kv-events-thread.js';
import type { Backend } from '../fleet/backends.js';
import { ConfigError, type GatewayConfig } from '../config/index.js';
import { registerKvEventMetrics, registerPodRowMetrics, registerPrefixWalkMetrics, registerRetentionMetrics, registerSessionStoreMetrics, registerTotal } from '../telemetry/metrics.js';
import { createRoutePool, type RoutePool } from '../features/route-pool.js';
import { startGateway, type Gateway, type GatewayDeps } from './server.js';
import type { ProcessCore } from './core.js';
import { TableRouting } from '../fleet/table-routing.js';
import { KvThreadChain } from './kv-thread-chain.js';
import { featureSource, type FeatureSource } from '../features/inline-features.js';
import { registerRoutePoolMetrics } from '../features/route-pool-metrics.js';
import { SharedSessions } from '../store/shared-sessions.js';
import { createSessionStore } from '../store/create.js';
import { parseSessionStoreSpec, type SessionStore, type StoreLogger } from '../store/session-store.js';
import { startProactiveMigration, type ProactiveLogger, type ProactiveMigration } from './proactive-migration.js';
import type { Tracing } from '../telemetry/tracing.js';
import { MAX_RESTARTS, routeThreadsOf, type HttpThreads } from './http-threads.js';
import { reportFault } from '../request/faults.js';

export interface Ear {
  /** The process core (core.ts): what every door shares, its one pipeline included. */
  core: ProcessCore;
  /** The uWS door on the core, listening. */
  gateway: Gateway;
  routing: TableRouting;
  /** A request's routing features (parse, render, tokenize, block keys), as the gateway computes them. */
  features: FeatureSource;
  kvEvents: KvEventsThread;
  /** The shared session state (`sessionStore: redis://…`); null with `memory`. */
  sessions: SharedSessions | null;
  /** The migration thread's main-thread side, with policy ear-proactive; null otherwise. */
  proactive: ProactiveMigration | null;
  /** Resolves once the kv-events thread follows the backends as they are now (tests, reload). */
  kvSynced (): Promise<void>;
  /** The pod rows (maxPods) and the shared memory they cost, for the start-up log. */
  podRows: PodRowsCost;
  close (): Promise<void>;
}

/** Assumed TTL for the backends as they are: the configured one, else by mode. */
export function assumedTtlMs (config: Readonly<GatewayConfig>, backends: readonly Backend[]): number {
  if (config.assumedTtlMs !== null) return config.assumedTtlMs;
  return backends.some((b) => !b.draining && b.config.kvEvents !== null) ? PRECISE_ASSUMED_TTL_MS : APPROXIMATE_ASSUMED_TTL_MS;
}

/**
 * The engines the kv-events thread follows: healthy, not draining, with a KV-event endpoint and a known model
 * (the first /v1/models entry: the served name requests use). A backend that leaves this list is purged; when
 * it comes back its stream is replayed from the engine's buffer.
 */
export function kvBackendSpecs (backends: readonly Backend[]): KvBackendSpec[] {
  const out: KvBackendSpec[] = [];
  for (const b of backends) {
    const model = b.models.values().next().value;
    if (b.config.kvEvents === null || b.draining || b.health !== 'healthy' || model === undefined) continue;
    out.push({ index: b.index, id: b.id, model, kvEvents: b.config.kvEvents, replay: b.config.replay, topic: b.config.kvTopic });
  }
  return out;
}

export interface EarOptions {
  /** Where the session store logs its up/down changes (once per change). */
  logger?: StoreLogger;
  /** How long start-up waits for a shared store before serving (ms; default 1000). Not reached: it serves on the local table. */
  storeWaitMs?: number;
  /** Where the migration thread's errors and failed transfers are logged (ear-proactive). */
  migrationLogger?: ProactiveLogger;
  /** Spans for requests and migrations (src/telemetry/startTracing); null or absent: off. */
  tracing?: Tracing | null;
  /** A condition /ready reports besides the gateway's own (active-passive: followers are not ready). */
  readiness?: GatewayDeps['readiness'];
  /** Where the data-plane threads' comings and goings are logged (httpThreads ≥ 2). */
  threadLogger?: NonNullable<GatewayDeps['threads']>['log'];
  /** The data-plane threads' module in place of http-thread.js (bench/owner-ceiling.ts's load generator). */
  threadEntry?: URL;
}

/**
 * Scratch areas of the data-plane threads (httpThreads ≥ 2): each claims one per thread of its own route pool (as
 * http-threads.ts deals them out: max(routeThreads, threads) in all) and one it splits between its key ring and its
 * inline hasher (http-thread.ts); a restarted thread claims new ones (areas are not given back), from a few spares.
 * At most (64 + 64 + 9) areas of 4 MiB, which fit the region's 1 GiB beside the default tables
 * (test/gateway/http-threads-region.test.ts).
 */
function dataPlaneScratch (config: Pick<GatewayConfig, 'httpThreads' | 'routeThreads'>): number {
  const n = config.httpThreads;
  if (n < 2) return 0;
  let areas = SCRATCH_SPARES;
  for (let i = 1; i <= n; i++) areas += 1 + routeThreadsOf(i, config.routeThreads, n);
  return areas;
}

/**
 * The main thread's route pool: `routeThreads` when it serves the inference routes itself (httpThreads 1); one when
 * data-plane threads do, each with a pool of its own, and the main thread's pipeline prefills only the contexts they
 * hand it (POST /v1/context).
 */
function mainRouteThreads (config: Pick<GatewayConfig, 'httpThreads' | 'routeThreads'>): number {
  return config.httpThreads >= 2 ? 1 : config.routeThreads;
}

/** The region's scratch areas for this configuration: the main thread's route pool's and 13 (below), and the data-plane threads'. */
function scratchAreas (config: Pick<GatewayConfig, 'httpThreads' | 'routeThreads'>): number {
  return mainRouteThreads(config) + 13 + dataPlaneScratch(config);
}

/**
 * `httpThreads: auto` lowered, where it must be, to the most data-plane threads whose scratch areas fit the region
 * beside the tables the configuration sizes (beside a prefix index above 1,572,864 keys, 49 with the default
 * routeThreads, 35 with 64): the threads were not asked for by number, the tables were. A number given in the file
 * or a flag is kept (and refused by sharedRegion if it does not fit). Returns the configuration itself when nothing
 * changes.
 */
export function fitHttpThreads (config: Readonly<GatewayConfig>): Readonly<GatewayConfig> {
  if (!config.httpThreadsAuto || config.httpThreads < 2) return config;
  // Kept for the tables' sizes: each SIGHUP reads the configuration again, and a room costs a region's address space.
  const key = `${config.prefixIndexKeys}/${config.maxSessions}/${config.maxPods}`;
  if (lastRoom?.key !== key) lastRoom = { key, room: scratchRoom({ prefixIndexKeys: config.prefixIndexKeys, sessions: config.maxSessions, pods: config.maxPods }) };
  const { room } = lastRoom;
  let n = config.httpThreads;
  while (n > 1 && scratchAreas({ httpThreads: n, routeThreads: config.routeThreads }) > room) n--;
  return n === config.httpThreads ? config : Object.freeze({ ...config, httpThreads: n });
}

let lastRoom: { key: string; room: number } | null = null;

/** Scratch areas for data-plane threads started again (http-threads.ts: at most MAX_RESTARTS each). */
const SCRATCH_SPARES = 3 * MAX_RESTARTS;

const CONSOLE_LOG: NonNullable<GatewayDeps['threads']>['log'] = {
  info: (o: unknown, msg?: string) => console.log(msg ?? '', o),
  warn: (o: unknown, msg?: string) => console.warn(msg ?? '', o),
  error: (o: unknown, msg?: string) => console.error(msg ?? '', o)
} as NonNullable<GatewayDeps['threads']>['log'];

/**
 * The shared tables for this configuration. They must fit the region (1 GiB, asm/layout.ts): what takes most is the
 * prefix index (128 bytes a slot, at most 3/4 full), then a 4 MiB scratch area per thread; a configuration that
 * does not fit is refused at start with the settings that size it.
 */
export function sharedRegion (config: Readonly<GatewayConfig>): SharedRegion {
  const scratchSlots = scratchAreas(config);
  try {
    return createRegion({ prefixIndexKeys: config.prefixIndexKeys, sessions: config.maxSessions, pods: config.maxPods, scratchSlots });
  } catch (err) {
    if (!(err instanceof RangeError) || !/host region/.test(err.message)) throw err;
    throw new ConfigError('prefixIndexKeys, maxSessions, maxPods, routeThreads, httpThreads', `${config.prefixIndexKeys} index keys, ` +
      `${config.maxSessions} sessions, ${config.maxPods} pod rows and ${scratchSlots} scratch areas of 4 MiB (for ${config.routeThreads} route and ` +
      `${config.httpThreads} data-plane threads) do not fit the shared region: ${err.message}`);
  }
}

export async function startEar (config: Readonly<GatewayConfig>, opts: EarOptions = {}): Promise<Ear> {
  const policy = createPolicy(config.policy, config.policyConfig);
  // Scratch areas: six for the main thread, three for the kv-events thread, one for the migration thread, one per
  // route worker, and spares so a restarted worker can claim one.
  const shared = sharedRegion(config);
  const region = new Region(shared);
  const podRows = podRowsCost(region);
  let kv: KvEventsThread | null = null;
  let pool: RoutePool | null = null;
  let store: SessionStore | null = null;
  let proactive: ProactiveMigration | null = null;
  try {
    const now = (): number => performance.timeOrigin + performance.now();
    const spec = parseSessionStoreSpec(config.sessionStore, 'sessionStore');
    // `memory` is the local session table itself: no store object, nothing on the request path.
    if (spec.kind !== 'memory') {
      store = createSessionStore(spec, { sessionTtlMs: config.sessionIdleMs, maxSessions: config.maxSessions, logger: opts.logger,
        redis: { commandTimeoutMs: config.sessionStoreTimeoutMs } });
      await store.whenUp(opts.storeWaitMs ?? 1000);
    }
    const initialTtl = config.assumedTtlMs ?? (config.backends.some((b) => b.kvEvents !== null) ? PRECISE_ASSUMED_TTL_MS : APPROXIMATE_ASSUMED_TTL_MS);
    const k = kv = startKvEventsThread(shared, { assumedTtlMs: initialTtl, blockSize: config.blockSize, maxMappedBlocks: config.kvMaxMappedBlocks, warmIndex: config.prefixIndexWarm });
    // The gateway (and its metrics) starts after the pool; no task runs before it does.
    let observeQueueWait = (_seconds: number): void => {};
    let observeRowFree = (_seconds: number): void => {};
    pool = createRoutePool(shared, {
      threads: mainRouteThreads(config), tokenizer: config.tokenizer, blockSize: config.blockSize,
      sessionsPerThread: config.sessionsPerRouteThread, sessionIdleMs: config.sessionIdleMs, remote: config.remoteTokenizer,
      onQueueWait: (seconds) => observeQueueWait(seconds),
      onThreadError: (err) => reportFault(err, 'route-thread')
    });
    const p = pool;
    // Tell the thread only what changed; calls stay in order on one chain, purges of released rows batched.
    const chain = new KvThreadChain(k, podRows.rows);
    let list: readonly Backend[] = [];
    let sent = '';
    let threads: HttpThreads | null = null;
    const sync = (): void => {
      threads?.backends();
      proactive?.backends(list);
      const specs = kvBackendSpecs(list);
      const ttl = assumedTtlMs(config, list);
      const key = JSON.stringify([specs, ttl]);
      if (key === sent) return;
      sent = key;
      chain.setBackends(specs, ttl);
    };
    let routing!: TableRouting;
    const features = featureSource(region, config, p);
    const sessions = store === null ? null : new SharedSessions({ store, routing: () => routing, sessionTtlMs: config.sessionIdleMs, now });
    // The route threads load (tokenizer, warm-up) meanwhile; the gateway listens once they have.
    await p.ready();
    const gateway = await startGateway({
      config,
      state: (backends) => {
        list = backends;
        routing = new TableRouting(region, policy, {
          blockSize: config.blockSize, sessionTtlMs: config.sessionIdleMs, users: config.userWindow, retention: config.retention, onBackendChanged: sync,
          scheduler: config.scheduler,
          admission: { levels: config.schedulerLevels, quantumMs: config.schedulerQuantumMs, beta: config.schedulerBeta, maxQueued: config.maxQueued, queueTimeoutMs: config.queueTimeoutMs },
          capacity: { prefillBudgetTokens: config.prefillBudgetTokens, kvHighWatermark: config.kvHighWatermark, learnLimit: config.learnConcurrencyLimit },
          // On the same chain as the list changes, with the other rows released meanwhile: one sweep for all.
          purgeRow: (row) => chain.purge(row),
          // Its row's index entries are the old process's cache: the thread drops them and replays the new one's.
          onEngineRestarted: (b) => chain.engineRestarted(b.index, b.id),
          onRowFreed: (_row, seconds) => observeRowFree(seconds)
        });
        return routing;
      },
      features,
      now,
      sessions,
      // Contexts are recorded in the shared store too, so every replica can GET and DELETE them.
      sessionStore: store ?? undefined,
      onSessionCompleted: (id, model, path, body) => proactive?.completed(id, model, path, body),
      tracing: opts.tracing ?? null,
      readiness: opts.readiness,
      threads: { shared, log: opts.threadLogger ?? CONSOLE_LOG, entry: opts.threadEntry }
    });
    threads = gateway.threads;
    // ear-proactive's idle-session moves run on their own thread; the request path only hands it bodies.
    if (config.policy === 'ear-proactive') {
      proactive = startProactiveMigration({ config, shared, routing: () => routing, sessions, registry: gateway.metrics.registry, now, log: opts.migrationLogger, tracing: opts.tracing ?? null });
    }
    registerKvEventMetrics(gateway.metrics.registry, () => k.stats());
    registerTotal(gateway.metrics.registry, 'ear_retained_prefix_evictions_total',
      'Retained prefixes (a session in its tool gap, or a client\'s retention hint) that their engine evicted while retained, as its KV events told (precise mode).',
      () => routing.host.retention.stats().evictions);
    registerRetentionMetrics(gateway.metrics.registry, () => routing.host.retention.stats());
    registerPrefixWalkMetrics(gateway.metrics.registry, () => routing.host.walkStats());
    registerRoutePoolMetrics(gateway.metrics.registry, () => p.stats());
    if (sessions !== null) registerSessionStoreMetrics(gateway.metrics.registry, sessions);
    observeRowFree = registerPodRowMetrics(gateway.metrics.registry, {
      rows: () => ({ capacity: routing.host.rows.capacity, used: routing.host.rows.used, releasing: routing.host.rows.releasing }),
      purgesWaiting: () => chain.pending,
      waits: () => gateway.fleet.rowWaits
    });
    const queueWait = gateway.metrics.queueWaitSeconds;
    observeQueueWait = (seconds) => queueWait.observe(seconds);
    sync();
    return {
      core: gateway.core,
      gateway,
      routing,
      features,
      kvEvents: k,
      sessions,
      proactive,
      kvSynced: () => chain.idle(),
      podRows,
      async close () {
        // First, so no move is applied to tables the gateway is tearing down.
        await proactive?.close();
        await gateway.close();
        await sessions?.close();
        await p.close();
        await chain.idle();
        await k.stop();
      }
    };
  } catch (err) {
    await proactive?.close();
    await store?.close();
    await pool?.close();
    await kv?.stop();
    throw err;
  }
}
