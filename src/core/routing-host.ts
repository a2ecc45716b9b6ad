// The routing host: everything around the Router that the gateway and the discrete-event driver both need,
// written once (ARCHITECTURE.md "The routing host"). It keeps the pods (model, role, state, KV capacity) and
// picks the candidates of a request, turns session ids into keys, puts the prompt's block keys where the
// kernels read them, asks the Router, records each step of a request's life in the tables (dispatch, first
// token, end), expires idle sessions, takes engine load, and tells a retry from a migration. The adapters bring
// requests, a clock and engines: src/gateway/table-routing.ts (uWS + real engines) and
// src/eval/drivers/des.ts (virtual time + simulated engines). A number measured in the lab is then a number of
// the code that serves.
//
// Single-threaded: the thread that writes the load, session and pod tables (the gateway's main thread). The
// prefix index is read here and written by its own thread; routing decisions reach it as ring ops.
import type { KeySpan } from './block-keys.js';
import { LoadTable } from './load-table.js';
import { PodTable, type PodRole, type PodState } from './pod-table.js';
import { PodRows } from './pod-rows.js';
import { NoCandidateError, type Policy, type PodView } from './policy.js';
import { PrefixIndex } from './prefix-index.js';
import type { Region } from './region.js';
import { RingProducer } from './ring.js';
import { Router, type RouteRequest, type Routed } from './router.js';
import { SessionKeys } from './session-key.js';
import { SessionTable } from './session-table.js';

/** Assumed presence lives this long when the index learns only from routing (approximate mode). */
export const APPROXIMATE_ASSUMED_TTL_MS = 20 * 60_000;
/** ... and this long when engines publish KV events (precise mode): long enough to bridge the events' delay. */
export const PRECISE_ASSUMED_TTL_MS = 5000;

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
  /** Session slots examined for expiry per routed request, so idle sessions go without a sweep (default 8). */
  sessionExpiryBudget?: number;
  /** A uniform draw in [0, 1) for policies that randomise (Math.random in the gateway, seeded in the lab). */
  random?: () => number;
}

export interface SessionSummary {
  host: string | null;
  inFlight: number;
  contextTokens: number;
  attainedServiceMs: number;
  migrations: number;
  lastActivity: number;
}

interface HostPod {
  spec: PodSpec;
  view: PodView;
  /** From the engine's metrics; 0 until it reports one. */
  engineBlocks: number;
}

class HostPlacement implements Placement {
  sawFirstToken = false;
  dispatchedAt = 0;
  constructor (readonly routed: Routed, readonly request: RouteRequest, readonly keys: BigUint64Array, readonly decidedAt: number, readonly attempt: number,
    /** The pod row's lease when decided: a row released and leased again since is another pod's. */
    readonly lease: number) {}
  get pod (): number { return this.routed.pod; }
  get reason (): string { return this.routed.reason; }
  get matchedBlocks (): number { return this.routed.matchedBlocks; }
  get expectedPrefill (): number { return this.routed.expectedPrefill; }
}

export class RoutingHost {
  readonly load: LoadTable;
  readonly sessions: SessionTable;
  readonly pods: PodTable;
  readonly index: PrefixIndex;
  readonly ring: RingProducer;
  /** Which pod holds which row, and the rows being released (ARCHITECTURE.md "Pod rows"). */
  readonly rows: PodRows;
  readonly blockSize: number;
  readonly #router: Router;
  readonly #keys: SessionKeys;
  readonly #region: Region;
  readonly #keysPtr: number;
  readonly #keysCap: number;
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

