// The engines EAR sends requests to, as one list for the whole process (`ear serve`'s uWS edge and `ear epp`'s
// picker alike): each backend leases a pod row of the shared tables, is probed for health and its models, and
// scraped for its engine's load; reloads (a config file, pod discovery) add, drain and remove backends without
// dropping requests; a request holds its backend until it ends, so a removed one closes, and its row is freed,
// once the last lets go. Readiness is the process's: a healthy backend, and what the caller adds (active-passive).
import { Backend, probe, scrape } from './backends.js';
import type { GatewayConfig } from '../config/index.js';
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

export class BackendFleet {
  /** The live backends (draining ones until their requests end). A backend's index is the pod row it leases. */
  readonly backends: Backend[] = [];
  readonly state: RoutingState;
  readonly #config: Readonly<GatewayConfig>;
  readonly #onGone: ((id: string) => Promise<unknown>) | null;
  readonly #now: () => number;
  readonly #readiness: (() => ReadinessCondition) | null;
  #reloads: Promise<void> = Promise.resolve();
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
    for (const b of [...this.backends]) {
      const c = wanted.get(b.id);
      if (b.draining) continue;
      if (c && c.url === b.config.url && c.role === b.config.role && c.kvEvents === b.config.kvEvents && c.replay === b.config.replay && c.kvTopic === b.config.kvTopic && c.kvCapacityBlocks === b.config.kvCapacityBlocks && c.apiKey === b.config.apiKey && c.priority === b.config.priority) {
        wanted.delete(b.id);
        continue;
      }
      b.draining = true;
      state.backendChanged(b, this.#now());
      state.retire(b);
      if (b.inFlight === 0) void this.#leave(b).catch(() => {});
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
      const b = new Backend(row, c, this.#config);
      this.backends.push(b);
      added.push(b);
      state.backendChanged(b, this.#now());
    }
    // Probed together: discovery adds pods by the hundred in a rolling update, and one probe after another
    // (up to 2 s each for a pod that does not answer yet) would hold this reload and every one queued after it.
    await Promise.all(added.map(async (b) => {
      await probe(b, this.#config.unhealthyAfter);
      state.backendChanged(b, this.#now());
    }));
    if (refused !== null) throw refused;
  }

  /** A drained backend goes: its connections close, it leaves the list, and its pod row is purged and freed. */
  async #leave (b: Backend): Promise<void> {
    if (b.gone) return;
    b.gone = true;
    const i = this.backends.indexOf(b);
    if (i >= 0) this.backends.splice(i, 1);
    await b.pool.close().catch(() => {});
    await this.state.release(b);
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
