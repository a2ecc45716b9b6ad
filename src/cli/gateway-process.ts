// What `ear serve` and `ear epp` both run around the gateway: pod discovery (before the gateway, so it starts with
// the pods already there), the leader lease (active-passive: /ready and gRPC readiness follow it), the gateway
// itself, the process's metrics and SIGHUP. Each command adds only its own transport.
import { collectDefaultMetrics } from 'prom-client';
import type pino from 'pino';
import type { GatewayConfig } from '../config/index.js';
import { startEar, type Ear } from '../gateway/ear.js';
import { startDiscovery } from '../discovery/start.js';
import { startActivePassive, type ActivePassive } from '../ha/active-passive.js';
import { registerHaMetrics } from '../ha/ha-metrics.js';
import { KubeTargetError } from '../kube/kube-target.js';
import { startTracing, type Tracing } from '../telemetry/tracing.js';
import { installProcessFaultHandlers, setFaultSink } from '../request/faults.js';

/** SIGTERM and SIGINT, heard from before start-up (stopSignals). */
export interface StopSignals {
  /** Resolves at the first of them. */
  stopped: Promise<void>;
  /** Start-up is over: a signal from now on is not one "while starting". */
  started (): void;
  /** Start-up failed: the default actions again. */
  unhook (): void;
}

/**
 * Hears SIGTERM and SIGINT from before the gateway starts: its doors (and data-plane threads) serve as each listens,
 * before start-up ends, and a signal then would kill their requests; instead the process drains once started.
 * A second signal of the same kind still kills it (the handlers are `once`).
 */
export function stopSignals (log: pino.Logger): StopSignals {
  let starting = true;
  let stop!: () => void;
  const stopped = new Promise<void>((resolve) => {
    stop = () => {
      if (starting) log.info('stop asked for while starting: the gateway drains once it has started');
      resolve();
    };
  });
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return {
    stopped,
    started: () => { starting = false; },
    unhook: () => { process.off('SIGINT', stop); process.off('SIGTERM', stop); }
  };
}

/** Longest wait for the last spans' export at shutdown: a collector that is down must not hold the exit. */
const TRACE_FLUSH_TIMEOUT_MS = 5000;

export interface GatewayProcess {
  ear: Ear;
  /** The config the gateway started with (discovery's pods as its backends). */
  config: Readonly<GatewayConfig>;
  /** Releases the lease (a follower takes over at once) and stops discovery; the gateway goes on serving. */
  stepDown (): Promise<void>;
  /** Spans (OTEL_*), as the gateway was given them: null when tracing is off. */
  tracing: Tracing | null;
  /** stepDown, and the gateway drains and closes meanwhile; then the last spans are flushed. */
  close (): Promise<void>;
}

/**
 * Starts discovery, the lease and the gateway; installs SIGHUP (`reread` gives the config again; with discovery
 * the backends are the pods', so nothing is reloaded). Returns an exit code, the reason printed, when it cannot
 * start for a reason the operator must fix (no kubeconfig, no API server for the lease).
 */
