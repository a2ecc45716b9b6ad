// The routing host: everything around the Router that the gateway and the discrete-event driver both need,
// written once (ARCHITECTURE.md "The routing host"). It keeps the pods (model, role, state, KV capacity) and
// picks the candidates of a request, turns session ids into keys, puts the prompt's block keys where the
// kernels read them, asks the Router, records each step of a request's life in the tables (dispatch, first
// token, end), expires idle sessions, takes engine load, and tells a retry from a migration. The adapters bring
// requests, a clock and engines: src/fleet/table-routing.ts (uWS + real engines) and
// src/eval/drivers/des.ts (virtual time + simulated engines). A number measured in the lab is then a number of
// the code that serves.
//
// Single-threaded: the thread that writes the load, session and pod tables (the gateway's main thread). The
// prefix index is read here and written by its own thread; routing decisions reach it as ring ops.
import { AdmissionQueue, ADMISSION_DEFAULTS, before, DEFAULT_CLASS, type AdmissionOptions, type Job, type SchedulerKind } from './admission.js';
import type { KeySpan } from './block-keys.js';
import { CapacityEstimator, type CapacityOptions } from './capacity.js';
import { AdmissionHeap } from './heap.js';
import { LoadTable } from './load-table.js';
import { PodTable, type PodRole, type PodState } from './pod-table.js';
import { PodRows } from './pod-rows.js';
import { NoCandidateError, type Policy, type PodView } from './policy.js';
import { emptiedBy, isCandidate, type CandidatePod, type CandidateQuery } from './candidate-filters.js';
import { PrefixIndex } from './prefix-index.js';
import type { Region } from './region.js';
import { RingProducer } from './ring.js';
import { Router, type PrefixWalkStats, type RouteRequest, type Routed } from './router.js';
import { SessionKeys } from './session-key.js';
import { SessionTable, type SessionRecord } from './session-table.js';
import { UserUsage, type UserUsageOptions } from './user-usage.js';
import { VtcAccounts } from './vtc-admission.js';
import { EarError } from '../request/errors.js';

/** A pod as its adapter describes it. Its row in the shared tables is the adapter's (backend index, engine number). */
export interface PodSpec {
  id: string;
  role: PodRole;
  /** Models it serves now (an engine's /v1/models). */
  models: ReadonlySet<string>;
  /** ready: takes new requests; draining: finishes what it has; down: failed its health checks. */
  state: PodState;
  /** KV capacity in blocks from configuration; what the engine itself reports (engineLoad) takes precedence. */
  kvCapacityBlocks?: number;
}

/** What an engine reports about itself (vLLM's /metrics; the simulator's figures in the lab). */
export interface EngineReport {
  running: number;
  waiting: number;
  /** 0..1 */
  kvUsage: number;
  /** `num_gpu_blocks` of vllm:cache_config_info, when the engine exports it. */
  numGpuBlocks?: number | null;
}

export interface HostRequest {
  model: string;
  sessionId: string | null;
  /** A sub-agent's parent session, when the client names it. */
  parentSessionId: string | null;
  promptTokens: number;
  /** Chained keys of the prompt's full blocks (block size = the host's). */
  blockKeys: BigUint64Array;
  /** Output tokens the client asked for at most (max_tokens), if it did. */
  maxTokens: number | null;
  /** Whom the tokens count against (fairness policies): the OpenAI `user`, else an API key's digest; null if unknown. */
  user: string | null;  /**
   * Pods this request may not go to, ever (an endpoint picker's subset hint: the proxy may only reach the others);
   * admission honours it too. Absent: none.
   */
  exclude?: ReadonlySet<number>;
}

/** A request placed on a pod; handed back to dispatched / firstToken / finished. */
export interface Placement {
  readonly pod: number;
  readonly reason: string;
  /** Leading blocks of the prompt the index says the pod holds. */
  readonly matchedBlocks: number;
  /** Prompt tokens the pod is expected to compute: its pending prefill until the first token. */
  readonly expectedPrefill: number;
  readonly decidedAt: number;
  /** 0 for the first attempt, then 1, 2, … for retries on other pods. */
  readonly attempt: number;
  /** When it was dispatched (0 until then): its service is counted from here. */
  readonly dispatchedAt: number;
  /** The pod the policy moved the session from (its KV is there), or null when the session did not move. */
  readonly migrateFrom: number | null;
  /** A disaggregating policy's prefill pod (the prompt is prefilled there, its KV moved here), or null. */
  readonly prefillOn: number | null;
  /** Where the request's KV is to come from by a KV connector: migrateFrom, else prefillOn, else null. */
  readonly transferFrom: number | null;
}

