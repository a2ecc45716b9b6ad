// The routing host: everything around the Router that the gateway and the discrete-event driver both need,
// written once (docs/architecture.md#the-routing-host). It keeps the pods (model, role, state, KV capacity) and
// picks the candidates of a request (candidate-filters.ts), holds admission control (admission-control.ts: when
// a request runs), turns session ids into keys, puts the prompt's block keys where the
// kernels read them, asks the Router, records each step of a request's life in the tables (dispatch, first
// token, end), expires idle sessions, takes engine load, and tells a retry from a migration. The adapters bring
// requests, a clock and engines: src/fleet/table-routing.ts (uWS + real engines) and
// src/eval/drivers/des.ts (virtual time + simulated engines). A number measured in the lab is then a number of
// the code that serves.
//
// Single-threaded: the thread that writes the load, session and pod tables (the gateway's main thread). The
// prefix index is read here and written by its own thread; routing decisions reach it as ring ops.
import type { AdmissionOptions, SchedulerKind } from './admission.js';
import { AdmissionControl } from './admission-control.js';
import type { KeySpan } from './block-keys.js';
import type { CapacityOptions } from './capacity.js';
import { SESSION_EXPIRY_BUDGET } from './defaults.js';
import { LoadTable } from './load-table.js';
import { PodTable } from './pod-table.js';
import { PodRows } from './pod-rows.js';
import { NoCandidateError, type ClusterView, type Policy, type PodView } from './policy.js';
import { kvRoom } from './policies/kv-room.js';
import { HostPods, type PodSpec } from './host-pods.js';
import { PrefixIndex } from './prefix-index.js';
import type { Region } from './region.js';
import { RingProducer } from './ring.js';
import { Router, type PrefixWalkStats, type RouteRequest, type Routed } from './router.js';
import { SessionKeys } from './session-key.js';
import { SessionTable, type SessionRecord } from './session-table.js';
import { UserUsage, type UserUsageOptions } from './user-usage.js';
import { RetentionTable, type PrefixWatch, type RetentionOptions } from './retention.js';
import { NEUTRAL_RANK, type AdmissionRank } from './engine-priority.js';

/** A pod as its adapter describes it. Its row in the shared tables is the adapter's (backend index, engine number). */
export type { PodSpec };

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
  user: string | null;
  /** Output tokens the client expects (an agent's expected_output_length hint); absent or null: max_tokens stands for it. */
  expectedOutputTokens?: number | null;
  /** When (the host's clock, ms) the client wants it served (an agent's deadline hint); absent or null: none. */
  deadlineAt?: number | null;
  /**
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
  /** Where admission ranked it (class, order): the engine priority it is sent with (engine-priority.ts). */
  readonly rank: AdmissionRank;
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
  /**
   * The turn ended in a tool call (finish_reason tool_calls, stop_reason tool_use, a Responses function_call;
   * in the lab: a turn its session follows with a tool delay): its prefix is retained on its pod (retention.ts).
   */
  toolCall?: boolean;
  /** How long the client asked the prefix kept (ms; cache_control's ttl, kv_retention_ttl_seconds), if it did. */
  retainTtlMs?: number | null;
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
  /** Retention of tool-call turns' prefixes (retention.ts defaults). */
  retention?: Partial<RetentionOptions>;
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


