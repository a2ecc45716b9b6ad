// The gateway's adapter over the routing host (src/core/routing-host.ts): backends are pods (a backend's index
// is its pod row), its request path's bookkeeping calls go to the host unchanged, and health, reloads and
// engine scrapes become pod changes and engine reports. Nothing here decides anything. Main thread only.
import { RoutingHost, type MigrationStats, type Placement as HostPlacement, type RoutingHostOptions } from '../core/routing-host.js';
import { type AdmissionStats, type DropReason, type Queued } from '../core/admission-control.js';
import type { PodState } from '../core/pod-table.js';
import type { AdmissionRank } from '../core/engine-priority.js';
import type { Policy } from '../core/policy.js';
import type { Region } from '../core/region.js';
import type { UserUsageOptions } from '../core/user-usage.js';
import type { Backend } from './backends.js';
import type { EngineLoad } from './engine-metrics.js';
import type { GatewayWaiter, Placement, Retain, RouteHook, RoutingInput, RoutingState } from './routing-port.js';
import type { Usage } from '../upstream/stream-observer.js';

/** A host placement with its backends (a class: an object literal with a getter is built slowly, per request). */
class TablePlacement implements Placement {
  constructor (readonly host: HostPlacement, readonly backend: Backend, readonly transferFrom: Backend | null) {}
  get reason (): string { return this.host.reason; }
  get expectedPrefill (): number { return this.host.expectedPrefill; }
  get matchedBlocks (): number { return this.host.matchedBlocks; }
  get decidedAt (): number { return this.host.decidedAt; }
  get dispatchedAt (): number | undefined { return this.host.dispatchedAt; }
  get migrating (): boolean { return this.host.migrateFrom !== null; }
  get rank (): AdmissionRank { return this.host.rank; }
}

export interface TableRoutingOptions {
  blockSize: number;
  sessionTtlMs: number;
  /** Session expiry: slots examined per routed request, so idle sessions go without a sweep. */
  sessionExpiryBudget?: number;
  /** A uniform draw in [0, 1) for policies that randomise (default Math.random; tests pass a seeded one). */
  random?: () => number;
  /** The per-user token window (config userWindow; user-usage.ts defaults). */
  users?: UserUsageOptions;
  /** Called after every backendChanged (health probe, reload), e.g. to tell the kv-events thread which engines to follow. */
  onBackendChanged?: (b: Backend) => void;
  /**
   * Has the prefix index's writer purge a released row (the kv-events thread: stop following the backend's
   * events, drain the ring, remove every entry of the row). Without it the row is purged through the ring
   * (a forgetPod op), which the writer applies in order with the ops before it.
   */
  purgeRow?: (row: number) => Promise<unknown>;
  /** A backend's engine restarted (a new /metrics start time): e.g. have the prefix index's writer drop its row's entries. */
  onEngineRestarted?: (b: Backend) => void;
  /** Called once a released row is free again, with the seconds since its release began (a metric). */
  onRowFreed?: (row: number, seconds: number) => void;
  /** The admission scheduler and its knobs (default off). */
  scheduler?: RoutingHostOptions['scheduler'];
  admission?: RoutingHostOptions['admission'];
  capacity?: RoutingHostOptions['capacity'];
  /** Retention of tool-gap prefixes (config retention; retention.ts defaults). */
  retention?: RoutingHostOptions['retention'];
}

export function podState (b: Backend): PodState {
  return b.draining ? 'draining' : b.health === 'healthy' ? 'ready' : 'down';
}

export class TableRouting implements RoutingState {
  readonly host: RoutingHost;
  /** Backends by pod row (leased or releasing). */
  readonly #byRow: Array<Backend | undefined> = [];
  readonly #onChanged: ((b: Backend) => void) | null;
  readonly #purgeRow: ((row: number) => Promise<unknown>) | null;
  readonly #onRowFreed: ((row: number, seconds: number) => void) | null;
  readonly #onRestarted: ((b: Backend) => void) | null;
  readonly #hooks: RouteHook[] = [];
  /** A serving backend by id, for the hooks (a context names its engine by id). */
  readonly #byId = (id: string): Backend | null => {
    for (const b of this.#byRow) if (b !== undefined && b.id === id && !b.gone && !b.draining) return b;
    return null;
  };

  constructor (region: Region, policy: Policy, opts: TableRoutingOptions) {
    this.#onChanged = opts.onBackendChanged ?? null;
    this.#purgeRow = opts.purgeRow ?? null;
    this.#onRowFreed = opts.onRowFreed ?? null;
    this.#onRestarted = opts.onEngineRestarted ?? null;
    this.host = new RoutingHost(region, {
      policy, blockSize: opts.blockSize, sessionTtlMs: opts.sessionTtlMs, sessionExpiryBudget: opts.sessionExpiryBudget, random: opts.random,
      scheduler: opts.scheduler, admission: opts.admission, capacity: opts.capacity, users: opts.users, retention: opts.retention
    });
  }

  admit (id: string): number {
    // The row is set (as down until its first probe) when the backend is built: backendChanged.
    return this.host.rows.acquire(id);
  }

  retire (b: Backend): void {
    this.host.retirePod(b.index);
    this.#onChanged?.(b);
  }

