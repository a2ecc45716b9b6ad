// The discrete-event driver's adapter over the routing host (src/core/routing-host.ts), the lab's counterpart
// of the gateway's src/fleet/table-routing.ts. Engine i is pod row i. What the gateway's other threads do
// happens here on the virtual clock, through the same code:
// - the kv-events thread: an IndexFeeder applies the host's record ops from the same ring, right after each
//   dispatch (the gateway's thread gathers them for 1 ms), and ages assumed entries out every UPKEEP_EVERY_MS
//   (core/defaults.ts), as that thread does; in precise mode the engines' KV events reach the index through
//   des-kv-events.ts;
// - the metrics scrape: each engine's running / waiting / KV usage / KV capacity reach the host every
//   `scrapeIntervalMs` (the gateway's metricsIntervalMs), and are as stale between two scrapes as there.
import { PrefixIndex, PrefixIndexWriter } from '../../core/prefix-index.js';
import type { Region } from '../../core/region.js';
import { RingConsumer } from '../../core/ring.js';
import { RoutingHost, type EngineReport, type HostRequest, type Placement, type RequestOutcome, type RoutingHostOptions } from '../../core/routing-host.js';
import { type AdmissionWaiter, type Queued } from '../../core/admission-control.js';
import type { Policy } from '../../core/policy.js';
import type { UserUsageOptions } from '../../core/user-usage.js';
import { IndexFeeder } from '../../kvevents/index-feeder.js';
import { APPROXIMATE_ASSUMED_TTL_MS, ASSUMED_EXPIRY_BUDGET, PRECISE_ASSUMED_TTL_MS, SESSION_IDLE_MS } from '../../core/defaults.js';

export type KvEventsMode = 'approximate' | 'precise';

export interface LabRoutingOptions {
  policy: Policy;
  engines: number;
  /** The model every engine serves (requests name it). */
  model: string;
  blockSize: number;
  /** approximate: the index learns from routing only; precise: also from the engines' KV events. */
  kvEvents: KvEventsMode;
  /** A seeded uniform draw in [0, 1). */
  random: () => number;
  /** Default: the gateway's (sessionIdleMs). */
  sessionTtlMs?: number;
  /** Assumed presence lifetime; default as the gateway picks it for the mode. */
  assumedTtlMs?: number;
  /** The admission scheduler and its knobs, as the gateway's (default the host's: off). */
  scheduler?: RoutingHostOptions['scheduler'];
  admission?: RoutingHostOptions['admission'];
  capacity?: RoutingHostOptions['capacity'];
  /** The per-user token window; default as the gateway's (user-usage.ts). */
  users?: UserUsageOptions;
  /** Retention of tool-gap prefixes; default as the gateway's (retention.ts). */
  retention?: RoutingHostOptions['retention'];
}

export class LabRouting {
  readonly host: RoutingHost;
  /** The index's one writer, as the kv-events thread holds it. */
  readonly writer: PrefixIndexWriter;
  readonly feeder: IndexFeeder;
  readonly kvEvents: KvEventsMode;
  readonly assumedTtlMs: number;

  constructor (region: Region, o: LabRoutingOptions) {
    this.kvEvents = o.kvEvents;
    this.host = new RoutingHost(region, {
      policy: o.policy, blockSize: o.blockSize, sessionTtlMs: o.sessionTtlMs ?? SESSION_IDLE_MS, random: o.random,
      scheduler: o.scheduler, admission: o.admission, capacity: o.capacity, users: o.users, retention: o.retention
    });
    const area = region.claimScratch();
    this.writer = new PrefixIndexWriter(region, { ptr: area.ptr, bytes: Math.ceil(PrefixIndex.areaBytes(region) / 64) * 64 });
    this.assumedTtlMs = o.assumedTtlMs ?? (o.kvEvents === 'precise' ? PRECISE_ASSUMED_TTL_MS : APPROXIMATE_ASSUMED_TTL_MS);
    this.feeder = new IndexFeeder(this.writer, new RingConsumer(region), { assumedTtlMs: this.assumedTtlMs, expiryBudget: ASSUMED_EXPIRY_BUDGET });
    const models = new Set([o.model]);
    // Engine i leases row i: rows are handed out lowest first.
    for (let i = 0; i < o.engines; i++) this.host.addPod({ id: `engine-${i}`, role: 'both', models, state: 'ready' });
  }

  route (req: HostRequest, now: number): Placement {
    return this.host.route(req, NO_EXCLUSIONS, now);
  }

  dispatched (p: Placement, now: number): void {
    this.host.dispatched(p, now);
    this.feeder.pump();
  }

  /**
   * Through admission, as the gateway's requests go: the placement (dispatched) when it goes at once, else
   * `waiter` hears of it. Released requests are dispatched by the host; `sent` is for the caller to call when it
   * hands one to its engine.
   */
  submit (req: HostRequest, waiter: AdmissionWaiter, now: number): Placement | Queued {
    return this.host.admission.submit(req, waiter, now);
  }

  /** A released request went to its engine: its record ops reach the index now. */
  sent (): void {
    this.feeder.pump();
  }

  firstToken (p: Placement, now: number): void {
    this.host.firstToken(p, now);
  }

  finished (p: Placement, out: RequestOutcome | null, now: number): void {
    this.host.finished(p, out, now);
  }

  /** One scrape of engine `i`'s figures. */
  engineReport (i: number, r: EngineReport, now: number): void {
    this.host.engineLoad(i, r, now);
  }

  /** The periodic upkeep (UPKEEP_EVERY_MS): the host's tick (admission, session expiry), then the kv-events thread's ops and expiry slice. */
  upkeep (now: number): void {
    this.host.admission.tick(now);
    this.host.expireSessions(now);
    this.host.expireRetention(now);
    this.feeder.pump();
    this.feeder.expire(now);
  }
}

const NO_EXCLUSIONS: ReadonlySet<number> = new Set();
