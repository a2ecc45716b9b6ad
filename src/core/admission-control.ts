// Admission control (docs/architecture.md#admit), the routing host's part that decides *when*: a
// request is routed and dispatched at once when its pod has room (or the scheduler is off), else it waits in the
// WASM heap keyed by (class, level) — PLAS, ATLAS, FCFS or VTC — with anti-starvation promotion, parked on the pod
// it was routed to or routed again at release. Released by events (first tokens, ends, engine reports, pods
// changing) and by the clock (tick: timeouts, promotion). Bounded (QueueFullError, 429) and timed (504).
import { AdmissionQueue, ADMISSION_DEFAULTS, before, DEFAULT_CLASS, type AdmissionOptions, type Job, type SchedulerKind } from './admission.js';
import { CapacityEstimator, type CapacityOptions } from './capacity.js';
import { AdmissionHeap } from './heap.js';
import type { LoadTable } from './load-table.js';
import { NoCandidateError } from './policy.js';
import type { Region } from './region.js';
import type { SessionTable } from './session-table.js';
import type { UserUsage } from './user-usage.js';
import { VtcAccounts } from './vtc-admission.js';
import type { AdmissionRank } from './engine-priority.js';
import { EarError } from '../errors/errors.js';
import type { HostRequest, Placement } from './routing-host.js';

/** Told what became of a request submitted to admission. */
export interface AdmissionWaiter {
  /** The request was routed and is counted as dispatched on its pod: send it. */
  released (p: Placement, info: ReleaseInfo): void;
  /** It leaves the queue unserved. */
  dropped (reason: DropReason, now: number): void;
}

export type DropReason = 'timeout' | 'no_backend' | 'shutdown';

export interface ReleaseInfo {
  now: number;
  /** Time it waited for admission (ms). */
  waitMs: number;
  level: number;
  promoted: boolean;
}

/** A request waiting for admission (cancel() takes it out). */
export interface Queued {
  readonly queued: true;
}

/** The queue is at its bound: the request is refused (the gateway answers 429 with Retry-After). */
export class QueueFullError extends EarError {
  declare readonly retryAfterSeconds: number;
  constructor (retryAfterSeconds: number) {
    super('EAR_ERR_QUEUE_FULL', 'too many requests are waiting for admission; retry later', { retryAfterSeconds });
    this.name = 'QueueFullError';
  }
}

export interface AdmissionStats {
  scheduler: SchedulerKind;
  waiting: number;
  parked: number;
  /** Waiting jobs by level. */
  depthByLevel: number[];
  promotions: number;
  rejected: number;
  timedOut: number;
  released: number;
  /** The oldest waiting job's wait, and the longest wait any released job had (ms). */
  oldestWaitMs: number;
  longestWaitMs: number;
  /** Each pod's concurrency limit (Infinity when nothing limits it). */
  limits: Array<{ pod: number; id: string; limit: number }>;
}

interface QueuedRequest {
  req: HostRequest;
  waiter: AdmissionWaiter;
  /** VTC: the account charged (hashed once, at submit); 0n otherwise. */
  vtcUser: bigint;
}

class QueuedJob implements Queued {
  readonly queued = true;
  constructor (readonly job: Job<QueuedRequest>) {}
}

/** A placement as admission keeps it: its pod, what it will compute, its session, and VTC's charge. */
export interface AdmittedPlacement extends Placement {
  readonly pod: number;
  readonly request: { readonly sessionKey: bigint | null };
  vtcUser: bigint | null;
  /** Where admission ranked it (class, then level or VTC's order): what the engine is told (engine-priority.ts). */
  rank: AdmissionRank;
}