/** Migrations the host saw end, by outcome (a failed one left its session on the source). */
export interface MigrationStats {
  started: number;
  done: number;
  failed: number;
  /** Failed ones whose source could not take the request back (gone or down): the target computed it. */
  stayedOnTarget: number;
  /** Turns sent to a migration's source because they came while it was in flight. */
  turnsToSource: number;
  /** Idle sessions moved by a proactive transfer (rebindIdle). */
  proactive: number;
}

export interface RequestOutcome {
  /** Prompt and completion tokens the engine reported (its usage), if it did. */
  promptTokens: number | null;
  completionTokens: number | null;
}

export interface RoutingHostOptions {
  policy: Policy;
  /** Tokens per block of the keys requests carry. */
  blockSize: number;
  /** Idle time after which a session is forgotten (ms). */
  sessionTtlMs: number;
  /** The per-user token window's window, buckets, token weights and bound (user-usage.ts defaults). */
  users?: UserUsageOptions;
  /** Session slots examined for expiry per routed request, so idle sessions go without a sweep (default 8). */
  sessionExpiryBudget?: number;
  /** A uniform draw in [0, 1) for policies that randomise (Math.random in the gateway, seeded in the lab). */
  random?: () => number;
  /** The admission scheduler (default off: every request is routed as it comes). */
  scheduler?: SchedulerKind;
  admission?: Partial<Omit<AdmissionOptions, 'kind'>>;
  capacity?: Partial<CapacityOptions>;
}

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

export interface SessionSummary {
  host: string | null;
  inFlight: number;
  contextTokens: number;
  attainedServiceMs: number;
  criticalPathMs: number;
  /** Time its calls waited for admission (ms). */
  waitMs: number;
  migrations: number;
  lastActivity: number;
}

interface HostPod {
  spec: PodSpec;
  view: PodView;
  /** What the candidate filters read of it. */
  candidate: CandidatePod;
  /** From the engine's metrics; 0 until it reports one. */
  engineBlocks: number;
}

class HostPlacement implements Placement {
  sawFirstToken = false;
  /** VTC: the user charged for it, until it ends. */
  vtcUser: bigint | null = null;
  dispatchedAt = 0;
  constructor (readonly routed: Routed, readonly request: RouteRequest, readonly keys: BigUint64Array, readonly decidedAt: number, readonly attempt: number,
    /** The pod row's lease when decided: a row released and leased again since is another pod's. */
    readonly lease: number,
    /** ATLAS: the call's priority, its session's critical path when it came (a new sub-agent's: its parent's). */
    readonly callPriority: number) {}
  get pod (): number { return this.routed.pod; }
  get reason (): string { return this.routed.reason; }
  get matchedBlocks (): number { return this.routed.matchedBlocks; }
  get expectedPrefill (): number { return this.routed.expectedPrefill; }
  get migrateFrom (): number | null { return this.routed.migrateFrom ?? null; }
  get prefillOn (): number | null { return this.routed.prefillOn ?? null; }
  get transferFrom (): number | null { return this.routed.migrateFrom ?? this.routed.prefillOn ?? null; }
}

const NO_EXCLUSIONS: ReadonlySet<number> = new Set();