export async function startGatewayProcess (config: Readonly<GatewayConfig>, log: pino.Logger, command: string,
  reread: () => Readonly<GatewayConfig>): Promise<GatewayProcess | number> {
  // A throw nobody expected is logged (with its request's id where known) and the process serves on: exiting
  // would end every client's requests for one request's fault (src/request/faults.ts, docs/errors.md "Faults").
  const faults = log.child({ component: 'faults' });
  setFaultSink((err, where, requestId) => faults.error({ err, where, requestId }, `unexpected fault (${where}); the process serves on`));
  installProcessFaultHandlers();
  const discovered = await startDiscovery(config, log, command);
  if (discovered === 'failed') return 2;
  if (discovered !== null) config = discovered.config;
  let ha: ActivePassive | null = null;
  let ear: Ear;
  let tracing: Tracing | null = null;
  try {
    // OTEL_* (off unless configured: then not even loaded).
    tracing = await startTracing(process.env, log.child({ component: 'tracing' }));
    // Contend for the lease while the gateway starts: /ready says not ready until this replica leads.
    if (config.ha.mode === 'active-passive') ha = await startActivePassive(config, log.child({ component: 'ha' }));
    ear = await startEar(config, { logger: log.child({ component: 'session-store' }), migrationLogger: log.child({ component: 'migration' }), threadLogger: log.child({ component: 'http-threads' }), readiness: ha?.readiness, tracing });
  } catch (err) {
    await tracing?.shutdown().catch(() => {});
    await ha?.close();
    await discovered?.close();
    if (err instanceof KubeTargetError) {
      console.error(`${command}: ha: ${err.message}`);
      return 2;
    }
    throw err;
  }
  const rows = ear.podRows;
  const mib = (n: number): string => (n / 2 ** 20).toFixed(n < 2 ** 20 ? 2 : 1);
  log.info({ maxPods: rows.rows, podRowsBytes: rows.bytes, sharedRegionBytes: rows.regionBytes },
    `pod rows: ${rows.rows} (maxPods), ${mib(rows.bytes)} MiB of the shared tables (pod, load, prefix-index rows); shared region ${mib(rows.regionBytes)} MiB`);
  if (ha !== null) registerHaMetrics(ear.gateway.metrics.registry, ha.elector);
  // The process's own series (RSS, heap, GC, event-loop lag) on /metrics: registered once per process, here rather
  // than per gateway (test suites start many gateways in one process, and each call adds GC and event-loop monitors).
  collectDefaultMetrics({ register: ear.gateway.metrics.registry });
  discovered?.attach(ear.gateway);
  // Backends that find every pod row taken wait in the fleet for one: said once per episode, counted always.
  ear.gateway.fleet.onRowWait((s, first) => log.warn({ maxPods: config.maxPods, waiting: s.waiting, first: first.id },
    'every pod row is in use (old backends still draining): new backends wait for a row and join as rows come free (ear_pod_rows_waiting)'));
  // Before the line that says we listen: until a handler is installed, SIGHUP kills the process.
  process.on('SIGHUP', () => {
    let next: Readonly<GatewayConfig>;
    try {
      next = reread();
    } catch (err) {
      log.error({ err: (err as Error).message }, 'reload refused: the configuration is invalid; keeping the current one');
      return;
    }
    // Keys, rate limits and the admin token always; the backends unless discovery gives them. Other settings
    // need a restart.
    if (next.maxPods !== config.maxPods) log.warn({ maxPods: config.maxPods, asked: next.maxPods }, 'maxPods takes a restart (the shared tables are laid out at start): keeping the current pod rows');
    ear.gateway.reconfigure(next);
    log.info({ apiKeys: next.apiKeys.length, rateLimits: next.rateLimits.default !== null || next.rateLimits.perIp !== null || Object.keys(next.rateLimits.keys).length > 0 }, 'credentials and rate limits reloaded');
    if (discovered !== null) return;
    ear.gateway.reload(next).then(() => log.info({ backends: next.backends.map((b) => b.id) }, 'backends reloaded'), (err) => log.error({ err }, 'reload failed'));
  });
  let stepped: Promise<void> | null = null;
  const stepDown = (): Promise<void> => (stepped ??= Promise.all([ha?.close(), discovered?.close()]).then(() => {}));
  return {
    ear,
    config,
    tracing,
    stepDown,
    async close () {
      await Promise.all([stepDown(), ear.close()]);
      // The spans of the requests that just drained, exported before the exit (bounded: a collector may be down).
      if (tracing !== null) await flushTraces(tracing, log);
    }
  };
}

async function flushTraces (tracing: Tracing, log: pino.Logger): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timeout'>((resolve) => { timer = setTimeout(() => resolve('timeout'), TRACE_FLUSH_TIMEOUT_MS); });
  try {
    const r = await Promise.race([tracing.shutdown().then(() => 'flushed' as const), timeout]);
    if (r === 'timeout') log.warn({ timeoutMs: TRACE_FLUSH_TIMEOUT_MS }, 'traces not flushed in time; dropped');
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'flushing traces failed');
  } finally {
    clearTimeout(timer);
  }
}