/** What admission asks of the routing host. */
export interface AdmissionHost {
  readonly load: LoadTable;
  readonly sessions: SessionTable;
  readonly users: UserUsage;
  sessionKey (sessionId: string): bigint;
  userKey (user: string): bigint;
  /** The critical path a call of this session starts from (ATLAS). */
  criticalPathOf (key: bigint | null, parent: bigint | null): number;
  /** Routes a request (not dispatched yet). Throws NoCandidateError. */
  route (req: HostRequest, exclude: ReadonlySet<number>, now: number): Placement;
  dispatched (p: Placement, now: number): void;
  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean;
  noCandidate (model: string, exclude: ReadonlySet<number>): NoCandidateError;
  /** The rows of the pods that pass the candidate filters. */
  candidateRows (model: string, exclude: ReadonlySet<number>): Iterable<number>;
  /** Every pod, by row and id. */
  podIds (): Iterable<{ row: number; id: string }>;
  /**
   * Whether the placement, new work (no session bound to its pod, not a move), would have to evict retained
   * prefixes on its pod while another pod that `canTake` has KV room for it; false unless its policy keepsRetained.
   */
  evictsRetained (p: Placement, canTake: (row: number) => boolean): boolean;
  /** A placement that will not be sent: its session's binding goes back to what it was before the decision. */
  unroute (p: Placement): void;
}

export interface AdmissionControlOptions {
  scheduler?: SchedulerKind;
  admission?: Partial<Omit<AdmissionOptions, 'kind'>>;
  capacity?: Partial<CapacityOptions>;
}

const NO_EXCLUSIONS: ReadonlySet<number> = new Set();

export class AdmissionControl {
  readonly scheduler: SchedulerKind;
  readonly capacity: CapacityEstimator;
  readonly #host: AdmissionHost;
  readonly #queue: AdmissionQueue<QueuedRequest>;
  /** VTC's accounts, with --scheduler vtc. */
  readonly #vtc: VtcAccounts<QueuedRequest> | null;
  #releasing = false;
  #again = false;
  #released = 0;
  /** Parked jobs routed again because retained prefixes took their pod's room. */
  #rerouted = 0;
  #longestWait = 0;
  /** EMA of the time between two releases (ms), for Retry-After. */
  #releaseGap = 1000;
  #lastRelease = -1;

  constructor (region: Region, host: AdmissionHost, opts: AdmissionControlOptions) {
    this.#host = host;
    this.scheduler = opts.scheduler ?? 'off';
    this.#queue = new AdmissionQueue(new AdmissionHeap(region), { ...ADMISSION_DEFAULTS, ...opts.admission, kind: this.scheduler });
    // Under a scheduler whose order differs from arrival, what the engine would queue waits here instead.
    const ordered = this.scheduler === 'atlas' || this.scheduler === 'plas' || this.scheduler === 'vtc';
    this.capacity = new CapacityEstimator({ holdEngineQueue: ordered, ...opts.capacity });
    this.#vtc = this.scheduler === 'vtc' ? new VtcAccounts(host.users) : null;
  }