  async release (b: Backend): Promise<void> {
    const t0 = performance.now();
    this.host.releasePod(b.index);
    this.#byRow[b.index] = undefined;
    this.#onChanged?.(b);
    if (this.#purgeRow !== null) await this.#purgeRow(b.index);
    else this.host.ring.push(this.host.ring.layout.opcodes.forgetPod, b.index, 0n, 0n, 0n, this.host.pods.lease(b.index));
    this.host.podPurged(b.index);
    this.#onRowFreed?.(b.index, (performance.now() - t0) / 1000);
  }

  addRouteHook (hook: RouteHook): void {
    this.#hooks.push(hook);
  }

  route (input: RoutingInput, exclude: ReadonlySet<number>, now: number, attempt = 0): Placement {
    const id = this.#hooks.length === 0 ? null : input.sessionId;
    if (id === null) return this.#wrap(this.host.route(input, exclude, now, attempt));
    if (attempt === 0) for (const h of this.#hooks) h.beforeRoute(id, this.#byId);
    const p = this.#wrap(this.host.route(input, exclude, now, attempt));
    for (const h of this.#hooks) h.afterRoute(id);
    return p;
  }

  #wrap (host: HostPlacement): TablePlacement {
    const from = host.transferFrom;
    return new TablePlacement(host, this.#byRow[host.pod]!, from === null ? null : this.#byRow[from] ?? null);
  }

  migrationEnded (p: Placement, ok: boolean, now: number): Placement | null {
    const q = this.host.migrationEnded((p as TablePlacement).host, ok, now);
    return q === null ? null : this.#wrap(q);
  }

  pendingPrefill (b: Backend): number {
    return this.#byRow[b.index] === b ? this.host.load.pendingPrefill(b.index) : 0;
  }

  engineQueue (b: Backend): { running: number; waiting: number } {
    const mine = this.#byRow[b.index] === b;
    return { running: mine ? this.host.load.running(b.index) : 0, waiting: mine ? this.host.load.waiting(b.index) : 0 };
  }

  migrationStats (): MigrationStats {
    return this.host.migrationStats();
  }

  /** Admission routes at release: the hooks go around the release, as around route(). */
  submit (input: RoutingInput, waiter: GatewayWaiter, now: number, priorityClass: number): Placement | Queued {
    const id = this.#hooks.length === 0 ? null : input.sessionId;
    if (id !== null) for (const h of this.#hooks) h.beforeRoute(id, this.#byId);
    const r = this.host.admission.submit(input, {
      released: (p, info) => {
        if (id !== null) for (const h of this.#hooks) h.afterRoute(id);
        waiter.released(this.#wrap(p), info);
      },
      dropped: (reason, t) => waiter.dropped(reason, t)
    }, now, priorityClass);
    if ('queued' in r) return r;
    if (id !== null) for (const h of this.#hooks) h.afterRoute(id);
    return this.#wrap(r);
  }

  cancel (q: Queued): boolean {
    return this.host.admission.cancel(q);
  }

  tick (now: number): void {
    this.host.admission.tick(now);
    this.host.expireSessions(now);
    this.host.expireRetention(now);
  }

  dropAll (reason: DropReason, now: number): void {
    this.host.admission.dropAll(reason, now);
  }

  admissionStats (now: number): AdmissionStats {
    return this.host.admission.admissionStats(now);
  }

  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean {
    return this.host.hasCandidate(model, exclude);
  }

  started (p: Placement, _input: RoutingInput, now: number): void {
    this.host.dispatched((p as TablePlacement).host, now);
  }

  firstToken (p: Placement, now: number): void {
    this.host.firstToken((p as TablePlacement).host, now);
  }

  finished (p: Placement, _input: RoutingInput, usage: Usage | null, _ok: boolean, now: number, retain?: Retain): void {
    const kept = retain !== undefined && (retain.toolCall || (retain.ttlMs !== null && retain.ttlMs > 0));
    const out = usage && { promptTokens: usage.promptTokens, completionTokens: usage.completionTokens };
    // A turn without usage has no context size to retain, so retention follows the usage the engine reported.
    this.host.finished((p as TablePlacement).host, out && (kept ? { ...out, toolCall: true, retainTtlMs: retain.ttlMs } : out), now);
  }

  session (sessionId: string): Record<string, unknown> | null {
    return this.host.session(sessionId) as Record<string, unknown> | null;
  }

  holdSession (sessionId: string, backend: Backend | null, ttlMs: number, now: number): void {
    this.host.holdSession(sessionId, backend !== null && !backend.gone && this.#byRow[backend.index] === backend ? backend.index : -1, ttlMs, now);
  }

  setSessionTtl (sessionId: string, ttlMs: number): void {
    this.host.setSessionTtl(sessionId, ttlMs);
  }

  prefixOf (keys: BigUint64Array, backend: Backend): { gpu: number; engine: number; assumed: number; total: number } | null {
    if (backend.gone || this.#byRow[backend.index] !== backend) return null;
    // The routing clock (startEar's): the one assumed presence is recorded and expired on.
    return this.host.prefixOf(keys, backend.index, performance.timeOrigin + performance.now());
  }

  backendChanged (b: Backend, _now: number): void {
    if (b.gone) return; // a probe or scrape that outlived the backend's row
    this.#byRow[b.index] = b;
    this.host.setPod(b.index, { id: b.id, role: b.config.role, models: b.models, state: podState(b), kvCapacityBlocks: b.config.kvCapacityBlocks ?? 0 });
    this.host.admission.setMaxConcurrent(b.index, b.config.maxConcurrent ?? 0);
    this.#onChanged?.(b);
  }

  engineLoad (b: Backend, load: EngineLoad, now: number): void {
    if (!b.gone) this.host.engineLoad(b.index, load, now);
  }

  engineRestarted (b: Backend): void {
    if (!b.gone && this.#byRow[b.index] === b) this.#onRestarted?.(b);
  }

  tableStats (): Array<{ table: string; entries: number; dropped: number }> {
    return this.host.tableStats();
  }
}
