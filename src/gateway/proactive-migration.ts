// The main thread's side of ear-proactive's migration thread: starts it over the shared region, tells it the
// backends and, on each completed request of a session, the forwarded body; applies the moves it reports
// (proactive-rebind.ts), one after another, counting each moved or dropped. Nothing here throws into the
// request path: errors are counted and logged.
import type { Registry } from 'prom-client';
import type { SharedRegion } from '../core/region.js';
import { startMigrationThread, type MigrationThread } from '../migration/migration-thread.js';
import type { MigrationBackend, MigrationThreadStats } from '../migration/thread-protocol.js';
import type { Backend } from '../fleet/backends.js';
import type { GatewayConfig } from '../config/index.js';
import { kvTransferMetrics } from '../telemetry/kv-transfer-metrics.js';
import { registerProactiveMetrics } from './proactive-metrics.js';
import { applyIdleMove } from './proactive-rebind.js';
import type { SharedSessions } from '../store/shared-sessions.js';
import type { TableRouting } from '../fleet/table-routing.js';
import type { Tracing } from '../telemetry/tracing.js';

export interface ProactiveLogger {
  warn (obj: object, msg: string): void;
  info (obj: object, msg: string): void;
}

export interface ProactiveMigrationOptions {
  config: Readonly<GatewayConfig>;
  shared: SharedRegion;
  routing: () => TableRouting;
  /** The shared session store, or null with `memory`. */
  sessions: SharedSessions | null;
  registry: Registry;
  /** The clock the session table is stamped with (ms since the epoch). */
  now: () => number;
  log?: ProactiveLogger;
  /** A span per transfer (tracing on); null: off. */
  tracing?: Tracing | null;
}

/** Moves the main thread applied (moved) or refused (dropped), and its own errors. */
export interface ProactiveOutcomes {
  moved: number;
  dropped: number;
  errors: number;
}

export interface ProactiveMigration {
  /** The backend list changed (or was first filled): the thread follows the ones that serve. */
  backends (list: readonly Backend[]): void;
  /** A request of `sessionId` for `model` completed; `body` is what was forwarded. */
  completed (sessionId: string, model: string, path: string, body: Uint8Array): void;
  outcomes (): ProactiveOutcomes;
  stats (): Promise<MigrationThreadStats>;
  /** Resolves once every move reported so far is applied (tests). */
  applied (): Promise<void>;
  close (): Promise<void>;
}

/** The backends the thread may move sessions between: those not leaving (the pod table says which are ready). */
export function migrationBackends (list: readonly Backend[]): MigrationBackend[] {
  return list.filter((b) => !b.gone && !b.draining).map((b) => ({ index: b.index, id: b.id, url: b.config.url, ...(b.config.apiKey ? { apiKey: b.config.apiKey } : {}),
    ...(b.config.priority ? { priority: b.config.priority } : {}), models: [...b.models].sort() }));
}

export function startProactiveMigration (o: ProactiveMigrationOptions): ProactiveMigration {
  const { config } = o;
  const out: ProactiveOutcomes = { moved: 0, dropped: 0, errors: 0 };
  const transfers = kvTransferMetrics(o.registry);
  let pending: Promise<void> = Promise.resolve();
  /** Backend ids by pod row, as last told to the thread (for spans). */
  const ids = new Map<number, string>();
  const error = (message: string): void => {
    out.errors++;
    o.log?.warn({ err: message }, 'proactive migration error');
  };

  const thread: MigrationThread = startMigrationThread({
    policyConfig: config.policyConfig,
    intervalMs: config.proactiveIntervalMs,
    bodyCacheBytes: config.proactiveBodyCacheBytes,
    transfers: { kvCostProfile: config.kvCostProfile, kvConnectors: config.kvConnectors, kvConnector: config.kvConnector },
    upstream: { connections: 8, headersTimeoutMs: config.upstreamHeadersTimeoutMs, bodyTimeoutMs: config.upstreamBodyTimeoutMs }
  }, o.shared, {
    onMoved (m) {
      // In order: a store CAS in flight does not let a later move of the same session overtake it.
      pending = pending.then(() => applyIdleMove(o.routing().host, o.sessions, m, o.now)).then((moved) => {
        if (moved) out.moved++;
        else out.dropped++;
      }, (err: unknown) => {
        out.dropped++;
        error(`applying a move of ${m.sessionId}: ${(err as Error).message}`);
      });
    },
    onTransfer (m) {
      transfers.total.inc({ kind: 'proactive', mode: m.mode, outcome: m.ok ? 'ok' : 'failed' });
      transfers.sourceSeconds.observe({ mode: m.mode }, m.sourceSeconds);
      if (m.ok) transfers.bytes.inc({ mode: m.mode }, m.bytes);
      else o.log?.info({ mode: m.mode, failure: m.failure }, 'proactive transfer failed; the session stays on its source');
      o.tracing?.proactiveTransfer({
        mode: m.mode, ok: m.ok, bytes: m.ok ? m.bytes : 0, tokens: m.tokens, failure: m.failure, seconds: m.sourceSeconds, endTime: o.now(),
        source: ids.get(m.from) ?? `row-${m.from}`, target: ids.get(m.to) ?? `row-${m.to}`
      });
    },
    onError: error
  });

  registerProactiveMetrics(o.registry, { outcomes: () => out, stats: () => thread.stats() });
  let sent = '';
  return {
    backends (list) {
      const specs = migrationBackends(list);
      const key = JSON.stringify(specs);
      if (key === sent) return;
      sent = key;
      for (const s of specs) ids.set(s.index, s.id);
      thread.setBackends(specs);
    },
    completed (sessionId, model, path, body) {
      try {
        thread.body(o.routing().host.sessionKey(sessionId), { sessionId, model, path, body });
      } catch (err) {
        error(`recording the body of ${sessionId}: ${(err as Error).message}`);
      }
    },
    outcomes: () => ({ ...out }),
    stats: () => thread.stats(),
    applied: () => pending,
    async close () {
      await thread.stop();
      await pending;
    }
  };
}