  constructor (region: Region, opts: RoutingHostOptions) {
    this.#region = region;
    this.blockSize = opts.blockSize;
    const scratch = region.claimScratch();
    // One scratch area, cut in two: session-id bytes first, then block keys.
    const idBytes = 4096;
    this.#keys = new SessionKeys(region, { ptr: scratch.ptr, bytes: idBytes });
    this.#keysPtr = scratch.ptr + idBytes;
    this.#keysCap = Math.floor((scratch.bytes - idBytes) / 8);
    this.load = new LoadTable(region);
    this.sessions = new SessionTable(region);
    this.pods = new PodTable(region);
    this.index = new PrefixIndex(region);
    this.ring = new RingProducer(region);
    this.rows = new PodRows(this.pods);
    this.#expiryBudget = opts.sessionExpiryBudget ?? 8;
    this.#random = opts.random ?? Math.random;
    const assumed = this.ring.layout.opcodes.assumed;
    this.#router = new Router({ index: this.index, load: this.load, sessions: this.sessions }, opts.policy, {
      sessionTtlMs: opts.sessionTtlMs,
      // The index's writer applies these; a full ring drops them and counts it (a missed hint, never an error).
      record: (pod, keys, now) => { this.ring.pushKeysAt(assumed, pod, keys.ptr, keys.count, now, 0, this.rows.lease(pod)); }
    });
  }

  get policy (): Policy {
    return this.#router.policy;
  }

  sessionKey (sessionId: string): bigint {
    return this.#keys.key(sessionId);
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
    this.#pods[row] = { spec, engineBlocks, view: { index: row, id: spec.id, role: spec.role, blockSize: this.blockSize, kvCapacityBlocks: kv } };
    this.#candidates.clear();
    const prev = this.pods.get(row);
    if (prev && prev.state === spec.state && prev.role === spec.role && prev.kvBlocks === kv) return;
    this.pods.set(row, { state: spec.state, role: spec.role, blockSize: this.blockSize, kvBlocks: kv, model: 0 });
    // A pod that went down or away no longer holds what the index assumed: forget it (the index's writer clears it).
    if (spec.state !== 'ready' && prev?.state === 'ready') this.ring.push(this.ring.layout.opcodes.forgetPod, row, 0n, 0n, 0n);
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
    const p = this.#pods[row];
    const blocks = r.numGpuBlocks ?? 0;
    if (p !== undefined && blocks > 0 && blocks !== p.engineBlocks) {
      p.engineBlocks = blocks;
      this.setPod(row, p.spec);
    }
  }

  /** The pod as policies see it (null for a row never set). */
  pod (row: number): PodView | null {
    return this.#pods[row]?.view ?? null;
  }

  #serves (p: HostPod | undefined, model: string, exclude: ReadonlySet<number>): p is HostPod {
    // Prefill-only pods take no whole requests: the P/D connector sends them their half.
    return p !== undefined && p.spec.state === 'ready' && p.spec.role !== 'prefill' && p.spec.models.has(model) && !exclude.has(p.view.index);
  }

  /** Whether any pod could take a request for `model` beyond those in `exclude`. */
  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean {
    for (const p of this.#pods) if (this.#serves(p, model, exclude)) return true;
    return false;
  }

  /** Puts the block keys where the kernels read them; a prompt longer than the area is matched on its head. */
  #span (keys: BigUint64Array): KeySpan {
    const n = Math.min(keys.length, this.#keysCap);
    new BigUint64Array(this.#region.memory.buffer, this.#keysPtr, n).set(n === keys.length ? keys : keys.subarray(0, n));
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
      for (const p of this.#pods) if (this.#serves(p, req.model, exclude)) list.push(p.view);
      if (list.length === 0) throw new NoCandidateError();
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
      expectedOutputTokens: req.maxTokens
    };
    const routed = this.#router.route(request, candidates, now, this.#random(), attempt > 0);
    if (this.#expiryBudget > 0) this.sessions.expire(now, this.#expiryBudget);
    const p = new HostPlacement(routed, request, req.blockKeys, now, attempt, this.rows.lease(routed.pod));
    this.#keysOwner = p;
    return p;
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
    if (this.#current(p)) this.#router.firstToken(p.routed);
  }

  /** The request ended, any outcome. Service = time from dispatch to end (the session's attained service). */
  finished (placement: Placement, out: RequestOutcome | null, now: number): void {
    const p = placement as HostPlacement;
    const contextTokens = out !== null && out.promptTokens !== null ? out.promptTokens + (out.completionTokens ?? 0) : null;
    if (!this.#current(p)) return;
    this.#router.finished(p.routed, p.request, { sawFirstToken: p.sawFirstToken, contextTokens, serviceMs: now - p.dispatchedAt }, now);
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
    return { host, inFlight: s.inFlight, contextTokens: s.contextTokens, attainedServiceMs: s.attained, migrations: s.migrations, lastActivity: s.lastActivity };
  }

  /** Table sizes and what their bounds dropped, for /metrics and reports. */
  tableStats (): Array<{ table: string; entries: number; dropped: number }> {
    const ix = this.index.stats();
    const ss = this.sessions.stats();
    const rs = this.ring.stats();
    return [
      { table: 'prefix_index', entries: ix.size, dropped: ix.evictions },
      { table: 'sessions', entries: ss.count, dropped: ss.evicted },
      { table: 'record_ring', entries: rs.size, dropped: rs.dropped }
    ];
  }
}