export class RoutingHost {
  readonly load: LoadTable;
  readonly sessions: SessionTable;
  readonly pods: PodTable;
  readonly index: PrefixIndex;
  readonly ring: RingProducer;
  /** Which pod holds which row, and the rows being released (ARCHITECTURE.md "Pod rows"). */
  readonly rows: PodRows;
  readonly blockSize: number;
  /** Per-user weighted tokens in a sliding window, and the VTC counters (user-usage.ts). */
  readonly users: UserUsage;
  readonly #router: Router;
  readonly #keys: SessionKeys;
  readonly #region: Region;
  readonly #keysPtr: number;
  readonly #keysCap: number;
  /** The key area as one view, made once (the memory never grows): a view a request cost ~0.2 µs. */
  readonly #keyArea: BigUint64Array;
  readonly #noKeys: KeySpan;
  readonly #expiryBudget: number;
  readonly #random: () => number;
  readonly #pods: Array<HostPod | undefined> = [];
  /**
   * Candidate lists of requests that exclude nothing, per model, kept while the pods do not change: the same
   * array for the same pods, so a policy may key what it derives from the list (a hash ring) on its identity.
   * Only models some pod serves get one, so the map is bounded by the pods' models.
   */
  readonly #candidates = new Map<string, readonly PodView[]>();
  /** The placement whose keys are in the key area now (dispatched() rewrites them if another came between). */
  #keysOwner: HostPlacement | null = null;
  readonly scheduler: SchedulerKind;
  readonly #queue: AdmissionQueue<QueuedRequest>;
  readonly capacity: CapacityEstimator;
  /** VTC's accounts, with --scheduler vtc. */
  readonly #vtc: VtcAccounts<QueuedRequest> | null;
  #releasing = false;
  #again = false;
  #released = 0;
  #longestWait = 0;
  /** EMA of the time between two releases (ms), for Retry-After. */
  #releaseGap = 1000;
  #lastRelease = -1;
  readonly #migrationStats: MigrationStats = { started: 0, done: 0, failed: 0, stayedOnTarget: 0, turnsToSource: 0, proactive: 0 };