  /** Pod `row`'s jobs parked on it are routed again (it went down, or leaves). */
  podUnavailable (row: number): void {
    if (this.#queue.unparkAll(row) > 0) this.#release(this.#lastNow);
  }

  /** Pod `row` left: its capacity estimate goes. */
  podLeft (row: number): void {
    this.capacity.reset(row);
  }

  /** Pod `row`'s engine reported its load as of `now`. */
  engineReport (row: number, running: number, waiting: number, kvUsage: number, now: number): void {
    this.capacity.report(row, running, waiting, kvUsage, this.#host.load.inFlight(row));
    if (this.#queue.size > 0) this.#release(now);
  }

  /** Room may have opened (a first token came, a request ended): waiting jobs are released while it lasts. */
  released (now: number): void {
    if (this.#queue.size > 0) this.#release(now);
  }

  /** VTC: a dispatched request ended; its user is charged its output and leaves. */
  ended (p: AdmittedPlacement, completionTokens: number): void {
    if (p.vtcUser === null || this.#vtc === null) return;
    const user = p.vtcUser;
    p.vtcUser = null;
    const { counter, queued } = this.#vtc.charge(user, 0, completionTokens);
    if (queued !== null) for (const job of queued) this.#queue.reprioritize(job, counter);
    this.#vtc.leave(user);
  }

  /**
   * The priority a request waits with (lower first), in ms of service. Service is time: dispatch to end of each
   * call, as Autellix measures it. Tokens would need per-model cost weights and miss what the engine's batch did
   * to the call; with admission holding engines at their capacity, the time a call holds an engine is its service.
   * - plas: the session's attained service, plus its parent's (a sub-agent spends its program's share);
   * - atlas: the critical path (a new sub-agent inherits its parent's);
   * - fcfs: 0 for all (arrival order).
   */
  #priorityOf (req: HostRequest, vtcUser: bigint): number {
    if (this.scheduler === 'vtc') return this.#host.users.counter(vtcUser);
    if (req.sessionId === null || this.scheduler === 'fcfs') return 0;
    const key = this.#host.sessionKey(req.sessionId);
    const parent = req.parentSessionId === null ? null : this.#host.sessionKey(req.parentSessionId);
    const service = this.scheduler === 'atlas'
      ? this.#host.criticalPathOf(key, parent)
      : (this.#host.sessions.get(key)?.attained ?? 0) + (parent === null ? 0 : this.#host.sessions.get(parent)?.attained ?? 0);
    // A deadline (an agent's hint) ranks it no lower than the time it has left: both are ms, so a program
    // within a quantum of its deadline goes to level 0, ahead of sessions that merely attained little service.
    const deadline = req.deadlineAt ?? null;
    return deadline === null ? service : Math.min(service, Math.max(0, deadline - this.#lastNow));
  }

  #lastNow = 0;

  /**
   * The order inside its class a request is released with: its level (plas, atlas; 0 once promoted), VTC's
   * level of its user's counter above the least active one (the counters only grow: their distance is the
   * order), 0 under fcfs and off.
   */
  #orderOf (req: HostRequest, vtcUser: bigint, level: number | null): number {
    if (this.scheduler === 'off' || this.scheduler === 'fcfs') return 0;
    if (this.scheduler === 'vtc') return this.#queue.levelOf(this.#host.users.counter(vtcUser) - this.#host.users.leastActiveCounter());
    return level ?? this.#queue.levelOf(this.#priorityOf(req, vtcUser));
  }

  /** VTC's user: the OpenAI `user` (or API key), else the session; requests with neither share one account. */
  #vtcKey (req: HostRequest): bigint {
    return req.user !== null ? this.#host.userKey(req.user) : req.sessionId !== null ? this.#host.userKey(`session:${req.sessionId}`) : 0n;
  }

  /** VTC: the request was dispatched; its user is charged its prompt and its queued jobs re-keyed. */
  #vtcDispatched (p: AdmittedPlacement, req: HostRequest, user: bigint): void {
    p.vtcUser = user;
    const { counter, queued } = this.#vtc!.charge(user, req.promptTokens, 0);
    if (queued !== null) for (const job of queued) this.#queue.reprioritize(job, counter);
  }

  /**
   * Admits a request: routes and dispatches it now when the scheduler is off or it can go at once (returns
   * its placement, already dispatched), else queues it (returns a handle for cancel) and tells `waiter` when
   * it is released or dropped. `priorityClass` ranks above the session's priority (0 best). Throws
   * QueueFullError at the queue's bound, NoCandidateError when no pod serves the model.
   */
  submit (req: HostRequest, waiter: AdmissionWaiter, now: number, priorityClass = DEFAULT_CLASS): Placement | Queued {
    this.#lastNow = now;
    const vtcUser = this.#vtc === null ? 0n : this.#vtcKey(req);
    if (this.#vtc !== null) this.#vtc.enter(vtcUser);
    try {
      return this.#submit({ req, waiter, vtcUser }, now, priorityClass);
    } catch (err) {
      if (this.#vtc !== null) this.#vtc.leave(vtcUser);
      throw err;
    }
  }

  #submit (qr: QueuedRequest, now: number, priorityClass: number): Placement | Queued {
    const q = this.#queue;
    const { req } = qr;
    if (this.scheduler === 'off' || q.size === 0) {
      const p = this.#host.route(req, req.exclude ?? NO_EXCLUSIONS, now) as AdmittedPlacement; // NoCandidateError when no pod serves the model
      if (this.scheduler === 'off' || this.#room(p.pod, p.expectedPrefill)) {
        p.rank = { classRank: priorityClass, order: this.#orderOf(req, qr.vtcUser, null) };
        this.#host.dispatched(p, now);
        if (this.#vtc !== null) this.#vtcDispatched(p, req, qr.vtcUser);
        this.#noteRelease(now, 0);
        return p;
      }
      const job = this.#push(qr, priorityClass, now);
      q.pop();
      q.park(job, p.pod, p);
      return new QueuedJob(job);
    }
    if (!this.#host.hasCandidate(req.model, req.exclude ?? NO_EXCLUSIONS)) throw this.#host.noCandidate(req.model, req.exclude ?? NO_EXCLUSIONS);
    const job = this.#push(qr, priorityClass, now);
    this.#release(now);
    return new QueuedJob(job);
  }

  /** Queues a request (QueueFullError at the bound). */
  #push (qr: QueuedRequest, priorityClass: number, now: number): Job<QueuedRequest> {
    const job = this.#queue.push(qr, priorityClass, this.#priorityOf(qr.req, qr.vtcUser), now);
    if (job === null) throw new QueueFullError(this.#retryAfter());
    if (this.#vtc !== null) this.#vtc.queued(qr.vtcUser, job);
    return job;
  }

  /** A queued job leaves unserved (cancelled, timed out, dropped). */
  #unqueued (job: Job<QueuedRequest>): void {
    if (this.#vtc === null) return;
    this.#vtc.unqueued(job.payload.vtcUser, job);
    this.#vtc.leave(job.payload.vtcUser);
  }

  /** Takes a queued request out (its client went away). False if it was released or dropped already. */
  cancel (q: Queued): boolean {
    const job = (q as QueuedJob).job;
    if (!this.#queue.remove(job)) return false;
    this.#unqueued(job);
    return true;
  }

  /** The backstop of event-driven release, and the queue's clock: timeouts, anti-starvation, release. */
  tick (now: number): void {
    this.#lastNow = now;
    const q = this.#queue;
    if (q.size === 0) return;
    for (const job of q.timedOut(now)) {
      this.#unqueued(job);
      job.payload.waiter.dropped('timeout', now);
    }
    if (this.scheduler !== 'vtc' && this.scheduler !== 'fcfs') q.promoteStarved(now, this.#starvation);
    this.#release(now);
  }

  /** Every queued request is dropped with `reason` (shutdown). */
  dropAll (reason: DropReason, now: number): void {
    for (const job of this.#queue.all()) {
      this.#queue.remove(job);
      this.#unqueued(job);
      job.payload.waiter.dropped(reason, now);
    }
  }

  /** (session wait + job wait) / the service its priority came from. */
  readonly #starvation = (job: Job<QueuedRequest>, now: number): number => {
    const id = job.payload.req.sessionId;
    const sessionWait = id === null ? 0 : this.#host.sessions.get(this.#host.sessionKey(id))?.wait ?? 0;
    return (sessionWait + now - job.enqueuedAt) / Math.max(job.value, 1);
  };

  #room (pod: number, prefill: number): boolean {
    return this.capacity.hasRoom(pod, this.#host.load.inFlight(pod), this.#host.load.pendingPrefill(pod), prefill);
  }

  #anyRoom (model: string, exclude: ReadonlySet<number>): boolean {
    for (const row of this.#host.candidateRows(model, exclude)) if (this.#room(row, 0)) return true;
    return false;
  }

  #release (now: number): void {
    if (this.#releasing) {
      this.#again = true;
      return;
    }
    this.#releasing = true;
    try {
      do {
        this.#again = false;
        this.#cycle(now);
      } while (this.#again);
    } finally {
      this.#releasing = false;
    }
  }

  /** Releases jobs while pods have room: the best of the heap's top and the parked jobs whose pod has room. */
  #cycle (now: number): void {
    const q = this.#queue;
    while (q.size > 0) {
      let parked: Job<QueuedRequest> | null = null;
      for (const pod of q.parkedPods()) {
        const j = q.parkedHead(pod)!;
        if ((parked === null || before(j, parked)) && this.#room(pod, (j.placement as AdmittedPlacement).expectedPrefill)) parked = j;
      }
      const top = q.peek();
      if (top !== null && (parked === null || before(top, parked))) {
        const exclude = top.payload.req.exclude ?? NO_EXCLUSIONS;
        if (!this.#anyRoom(top.payload.req.model, exclude)) break;
        q.pop();
        let p: AdmittedPlacement;
        try {
          p = this.#host.route(top.payload.req, exclude, now) as AdmittedPlacement;
        } catch (err) {
          if (!(err instanceof NoCandidateError)) throw err;
          q.remove(top);
          this.#unqueued(top);
          top.payload.waiter.dropped('no_backend', now);
          continue;
        }
        if (this.#room(p.pod, p.expectedPrefill)) this.#dispatchJob(top, p, now);
        else q.park(top, p.pod, p);
      } else if (parked !== null) {
        const p = parked.placement as AdmittedPlacement;
        const req = parked.payload.req;
        const exclude = req.exclude ?? NO_EXCLUSIONS;
        if (!parked.rerouted && this.#host.evictsRetained(p, (row) => !exclude.has(row) && this.#room(row, 0))) {
          // Placed while its pod had KV room; retained prefixes took it while the job waited for a seat there, and
          // another pod has room and a seat now: routed again (once) among the pods that can take it now, so that
          // keeping the prefix costs the request no wait.
          parked.rerouted = true;
          const noSeat = new Set(exclude);
          for (const row of this.#host.candidateRows(req.model, exclude)) if (!this.#room(row, 0)) noSeat.add(row);
          if (this.#host.hasCandidate(req.model, noSeat)) {
            this.#rerouted++;
            this.#host.unroute(p);
            const again = this.#host.route(req, noSeat, now) as AdmittedPlacement;
            if (this.#room(again.pod, again.expectedPrefill)) this.#dispatchJob(parked, again, now);
            else q.repark(parked, again.pod, again);
            continue;
          }
        }
        this.#dispatchJob(parked, p, now);
      } else {
        break;
      }
    }
  }

  #dispatchJob (job: Job<QueuedRequest>, p: AdmittedPlacement, now: number): void {
    this.#queue.remove(job);
    p.rank = { classRank: job.classRank, order: this.#orderOf(job.payload.req, job.payload.vtcUser, job.level) };
    this.#host.dispatched(p, now);
    if (this.#vtc !== null) {
      this.#vtc.unqueued(job.payload.vtcUser, job);
      this.#vtcDispatched(p, job.payload.req, job.payload.vtcUser);
    }
    const waitMs = now - job.enqueuedAt;
    if (p.request.sessionKey !== null) this.#host.sessions.setTime(p.request.sessionKey, 'wait', waitMs, true);
    this.#noteRelease(now, waitMs);
    job.payload.waiter.released(p, { now, waitMs, level: job.level, promoted: job.promoted });
  }

  #noteRelease (now: number, waitMs: number): void {
    this.#released++;
    if (waitMs > this.#longestWait) this.#longestWait = waitMs;
    if (this.#lastRelease >= 0) this.#releaseGap += 0.1 * (now - this.#lastRelease - this.#releaseGap);
    this.#lastRelease = now;
  }

  /** Seconds until the queue has likely room again: its length at the recent release rate, in [1, 60]. */
  #retryAfter (): number {
    return Math.min(60, Math.max(1, Math.ceil(this.#queue.size * this.#releaseGap / 1000)));
  }

  admissionStats (now: number): AdmissionStats {
    const s = this.#queue.stats();
    const limits: AdmissionStats['limits'] = [];
    for (const { row, id } of this.#host.podIds()) limits.push({ pod: row, id, limit: this.capacity.limit(row) });
    return {
      scheduler: this.scheduler, waiting: s.waiting, parked: s.parked, depthByLevel: this.#queue.depthByLevel(), promotions: s.promotions,
      rejected: s.rejected, timedOut: s.timedOut, released: this.#released, oldestWaitMs: this.#queue.oldestWait(now), longestWaitMs: this.#longestWait, limits
    };
  }

  /** Parked jobs routed again because retained prefixes took their pod's KV room while they waited. */
  get retentionReroutes (): number {
    return this.#rerouted;
  }

  /** A pod's configured limit on requests in flight (0 = none). */
  setMaxConcurrent (row: number, n: number): void {
    this.capacity.configure(row, n);
  }
}
