// The engines EAR sends requests to, as one list for the whole process (`ear serve`'s uWS edge and `ear epp`'s
// picker alike): each backend leases a pod row of the shared tables, is probed for health and its models, and
// scraped for its engine's load; reloads (a config file, pod discovery) add, drain and remove backends without
// dropping requests; a request holds its backend until it ends, so a removed one closes, and its row is freed,
// once the last lets go. A backend added when every row is taken (old ones still draining in a rolling update)
// waits for a row, first come first served, and joins as soon as one is free. Readiness is the process's: a healthy backend, and what the caller adds (active-passive).
import { Backend, probe, scrape } from './backends.js';
import type { BackendConfig, GatewayConfig } from '../config/index.js';
import { PodRowsFullError } from '../core/pod-rows.js';
import type { RoutingState } from './routing-port.js';

export interface ReadinessCondition {
  ready: boolean;
  /** Why not, for people reading the probe's body. */
  reason?: string;
  [detail: string]: unknown;
}

export interface FleetOptions {
  config: Readonly<GatewayConfig>;
  /** The routing state over the fleet's live backend list (which the fleet fills, and changes on reloads). */
  state: (backends: readonly Backend[]) => RoutingState;
  /** A backend left for good (no other of its id remains): its metric series go. */
  onGone?: (id: string) => Promise<unknown>;
  now: () => number;
  /** A condition besides a healthy backend that readiness reports (an active-passive follower is not ready). */
  readiness?: () => ReadinessCondition;
}

/** Backends that waited for a pod row: waiting now, and how many ever had to (ear_pod_rows_waiting, _waits_total). */
export interface RowWaitStats {
  waiting: number;
  waited: number;
}

export class BackendFleet {
  /** The live backends (draining ones until their requests end). A backend's index is the pod row it leases. */
  readonly backends: Backend[] = [];
  readonly state: RoutingState;
  readonly #config: Readonly<GatewayConfig>;
  readonly #onGone: ((id: string) => Promise<unknown>) | null;
  readonly #now: () => number;
  readonly #readiness: (() => ReadinessCondition) | null;
  #reloads: Promise<void> = Promise.resolve();
  /**
   * Backends of the last reload that found every pod row taken, by id in arrival order: they join as rows come
   * free. Bounded by the reload's list (the config checker bounds a list by maxPods, discovery by its maxPods).
   */
  readonly #waiting = new Map<string, BackendConfig>();
  #waited = 0;
  readonly #onRowWait: Array<(s: RowWaitStats, first: BackendConfig) => void> = [];
  #healthTimer: NodeJS.Timeout | null = null;
  #metricsTimer: NodeJS.Timeout | null = null;

  constructor (o: FleetOptions) {
    this.#config = o.config;
    this.#onGone = o.onGone ?? null;
    this.#now = o.now;
    this.#readiness = o.readiness ?? null;
    this.state = o.state(this.backends);
    for (const c of o.config.backends) {
      const b = new Backend(this.state.admit(c.id), c, o.config);
      this.backends.push(b);
      this.state.backendChanged(b, 0);
    }
  }

  /**
   * Health and the engines' figures (load, KV capacity) before the first request, not one interval later: a
   * request let in while some backends were still unprobed would see only the others, and a session bound to
   * one not yet probed (read back from a shared store after a restart) would be moved off it. Then on timers.
   */
  async start (): Promise<void> {
    const config = this.#config;
    await this.checkHealth();
    if (config.metricsIntervalMs > 0) await this.#scrapeAll();
    this.#healthTimer = setInterval(() => { void this.checkHealth(); }, config.healthIntervalMs);
    this.#healthTimer.unref();
    if (config.metricsIntervalMs > 0) {
      this.#metricsTimer = setInterval(() => { void this.#scrapeAll(); }, config.metricsIntervalMs);
      this.#metricsTimer.unref();
    }
  }