  constructor (region: Region, opts: RoutingHostOptions) {
    this.#region = region;
    this.blockSize = opts.blockSize;
    const scratch = region.claimScratch();
    // One scratch area, cut in two: session-id bytes first, then block keys.
    const idBytes = 4096;
    this.#keys = new SessionKeys(region, { ptr: scratch.ptr, bytes: idBytes });
    this.#keysPtr = scratch.ptr + idBytes;
    this.#keysCap = Math.floor((scratch.bytes - idBytes) / 8);
    this.#keyArea = new BigUint64Array(region.memory.buffer, this.#keysPtr, this.#keysCap);
    this.#noKeys = { ptr: this.#keysPtr, count: 0 };
    this.load = new LoadTable(region);
    this.sessions = new SessionTable(region);
    this.pods = new PodTable(region);
    this.index = new PrefixIndex(region);
    this.ring = new RingProducer(region);
    this.rows = new PodRows(this.pods);
    this.#expiryBudget = opts.sessionExpiryBudget ?? 8;
    this.scheduler = opts.scheduler ?? 'off';
    this.#queue = new AdmissionQueue(new AdmissionHeap(region), { ...ADMISSION_DEFAULTS, ...opts.admission, kind: this.scheduler });
    this.capacity = new CapacityEstimator(opts.capacity);
    this.#random = opts.random ?? Math.random;
    this.users = new UserUsage(opts.users);
    this.#vtc = this.scheduler === 'vtc' ? new VtcAccounts(this.users) : null;
    const assumed = this.ring.layout.opcodes.assumed;
    this.#router = new Router({ index: this.index, load: this.load, sessions: this.sessions, users: this.users }, opts.policy, {
      sessionTtlMs: opts.sessionTtlMs,
      // The index's writer applies these; a full ring drops them and counts it (a missed hint, never an error).
      record: (pod, keys, now) => { this.ring.pushKeysAt(assumed, pod, keys.ptr, keys.count, now, 0, this.rows.lease(pod)); }
    });
  }

  get policy (): Policy {
    return this.#router.policy;
  }

  /** How prompts were matched against the index (whole walks or from a session's known prefix) and recorded. */
  walkStats (): PrefixWalkStats {
    return this.#router.walkStats();
  }

  sessionKey (sessionId: string): bigint {
    return this.#keys.key(sessionId);
  }

  /** The key of a user in the user usage table (seeded apart from session keys). */
  userKey (user: string): bigint {
    return this.#keys.userKey(user);
  }

  /**
   * A pod joins: it leases the lowest free row (its index in every table and in policies' views) and is set
   * as `spec` says. Throws PodRowsFullError when every row is leased or still being released.
   */
  addPod (spec: PodSpec): number {
    const row = this.rows.acquire(spec.id);
    this.setPod(row, spec);
    return row;
  }

  /** Changes a pod (health, draining, role, models). */
  setPod (row: number, spec: PodSpec): void {
    if (this.rows.occupant(row) !== spec.id) throw new RangeError(`pod ${spec.id}: row ${row} is not its row (held by ${this.rows.occupant(row) ?? 'no pod'})`);
    const old = this.#pods[row];
    const engineBlocks = old?.engineBlocks ?? 0;
    const kv = engineBlocks > 0 ? engineBlocks : spec.kvCapacityBlocks ?? 0;
    this.#pods[row] = {
      spec, engineBlocks, view: { index: row, id: spec.id, role: spec.role, blockSize: this.blockSize, kvCapacityBlocks: kv },
      candidate: { state: spec.state, role: spec.role, models: spec.models, row }
    };
    this.#candidates.clear();
    const prev = this.pods.get(row);
    if (prev && prev.state === spec.state && prev.role === spec.role && prev.kvBlocks === kv) return;
    this.pods.set(row, { state: spec.state, role: spec.role, blockSize: this.blockSize, kvBlocks: kv, model: 0 });
    // A pod that went down or away no longer holds what the index assumed: forget it (the index's writer clears it).
    if (spec.state !== 'ready' && prev?.state === 'ready') {
      this.ring.push(this.ring.layout.opcodes.forgetPod, row, 0n, 0n, 0n);
      // Jobs parked on it are routed again to the pods that serve.
      if (this.#queue.unparkAll(row) > 0) this.#release(this.#lastNow);
    }
  }

  /**
   * The pod leaves: nothing new is routed to it, and the sessions bound to it are unbound now (not counted
   * as migrations), so a turn that arrives while it drains is placed as a new session would be.
   */
  retirePod (row: number): void {
    const p = this.#pods[row];
    if (p === undefined) throw new RangeError(`no pod on row ${row}`);
    if (p.spec.state !== 'draining') this.setPod(row, { ...p.spec, state: 'draining' });
    this.rows.retire(row);
    this.sessions.unbindPod(row);
    // Jobs waiting for this pod are routed again, to the pods that stay.
    if (this.#queue.unparkAll(row) > 0) this.#release(this.#lastNow);
  }

  /**
   * The retired pod has nothing in flight: its lease moves on (from here every ring op stamped with the old
   * one is dropped), its load row is zeroed, and it leaves the views. The adapter then has the index's writer
   * purge the row and calls podPurged.
   */
  releasePod (row: number): void {
    if (this.rows.state(row) !== 'releasing') throw new RangeError(`row ${row} is not retired`);
    this.pods.release(row);
    this.load.resetRow(row);
    this.capacity.reset(row);
    this.#pods[row] = undefined;
    this.#candidates.clear();
  }

  /** The index holds nothing of the released row any more: it is free for the next pod. */
  podPurged (row: number): void {
    this.rows.release(row);
  }

  /** An engine's own figures, as of `now` (the time of the scrape that read them). */
  engineLoad (row: number, r: EngineReport, now: number): void {
    if (this.#pods[row] === undefined) return; // a scrape that raced the pod's release
    this.load.setEngine(row, { running: r.running, waiting: r.waiting, kvUsage: r.kvUsage, time: now });
    this.capacity.report(row, r.running, r.waiting, r.kvUsage);
    const p = this.#pods[row];
    const blocks = r.numGpuBlocks ?? 0;
    if (p !== undefined && blocks > 0 && blocks !== p.engineBlocks) {
      p.engineBlocks = blocks;
      this.setPod(row, p.spec);
    }
    if (this.#queue.size > 0) this.#release(now);
  }

  /** The pod as policies see it (null for a row never set). */
  pod (row: number): PodView | null {
    return this.#pods[row]?.view ?? null;
  }

  /** A pod passes every candidate filter (candidate-filters.ts) for a request of `model` not excluding it. */
  #serves (p: HostPod | undefined, model: string, exclude: ReadonlySet<number>): p is HostPod {
    return p !== undefined && isCandidate(p.candidate, this.#query(model, exclude));
  }

  #query (model: string, exclude: ReadonlySet<number>): CandidateQuery {
    return { model, exclude, disaggregated: this.#router.policy.disaggregated === true };
  }

  /** No pod is a candidate: the error names the filter that left none. */
  #noCandidate (model: string, exclude: ReadonlySet<number>): NoCandidateError {
    const pods: CandidatePod[] = [];
    for (const p of this.#pods) if (p !== undefined) pods.push(p.candidate);
    return new NoCandidateError(undefined, emptiedBy(pods, this.#query(model, exclude)) ?? 'none');
  }

  /** Whether any pod could take a request for `model` beyond those in `exclude`. */
  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean {
    const q = this.#query(model, exclude);
    for (const p of this.#pods) if (p !== undefined && isCandidate(p.candidate, q)) return true;
    return false;
  }

  /** Puts the block keys where the kernels read them; a prompt longer than the area is matched on its head. */
  #span (keys: BigUint64Array): KeySpan {
    if (keys.length === 0) return this.#noKeys;
    const n = Math.min(keys.length, this.#keysCap);
    this.#keyArea.set(n === keys.length ? keys : keys.subarray(0, n));
    return { ptr: this.#keysPtr, count: n };
  }

  /**
   * Chooses a pod for the request among those serving its model, excluding `exclude` (pods that already failed
   * it), and records the decision. `attempt` > 0 is a retry. Throws NoCandidateError when no pod qualifies.
   */
  route (req: HostRequest, exclude: ReadonlySet<number>, now: number, attempt = 0): Placement {
    let candidates = exclude.size === 0 ? this.#candidates.get(req.model) : undefined;
    if (candidates === undefined) {
      const list: PodView[] = [];
      const q = this.#query(req.model, exclude);
      for (const p of this.#pods) if (p !== undefined && isCandidate(p.candidate, q)) list.push(p.view);
      if (list.length === 0) throw this.#noCandidate(req.model, exclude);
      if (exclude.size === 0) this.#candidates.set(req.model, list);
      candidates = list;
    }
    const request: RouteRequest = {
      model: req.model,
      sessionKey: req.sessionId === null ? null : this.sessionKey(req.sessionId),
      parentSessionKey: req.parentSessionId === null ? null : this.sessionKey(req.parentSessionId),
      promptTokens: req.promptTokens,
      keys: this.#span(req.blockKeys),
      blockSize: this.blockSize,
      expectedOutputTokens: req.maxTokens,
      userKey: req.user === null ? null : this.userKey(req.user)
    };
    const callPriority = this.#criticalPath(request.sessionKey, request.parentSessionKey);
    const routed = this.#router.route(request, candidates, now, this.#random(), attempt > 0);
    if (this.#expiryBudget > 0) this.sessions.expire(now, this.#expiryBudget);
    if (routed.reason === 'migration-in-flight') this.#migrationStats.turnsToSource++;
    if (routed.migrateFrom !== undefined && request.sessionKey !== null) {
      // In flight until migrationEnded: a turn that comes meanwhile goes to the source (router.ts).
      this.sessions.setCount(request.sessionKey, 'migratingFrom', routed.migrateFrom);
      this.#migrationStats.started++;
    }
    const p = new HostPlacement(routed, request, req.blockKeys, now, attempt, this.rows.lease(routed.pod), callPriority);
    this.#keysOwner = p;
    return p;
  }

  /**
   * A migration's transfer ended (the target has the KV, or it failed). Ok: the session stays on the target
   * and no longer counts as migrating. Failed: the session goes back to its source (which still holds its KV;
   * not counted as a move, and its cooldown stands, so it does not try again at once), the request's placement
   * on the target is ended unserved, and a placement on the source is returned for the caller to send it
   * there (dispatched as any other). Null when there is nothing to redo: ok, not a migration, or the source no
   * longer serves (then the target computes the prompt, and the session stays there).
   */
  migrationEnded (placement: Placement, ok: boolean, now: number): Placement | null {
    const p = placement as HostPlacement;
    const from = p.migrateFrom;
    const key = p.request.sessionKey;
    if (from === null || key === null) return null;
    const s = this.sessions.get(key);
    if (s !== undefined && s.migratingFrom === from) this.sessions.setCount(key, 'migratingFrom', -1);
    if (ok) {
      this.#migrationStats.done++;
      return null;
    }
    this.#migrationStats.failed++;
    const src = this.#pods[from];
    if (!this.#current(p) || !this.#serves(src, p.request.model, NO_EXCLUSIONS) || s === undefined) {
      this.#migrationStats.stayedOnTarget++;
      return null;
    }
    this.finished(p, null, now);
    this.sessions.setCount(key, 'host', from);
    if (s.migrations > 0) this.sessions.setCount(key, 'migrations', s.migrations - 1);
    const request = { ...p.request, keys: this.#span(p.keys) };
    const routed = this.#router.route(request, [src.view], now, this.#random(), false, { pod: from, reason: 'migration-failed' });
    const q = new HostPlacement(routed, request, p.keys, now, p.attempt, this.rows.lease(from), p.callPriority);
    this.#keysOwner = q;
    return q;
  }

  /**
   * A proactive move's transfer is done (the target holds the idle session's KV): binds the session to `to`,
   * counted as a migration, if it is still idle on `from` with no migration in flight (a compare-and-set: a
   * turn that came meanwhile went to `from`, and the move is dropped). True if it moved.
   */
  rebindIdle (key: bigint, from: number, to: number, now: number): boolean {
    const s = this.sessions.get(key);
    if (s === undefined || s.host !== from || s.inFlight !== 0 || s.migratingFrom >= 0) return false;
    if (this.#pods[to]?.spec.state !== 'ready') return false;
    this.sessions.setHost(key, to, now);
    this.#migrationStats.proactive++;
    return true;
  }

  migrationStats (): MigrationStats {
    return { ...this.#migrationStats };
  }

  /** The request was sent to its pod: in flight, pending prefill, and its keys assumed there. */
  dispatched (placement: Placement, now: number): void {
    const p = placement as HostPlacement;
    if (this.#keysOwner !== p) {
      this.#span(p.keys);
      this.#keysOwner = p;
    }
    p.dispatchedAt = now;
    this.#router.dispatched(p.routed, p.request, now);
  }

  /** Whether the placement's pod still holds the row it was decided on (else its counters are another pod's). */
  #current (p: HostPlacement): boolean {
    return this.pods.lease(p.pod) === p.lease;
  }

  /** The first content token came back: the prompt is computed. Idempotent. */
  firstToken (placement: Placement, _now: number): void {
    const p = placement as HostPlacement;
    if (p.sawFirstToken) return;
    p.sawFirstToken = true;
    if (!this.#current(p)) return;
    this.#router.firstToken(p.routed);
    if (this.#queue.size > 0) this.#release(_now);
  }

  /** The request ended, any outcome. Service = time from dispatch to end (the session's attained service). */
  finished (placement: Placement, out: RequestOutcome | null, now: number): void {
    const p = placement as HostPlacement;
    const contextTokens = out !== null && out.promptTokens !== null ? out.promptTokens + (out.completionTokens ?? 0) : null;
    // The user's tokens count whatever became of the pod's row; an engine that reported no usage counts the prompt.
    if (out !== null) this.#router.usage(p.request, out.promptTokens ?? p.request.promptTokens, out.completionTokens ?? 0, now);
    if (p.vtcUser !== null && this.#vtc !== null) {
      const user = p.vtcUser;
      p.vtcUser = null;
      const { counter, queued } = this.#vtc.charge(user, 0, out?.completionTokens ?? 0);
      if (queued !== null) for (const job of queued) this.#queue.reprioritize(job, counter);
      this.#vtc.leave(user);
    }
    if (!this.#current(p)) return;
    const serviceMs = now - p.dispatchedAt;
    this.#router.finished(p.routed, p.request, { sawFirstToken: p.sawFirstToken, contextTokens, serviceMs }, now);
    const key = p.request.sessionKey;
    if (key !== null) {
      // ATLAS: the session's critical path is the longest (call priority + call service) of its calls, so
      // parallel calls (which came with one priority) add only the longest of them.
      const s = this.sessions.get(key);
      const cp = p.callPriority + serviceMs;
      if (s && cp > s.criticalPath) this.sessions.setTime(key, 'criticalPath', cp);
    }
    if (this.#queue.size > 0) this.#release(now);
  }

  /**
   * Keeps a session alive and bound for an explicit context (src/gateway/contexts.ts): creates it or marks it
   * active with `ttlMs` as its idle TTL, and binds it to `pod` if it has no host (new, evicted, or unbound when
   * its pod left); a host a policy chose since is kept. `pod` < 0 binds nothing.
   */
  holdSession (sessionId: string, pod: number, ttlMs: number, now: number): void {
    const key = this.sessionKey(sessionId);
    this.sessions.upsert(key, now, ttlMs);
    if (pod >= 0 && this.#pods[pod] !== undefined) {
      const s = this.sessions.get(key);
      if (s !== undefined && s.host < 0) this.sessions.setCount(key, 'host', pod);
    }
  }

  /** Sets an existing session's idle TTL (ms); false if the session is not in the table. */
  setSessionTtl (sessionId: string, ttlMs: number): boolean {
    return this.sessions.setTime(this.sessionKey(sessionId), 'ttl', ttlMs);
  }

  /**
   * Where the index says `pod` holds the leading blocks of `keys`, by kind: `gpu` confirmed by the engine's
   * events in GPU memory, `engine` confirmed on any engine tier (GPU or an offload tier: the events' medium),
   * `assumed` recorded from routing decisions. Counts of leading blocks (longestPrefix), each ≤ keys.length.
   */
  prefixOf (keys: BigUint64Array, pod: number): { gpu: number; engine: number; assumed: number; total: number } {
    if (keys.length === 0 || pod < 0 || pod >= this.index.maxPods) return { gpu: 0, engine: 0, assumed: 0, total: keys.length };
    const span = this.#span(keys);
    this.#keysOwner = null; // the key area now holds these keys: dispatched() writes its own back
    const m = this.index.mask;
    this.index.longestPrefix(span, m.confirmed);
    const gpu = this.index.counts[pod];
    this.index.longestPrefix(span, m.confirmed | m.offloaded);
    const engine = this.index.counts[pod];
    this.index.longestPrefix(span, m.assumed);
    const assumed = this.index.counts[pod];
    return { gpu, engine, assumed, total: keys.length };
  }

  /** What the session table says of a session, for the admin endpoint; null if unknown. */
  session (sessionId: string): SessionSummary | null {
    const s = this.sessions.get(this.sessionKey(sessionId));
    if (!s) return null;
    const host = s.host >= 0 ? this.#pods[s.host]?.spec.id ?? null : null;
    return {
      host, inFlight: s.inFlight, contextTokens: s.contextTokens, attainedServiceMs: s.attained, criticalPathMs: s.criticalPath,
      waitMs: s.wait, migrations: s.migrations, lastActivity: s.lastActivity
    };
  }

  // ---- Admission (ARCHITECTURE.md "Request lifecycle" step 3) ----

  /** The critical path a call of this session starts from: the session's, or for a new sub-agent its parent's. */
  #criticalPath (key: bigint | null, parent: bigint | null): number {
    if (key === null) return 0;
    const s = this.sessions.get(key);
    if (s && (s.criticalPath > 0 || s.attained > 0)) return s.criticalPath;
    if (parent === null) return 0;
    return this.sessions.get(parent)?.criticalPath ?? 0;
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
    if (this.scheduler === 'vtc') return this.users.counter(vtcUser);
    if (req.sessionId === null || this.scheduler === 'fcfs') return 0;
    const key = this.sessionKey(req.sessionId);
    const parent = req.parentSessionId === null ? null : this.sessionKey(req.parentSessionId);
    if (this.scheduler === 'atlas') return this.#criticalPath(key, parent);
    const own = this.sessions.get(key)?.attained ?? 0;
    return own + (parent === null ? 0 : this.sessions.get(parent)?.attained ?? 0);
  }

  #lastNow = 0;

  /** VTC's user: the OpenAI `user` (or API key), else the session; requests with neither share one account. */
  #vtcKey (req: HostRequest): bigint {
    return req.user !== null ? this.userKey(req.user) : req.sessionId !== null ? this.userKey(`session:${req.sessionId}`) : 0n;
  }

  /** VTC: the request was dispatched; its user is charged its prompt and its queued jobs re-keyed. */
  #vtcDispatched (p: HostPlacement, req: HostRequest, user: bigint): void {
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
      const p = this.route(req, req.exclude ?? NO_EXCLUSIONS, now) as HostPlacement; // NoCandidateError when no pod serves the model
      if (this.scheduler === 'off' || this.#room(p.pod, p.expectedPrefill)) {
        this.dispatched(p, now);
        if (this.#vtc !== null) this.#vtcDispatched(p, req, qr.vtcUser);
        this.#noteRelease(now, 0);
        return p;
      }
      const job = this.#push(qr, priorityClass, now);
      q.pop();
      q.park(job, p.pod, p);
      return new QueuedJob(job);
    }
    if (!this.hasCandidate(req.model, req.exclude ?? NO_EXCLUSIONS)) throw this.#noCandidate(req.model, req.exclude ?? NO_EXCLUSIONS);
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
    const sessionWait = id === null ? 0 : this.sessions.get(this.sessionKey(id))?.wait ?? 0;
    return (sessionWait + now - job.enqueuedAt) / Math.max(job.value, 1);
  };

  #room (pod: number, prefill: number): boolean {
    return this.capacity.hasRoom(pod, this.load.inFlight(pod), this.load.pendingPrefill(pod), prefill);
  }

  #anyRoom (model: string, exclude: ReadonlySet<number>): boolean {
    const q = this.#query(model, exclude);
    for (const p of this.#pods) if (p !== undefined && isCandidate(p.candidate, q) && this.#room(p.view.index, 0)) return true;
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
        if ((parked === null || before(j, parked)) && this.#room(pod, (j.placement as HostPlacement).expectedPrefill)) parked = j;
      }
      const top = q.peek();
      if (top !== null && (parked === null || before(top, parked))) {
        const exclude = top.payload.req.exclude ?? NO_EXCLUSIONS;
        if (!this.#anyRoom(top.payload.req.model, exclude)) break;
        q.pop();
        let p: HostPlacement;
        try {
          p = this.route(top.payload.req, exclude, now) as HostPlacement;
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
        this.#dispatchJob(parked, parked.placement as HostPlacement, now);
      } else {
        break;
      }
    }
  }

  #dispatchJob (job: Job<QueuedRequest>, p: HostPlacement, now: number): void {
    this.#queue.remove(job);
    this.dispatched(p, now);
    if (this.#vtc !== null) {
      this.#vtc.unqueued(job.payload.vtcUser, job);
      this.#vtcDispatched(p, job.payload.req, job.payload.vtcUser);
    }
    const waitMs = now - job.enqueuedAt;
    if (p.request.sessionKey !== null) this.sessions.setTime(p.request.sessionKey, 'wait', waitMs, true);
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
    for (const p of this.#pods) if (p !== undefined) limits.push({ pod: p.view.index, id: p.spec.id, limit: this.capacity.limit(p.view.index) });
    return {
      scheduler: this.scheduler, waiting: s.waiting, parked: s.parked, depthByLevel: this.#queue.depthByLevel(), promotions: s.promotions,
      rejected: s.rejected, timedOut: s.timedOut, released: this.#released, oldestWaitMs: this.#queue.oldestWait(now), longestWaitMs: this.#longestWait, limits
    };
  }

  /** A pod's configured limit on requests in flight (0 = none). */
  setMaxConcurrent (row: number, n: number): void {
    this.capacity.configure(row, n);
  }

  /** Table sizes and what their bounds dropped, for /metrics and reports. */
  tableStats (): Array<{ table: string; entries: number; dropped: number }> {
    const ix = this.index.stats();
    const ss = this.sessions.stats();
    const rs = this.ring.stats();
    return [
      { table: 'prefix_index', entries: ix.size, dropped: ix.evictions },
      { table: 'sessions', entries: ss.count, dropped: ss.evicted },
      { table: 'record_ring', entries: rs.size, dropped: rs.dropped },
      { table: 'users', entries: this.users.stats().users, dropped: this.users.stats().evicted }
    ];
  }

  /**
   * Merges a session's shared record (the SessionStore's, another replica's view) into the local session table,
   * creating the session if absent (TTL `ttlMs`). Attained service, critical path, last migration and context
   * tokens become max(local, shared): a store that lost its data never lowers a priority, and a context only
   * grows between turns. The host becomes `hostRow` when that row holds a ready pod (a row that is not ready,
   * or null, leaves the local binding as it is); the change is not a migration, as the session did not move.
   * Returns whether the local host is now `hostRow`.
   */
  adoptShared (sessionId: string, shared: SharedSessionFacts, now: number, ttlMs: number): boolean {
    const key = this.sessionKey(sessionId);
    this.sessions.upsert(key, now, ttlMs);
    const s = this.sessions.get(key);
    if (s === undefined) return false;
    const f: Partial<Omit<SessionRecord, 'key'>> = {};
    if (shared.attainedMs > s.attained) f.attained = shared.attainedMs;
    if (shared.criticalPathMs > s.criticalPath) f.criticalPath = shared.criticalPathMs;
    if (shared.lastMigration > s.lastMigration) f.lastMigration = shared.lastMigration;
    if (shared.contextTokens > s.contextTokens) f.contextTokens = Math.min(shared.contextTokens, 0x7FFFFFFF);
    const ready = shared.hostRow !== null && this.#pods[shared.hostRow]?.spec.state === 'ready';
    if (ready && s.host !== shared.hostRow) f.host = shared.hostRow as number;
    if (Object.keys(f).length > 0) this.sessions.update(key, f);
    return ready;
  }
}

/** A session's shared figures as RoutingHost.adoptShared takes them: the host by pod row here (null: none or not here). */
export interface SharedSessionFacts {
  hostRow: number | null;
  attainedMs: number;
  criticalPathMs: number;
  /** −Infinity if it never migrated. */
  lastMigration: number;
  contextTokens: number;
}