class HostPlacement implements Placement {
  sawFirstToken = false;
  /** VTC: the user charged for it, until it ends. */
  vtcUser: bigint | null = null;
  dispatchedAt = 0;
  /** Set by admission when it releases the request; a placement made outside admission (a retry) is neutral. */
  rank: AdmissionRank = NEUTRAL_RANK;
  /** The session's host before this decision (−1: none, or no session): what unroute() restores. */
  priorHost = -1;
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
  /** Which pod holds which row, and the rows being released (docs/architecture.md#pod-rows). */
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
  /** The pods as this thread sees them, and their candidates (host-pods.ts). */
  readonly #pods: HostPods;
  /** The placement whose keys are in the key area now (dispatched() rewrites them if another came between). */
  #keysOwner: HostPlacement | null = null;
  /** When requests run: the queue, the pods' capacity, the scheduler (admission-control.ts). */
  readonly admission: AdmissionControl;
  /** Prefixes kept for sessions in their tool gap (retention.ts): what policies read as `retention`. */
  readonly retention: RetentionTable;
  readonly #migrationStats: MigrationStats = { started: 0, done: 0, failed: 0, stayedOnTarget: 0, turnsToSource: 0, proactive: 0 };
  /** Each pod's loss epoch in the index at the last look for evicted retained prefixes, and a buffer for the next. */
  readonly #lossEpochs: Uint32Array;
  readonly #lossEpochsNow: Uint32Array;
  /** Whether the index shows `pod` holding block `key` in GPU memory (confirmed by the engine's KV events). */
  readonly #holdsBlock = (pod: number, key: bigint): boolean => {
    const pods = this.index.lookup(key, this.index.mask.confirmed);
    return pods !== null && pods.includes(pod);
  };
  readonly #lostBlocks = (pod: number): boolean => this.#lossEpochs[pod] !== this.#lossEpochsNow[pod];
  /** What kvRoom reads of a cluster view: the load and retention tables. */
  readonly #roomView: Pick<ClusterView, 'load' | 'retention'>;

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
    this.#pods = new HostPods(opts.blockSize, () => this.#router.policy.disaggregated === true);
    this.#expiryBudget = opts.sessionExpiryBudget ?? 8;
    this.#random = opts.random ?? Math.random;
    this.users = new UserUsage(opts.users);
    this.retention = new RetentionTable(opts.retention, this.#holdsBlock);
    this.#roomView = { load: this.load, retention: this.retention };
    this.#lossEpochs = new Uint32Array(this.index.maxPods);
    this.#lossEpochsNow = new Uint32Array(this.index.maxPods);
    this.index.lossEpochsInto(this.#lossEpochs);
    this.admission = new AdmissionControl(region, this, { scheduler: opts.scheduler, admission: opts.admission, capacity: opts.capacity });
    const assumed = this.ring.layout.opcodes.assumed;
    this.#router = new Router({ index: this.index, load: this.load, sessions: this.sessions, users: this.users, retention: this.retention }, opts.policy, {
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
    // A request's session (and a sub-agent's parent) is keyed by admission and again by route: the last two are kept.
    if (sessionId === this.#lastIds[0]) return this.#lastKeys[0];
    if (sessionId === this.#lastIds[1]) return this.#lastKeys[1];
    const k = this.#keys.key(sessionId);
    this.#lastIds[1] = this.#lastIds[0];
    this.#lastKeys[1] = this.#lastKeys[0];
    this.#lastIds[0] = sessionId;
    this.#lastKeys[0] = k;
    return k;
  }

  readonly #lastIds: [string | null, string | null] = [null, null];
  readonly #lastKeys: [bigint, bigint] = [0n, 0n];

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
    const kv = this.#pods.set(row, spec).view.kvCapacityBlocks;
    const prev = this.pods.get(row);
    if (prev && prev.state === spec.state && prev.role === spec.role && prev.kvBlocks === kv) return;
    this.pods.set(row, { state: spec.state, role: spec.role, blockSize: this.blockSize, kvBlocks: kv, model: 0 });
    // A pod that went down or away no longer holds what the index assumed: forget it (the index's writer clears it).
    if (spec.state !== 'ready' && prev?.state === 'ready') {
      this.retention.podLeft(row);
      this.ring.push(this.ring.layout.opcodes.forgetPod, row, 0n, 0n, 0n);
      // Jobs parked on it are routed again to the pods that serve.
      this.admission.podUnavailable(row);
    }
  }

  /**
   * The pod leaves: nothing new is routed to it, and the sessions bound to it are unbound now (not counted
   * as migrations), so a turn that arrives while it drains is placed as a new session would be.
   */
  retirePod (row: number): void {
    const p = this.#pods.get(row);
    if (p === undefined) throw new RangeError(`no pod on row ${row}`);
    if (p.spec.state !== 'draining') this.setPod(row, { ...p.spec, state: 'draining' });
    this.rows.retire(row);
    this.sessions.unbindPod(row);
    this.retention.podLeft(row);
    // Jobs waiting for this pod are routed again, to the pods that stay.
    this.admission.podUnavailable(row);
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
    this.admission.podLeft(row);
    this.#pods.remove(row);
  }

  /** The index holds nothing of the released row any more: it is free for the next pod. */
  podPurged (row: number): void {
    this.rows.release(row);
  }

  /** An engine's own figures, as of `now` (the time of the scrape that read them). */
  engineLoad (row: number, r: EngineReport, now: number): void {
    const p = this.#pods.get(row);
    if (p === undefined) return; // a scrape that raced the pod's release
    this.load.setEngine(row, { running: r.running, waiting: r.waiting, kvUsage: r.kvUsage, time: now });
    const blocks = r.numGpuBlocks ?? 0;
    if (blocks > 0 && blocks !== p.engineBlocks) {
      p.engineBlocks = blocks;
      this.setPod(row, p.spec);
    }
    this.admission.engineReport(row, r.running, r.waiting, r.kvUsage, now);
  }

  /** The pod as policies see it (null for a row never set). */
  pod (row: number): PodView | null {
    return this.#pods.get(row)?.view ?? null;
  }

  /** No pod is a candidate: the error names the filter that left none. */
  noCandidate (model: string, exclude: ReadonlySet<number>): NoCandidateError {
    return this.#pods.noCandidate(model, exclude);
  }

  /** Whether any pod could take a request for `model` beyond those in `exclude`. */
  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean {
    return this.#pods.hasCandidate(model, exclude);
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
    const candidates = this.#pods.candidates(req.model, exclude);
    const request: RouteRequest = {
      model: req.model,
      sessionKey: req.sessionId === null ? null : this.sessionKey(req.sessionId),
      parentSessionKey: req.parentSessionId === null ? null : this.sessionKey(req.parentSessionId),
      promptTokens: req.promptTokens,
      keys: this.#span(req.blockKeys),
      blockSize: this.blockSize,
      expectedOutputTokens: req.expectedOutputTokens ?? req.maxTokens,
      userKey: req.user === null ? null : this.userKey(req.user)
    };
    const callPriority = this.criticalPathOf(request.sessionKey, request.parentSessionKey);
    const routed = this.#router.route(request, candidates, now, this.#random(), attempt > 0);
    const priorHost = this.#router.priorHost;
    // The session's turn came: its gap is learnt and its retained prefix is in use again (decided on first).
    if (request.sessionKey !== null) this.retention.resume(request.sessionKey, now);
    if (this.#expiryBudget > 0) this.sessions.expire(now, this.#expiryBudget);
    if (routed.reason === 'migration-in-flight') this.#migrationStats.turnsToSource++;
    if (routed.migrateFrom !== undefined && request.sessionKey !== null) {
      // In flight until migrationEnded: a turn that comes meanwhile goes to the source (router.ts).
      this.sessions.setCount(request.sessionKey, 'migratingFrom', routed.migrateFrom);
      this.#migrationStats.started++;
    }
    const p = new HostPlacement(routed, request, req.blockKeys, now, attempt, this.rows.lease(routed.pod), callPriority);
    p.priorHost = priorHost;
    this.#keysOwner = p;
    return p;
  }

  /**
   * Whether the placement is new work (its session was not bound to its pod, and it is not a move) that would
   * have to evict retained prefixes there (the pod's KV room after running work, pending prefill and retained
   * prefixes, kv-room.ts, below the request's need) while another candidate that `canTake` (admission: a seat
   * now) has room for it. Always false for a policy that does not keep retained prefixes (Policy.keepsRetained):
   * the baselines place as they place; and for a decision that says it does not (Decision.keepsRetained).
   */
  evictsRetained (placement: Placement, canTake: (row: number) => boolean = () => true): boolean {
    const p = placement as HostPlacement;
    if (this.#router.policy.keepsRetained !== true || p.routed.keepsRetained === false || p.priorHost === p.pod || p.migrateFrom !== null || !this.#current(p)) return false;
    const req = p.request;
    const context = req.sessionKey === null ? 0 : this.sessions.get(req.sessionKey)?.contextTokens ?? 0;
    const need = Math.ceil((Math.max(context, req.promptTokens) + (req.expectedOutputTokens ?? 0)) / this.blockSize);
    const pod = this.#pods.get(p.pod)?.view;
    if (pod === undefined || this.#kvRoom(pod) >= need) return false;
    for (const row of this.#pods.rows(req.model, NO_EXCLUSIONS)) {
      const other = this.#pods.get(row)?.view;
      if (row !== p.pod && other !== undefined && this.#kvRoom(other) >= need && canTake(row)) return true;
    }
    return false;
  }

  /** The placement will not be sent (admission routes it again): its session's binding is as before the decision. */
  unroute (placement: Placement): void {
    const p = placement as HostPlacement;
    const key = p.request.sessionKey;
    if (key === null || !this.#current(p)) return;
    const s = this.sessions.get(key);
    if (s !== undefined && s.host === p.pod && s.inFlight === 0) this.sessions.setCount(key, 'host', p.priorHost);
  }

  /** kv-room.ts's room of a pod, from the host's own tables (kvRoom reads only the load and retention of a view). */
  #kvRoom (pod: PodView): number {
    return kvRoom(pod, this.#roomView as ClusterView);
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
    const src = this.#pods.get(from);
    if (!this.#current(p) || !this.#pods.serves(src, p.request.model, NO_EXCLUSIONS) || s === undefined) {
      this.#migrationStats.stayedOnTarget++;
      return null;
    }
    this.finished(p, null, now);
    this.sessions.setCount(key, 'host', from);
    if (s.migrations > 0) this.sessions.setCount(key, 'migrations', s.migrations - 1);
    const request = { ...p.request, keys: this.#span(p.keys) };
    const routed = this.#router.route(request, [src.view], now, this.#random(), false, { pod: from, reason: 'migration-failed' });
    const q = new HostPlacement(routed, request, p.keys, now, p.attempt, this.rows.lease(from), p.callPriority);
    q.rank = p.rank;
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
    if (this.#pods.get(to)?.spec.state !== 'ready') return false;
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
    this.admission.released(_now);
  }

  /** The request ended, any outcome. Service = time from dispatch to end (the session's attained service). */
  finished (placement: Placement, out: RequestOutcome | null, now: number): void {
    const p = placement as HostPlacement;
    const contextTokens = out !== null && out.promptTokens !== null ? out.promptTokens + (out.completionTokens ?? 0) : null;
    // The user's tokens count whatever became of the pod's row; an engine that reported no usage counts the prompt.
    if (out !== null) this.#router.usage(p.request, out.promptTokens ?? p.request.promptTokens, out.completionTokens ?? 0, now);
    this.admission.ended(p, out?.completionTokens ?? 0);
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
      // A turn that ended in a tool call: its prefix is wanted back on this pod within the session's gap.
      if (out?.toolCall === true && p.sawFirstToken && s !== undefined && s.host === p.pod && s.inFlight === 0) {
        this.turnEndedInToolCall(key, p.pod, contextTokens ?? p.request.promptTokens, now, out.retainTtlMs ?? null, p.keys);
      }
    }
    this.admission.released(now);
  }

  /**
   * A session's turn on `pod` ended in a tool call with `contextTokens` of context: retains its prefix there
   * for `ttlMs` (a client's hint), else for the session's learnt tool gap (retention.ts). finished() calls it
   * for an outcome with `toolCall`; a host that learns of the tool call or a hint later may call it itself.
   * `keys`: the prompt's block keys, whose blocks the pod holds are watched for an eviction (retention.ts).
   */
  turnEndedInToolCall (key: bigint, pod: number, contextTokens: number, now: number, ttlMs: number | null = null, keys: BigUint64Array | null = null): void {
    const view = this.#pods.get(pod)?.view;
    if (view === undefined) return;
    this.retention.retain(key, pod, Math.ceil(contextTokens / this.blockSize), now, view.kvCapacityBlocks, ttlMs, keys === null ? null : this.#watchOf(keys, pod));
  }

  /**
   * The blocks of a prompt to watch on `pod`: its first and the deepest the index shows the pod holding now
   * (held), else its last (pending: the engine's events of its blocks may come after the turn's end).
   */
  #watchOf (keys: BigUint64Array, pod: number): PrefixWatch | null {
    if (keys.length === 0 || pod >= this.index.maxPods) return null;
    const span = this.#span(keys);
    this.#keysOwner = null; // the key area holds these keys now: dispatched() writes its own back
    this.index.longestPrefix(span, this.index.mask.confirmed);
    const held = this.index.counts[pod];
    return { head: keys[0], tail: keys[(held > 0 ? held : span.count) - 1], held: held > 0 };
  }

  /**
   * The host's upkeep of retention: looks for retained prefixes the engines evicted (on pods whose index entries
   * lost blocks since the last look), then ends records past their TTL. Returns the records that expired.
   */
  expireRetention (now: number): number {
    this.index.lossEpochsInto(this.#lossEpochsNow);
    this.retention.checkEvictions(now, this.#lostBlocks);
    this.#lossEpochs.set(this.#lossEpochsNow);
    return this.retention.expire(now);
  }

  /**
   * Keeps a session alive and bound for an explicit context (src/gateway/contexts.ts): creates it or marks it
   * active with `ttlMs` as its idle TTL, and binds it to `pod` if it has no host (new, evicted, or unbound when
   * its pod left); a host a policy chose since is kept. `pod` < 0 binds nothing.
   */
  holdSession (sessionId: string, pod: number, ttlMs: number, now: number): void {
    const key = this.sessionKey(sessionId);
    this.sessions.upsert(key, now, ttlMs);
    if (pod >= 0 && this.#pods.get(pod) !== undefined) {
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
   * `assumed` recorded from routing decisions (given `now`, the routing clock, only those within the TTL). Counts
   * of leading blocks (longestPrefix), each ≤ keys.length.
   */
  prefixOf (keys: BigUint64Array, pod: number, now?: number): { gpu: number; engine: number; assumed: number; total: number } {
    if (keys.length === 0 || pod < 0 || pod >= this.index.maxPods) return { gpu: 0, engine: 0, assumed: 0, total: keys.length };
    const span = this.#span(keys);
    this.#keysOwner = null; // the key area now holds these keys: dispatched() writes its own back
    const m = this.index.mask;
    this.index.longestPrefix(span, m.confirmed);
    const gpu = this.index.counts[pod];
    this.index.longestPrefix(span, m.confirmed | m.offloaded);
    const engine = this.index.counts[pod];
    this.index.longestPrefix(span, m.assumed, now);
    const assumed = this.index.counts[pod];
    return { gpu, engine, assumed, total: keys.length };
  }

  /** What the session table says of a session, for the admin endpoint; null if unknown. */
  session (sessionId: string): SessionSummary | null {
    const s = this.sessions.get(this.sessionKey(sessionId));
    if (!s) return null;
    const host = s.host >= 0 ? this.#pods.get(s.host)?.spec.id ?? null : null;
    return {
      host, inFlight: s.inFlight, contextTokens: s.contextTokens, attainedServiceMs: s.attained, criticalPathMs: s.criticalPath,
      waitMs: s.wait, migrations: s.migrations, lastActivity: s.lastActivity
    };
  }

  // ---- What admission control (admission-control.ts, `host.admission`) reads of the host ----

  /** The critical path a call of this session starts from: the session's, or for a new sub-agent its parent's. */
  criticalPathOf (key: bigint | null, parent: bigint | null): number {
    if (key === null) return 0;
    const s = this.sessions.get(key);
    if (s && (s.criticalPath > 0 || s.attained > 0)) return s.criticalPath;
    if (parent === null) return 0;
    return this.sessions.get(parent)?.criticalPath ?? 0;
  }

  get scheduler (): SchedulerKind {
    return this.admission.scheduler;
  }

  candidateRows (model: string, exclude: ReadonlySet<number>): Iterable<number> {
    return this.#pods.rows(model, exclude);
  }

  podIds (): Iterable<{ row: number; id: string }> {
    return this.#pods.ids();
  }

  /** Table sizes and what their bounds dropped, for /metrics and reports. */
  /**
   * The upkeep tick's share of session expiry (the session table's writer, on its timer): looks at up to
   * SESSION_EXPIRY_BUDGET slots and removes idle sessions past their TTL, so the table's count follows the live
   * sessions when few requests come (routing also expires a few slots per request). Returns how many it removed.
   */
  expireSessions (now: number): number {
    return this.sessions.expire(now, SESSION_EXPIRY_BUDGET);
  }

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
    const ready = shared.hostRow !== null && this.#pods.get(shared.hostRow)?.spec.state === 'ready';
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