  get rowWaits (): RowWaitStats {
    return { waiting: this.#waiting.size, waited: this.#waited };
  }

  /** Called when backends start waiting for a pod row after none did (once per such episode: logged once). */
  onRowWait (listener: (s: RowWaitStats, first: BackendConfig) => void): void {
    this.#onRowWait.push(listener);
  }

  /** A request is sent to `b`: it holds it until release. */
  hold (b: Backend): void {
    b.inFlight++;
  }

  /** A request lets go of `b`: a backend a reload removed leaves once the last one has. */
  release (b: Backend): void {
    if (--b.inFlight === 0 && b.draining) void this.#leave(b);
  }

  /** Ready: a healthy backend, and what the caller adds (active-passive: leading). `draining`: the process is stopping. */
  readiness (draining = false): ReadinessCondition {
    const own = draining ? 'the gateway is shutting down' : this.backends.some((b) => b.health === 'healthy' && !b.draining) ? null : 'no healthy backend';
    const extra = this.#readiness?.() ?? null;
    const ready = own === null && (extra === null || extra.ready);
    const reason = own ?? (extra !== null && !extra.ready ? extra.reason : undefined);
    return extra === null ? { ready, reason } : { ...extra, ready, reason };
  }

  /** Runs one round of health probes now (also runs on a timer). */
  async checkHealth (): Promise<void> {
    await Promise.all(this.backends.map(async (b) => {
      if (b.draining) return;
      await probe(b, this.#config.unhealthyAfter);
      this.state.backendChanged(b, this.#now());
    }));
  }

  async #scrapeAll (): Promise<void> {
    await Promise.all(this.backends.map(async (b) => {
      if (b.health !== 'healthy' || b.draining) return;
      const restarted = await scrape(b, this.#now());
      if (b.engineLoad && b.lastScrape > 0) this.state.engineLoad(b, b.engineLoad, b.lastScrape);
      if (restarted && !b.draining) this.state.engineRestarted?.(b);
    }));
  }

  /**
   * Applies a new backend list without dropping requests: new ids are added (and probed), ids that are gone, or
   * whose URL changed, drain (no new requests) and close once their requests end, and their pod rows are
   * purged and reused. Reloads apply one after another. Other settings need a restart.
   */
  reload (next: Readonly<GatewayConfig>): Promise<void> {
    const r = this.#reloads.then(() => this.#applyReload(next));
    this.#reloads = r.catch(() => {});
    return r;
  }

  async #applyReload (next: Readonly<GatewayConfig>): Promise<void> {
    const { state } = this;
    const wanted = new Map(next.backends.map((c) => [c.id, c]));
    // A waiting backend the new list drops stops waiting; one it still names waits on in its place, as it now reads.
    for (const id of [...this.#waiting.keys()]) {
      const c = wanted.get(id);
      if (c === undefined) this.#waiting.delete(id);
      else this.#waiting.set(id, c);
    }
    for (const b of [...this.backends]) {
      const c = wanted.get(b.id);
      if (b.draining) continue;
      if (c && c.url === b.config.url && c.role === b.config.role && c.kvEvents === b.config.kvEvents && c.replay === b.config.replay && c.kvTopic === b.config.kvTopic && c.kvCapacityBlocks === b.config.kvCapacityBlocks && c.apiKey === b.config.apiKey && c.priority === b.config.priority &&
        c.agenticContext === b.config.agenticContext) {
        wanted.delete(b.id);
        continue;
      }
      b.draining = true;
      state.backendChanged(b, this.#now());
      state.retire(b);
      if (b.inFlight === 0) void this.#leave(b).catch(() => {});
    }
    const before = this.#waiting.size;
    // Behind the ones already waiting: rows go first come, first served.
    const arrived: string[] = [];
    for (const c of wanted.values()) {
      if (this.#waiting.has(c.id)) continue;
      this.#waiting.set(c.id, c);
      arrived.push(c.id);
    }
    const joined = this.#admitWaiting();
    for (const id of arrived) if (this.#waiting.has(id)) this.#waited++;
    if (before === 0 && this.#waiting.size > 0) {
      const first = this.#waiting.values().next().value as BackendConfig;
      for (const l of this.#onRowWait) l(this.rowWaits, first);
    }
    await this.#probeAdded(joined);
  }

  /**
   * Gives the waiting backends rows, in order, while there are free ones; returns those that joined. Every row
   * in use (old backends still draining): the rest wait for the next release.
   */
  #admitWaiting (): Backend[] {
    const added: Backend[] = [];
    for (const c of this.#waiting.values()) {
      let row: number;
      try {
        row = this.state.admit(c.id);
      } catch (err) {
        if (err instanceof PodRowsFullError) break;
        throw err;
      }
      this.#waiting.delete(c.id);
      const b = new Backend(row, c, this.#config);
      this.backends.push(b);
      added.push(b);
      this.state.backendChanged(b, this.#now());
    }
    return added;
  }

  /**
   * Probed together: discovery adds pods by the hundred in a rolling update, and one probe after another (up to
   * 2 s each for a pod that does not answer yet) would hold this reload and every one queued after it.
   */
  async #probeAdded (added: readonly Backend[]): Promise<void> {
    await Promise.all(added.map(async (b) => {
      await probe(b, this.#config.unhealthyAfter);
      this.state.backendChanged(b, this.#now());
    }));
  }

  /** A drained backend goes: its connections close, it leaves the list, and its pod row is purged and freed. */
  async #leave (b: Backend): Promise<void> {
    if (b.gone) return;
    b.gone = true;
    const i = this.backends.indexOf(b);
    if (i >= 0) this.backends.splice(i, 1);
    await b.pool.close().catch(() => {});
    await this.state.release(b);
    // Its row is free: the first backend waiting for one joins, in order with the reloads.
    if (this.#waiting.size > 0) {
      const r = this.#reloads.then(() => this.#probeAdded(this.#admitWaiting()));
      this.#reloads = r.catch(() => {});
    }
    // Its series go too, unless a backend of the same id (a changed URL) took its place.
    if (!this.backends.some((x) => x.id === b.id)) await this.#onGone?.(b.id);
  }

  /** Stops the timers and closes every backend's connections. */
  async close (): Promise<void> {
    if (this.#healthTimer !== null) clearInterval(this.#healthTimer);
    if (this.#metricsTimer !== null) clearInterval(this.#metricsTimer);
    await Promise.all(this.backends.map((b) => b.pool.close().catch(() => {})));
  }
}
