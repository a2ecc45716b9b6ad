// The routing core's table side: match the prompt's block keys against the prefix index, give the policy a
// read-only view of the tables, and record its decision back in the tables (docs/architecture.md#policies).
// Only the routing host (routing-host.ts) calls it; the host runs on the thread that writes
// the load and session tables (the gateway's main thread; the discrete-event driver's only thread).
import type { KeySpan } from './block-keys.js';
import type { LoadTable } from './load-table.js';
import type { PrefixIndex } from './prefix-index.js';
import type { SessionTable } from './session-table.js';
import type { ClusterView, Decision, LoadView, Policy, PodView, PrefixMatch, RequestFeatures, SessionInfo, SessionView, UserView } from './policy.js';
import { decisionsOf, loadViewOf, sessionInfoOf, sessionViewOf } from './table-views.js';
import type { UserUsage } from './user-usage.js';
import type { RetentionView } from './retention.js';
import { RecentMax } from './recent-max.js';
import { LiveContexts } from './live-contexts.js';

export interface RouteRequest {
  model: string;
  sessionKey: bigint | null;
  parentSessionKey: bigint | null;
  promptTokens: number;
  /** The prompt's block keys, in shared memory. */
  keys: KeySpan;
  blockSize: number;
  expectedOutputTokens: number | null;
  /** 64-bit hash of the user, or null when unknown. */
  userKey: bigint | null;
}

export interface Routed extends Decision {
  /** Leading blocks of the prompt the index says the chosen pod holds. */
  readonly matchedBlocks: number;
  /** Prompt tokens the chosen pod is expected to compute: its pending prefill until the first token. */
  readonly expectedPrefill: number;
}

export interface RouterTables {
  index: PrefixIndex;
  load: LoadTable;
  sessions: SessionTable;
  /** Per-user weighted tokens in a sliding window; without it, policies see no `users`. */
  users?: UserUsage;
  /** Prefixes retained for sessions in their tool gap; without it, policies see no `retention`. */
  retention?: RetentionView;
}

export interface RouterOptions {
  /** Idle time after which a session is forgotten (ms). */
  sessionTtlMs: number;
  /**
   * Records prompt keys as assumed on the chosen pod (a ring op in the gateway, a direct insert in the driver):
   * all of them, or for a session's turn only those its pod does not hold yet (see dispatched).
   */
  record: (pod: number, keys: KeySpan, now: number) => void;
  /** Sessions whose last walk is remembered for the next turn's (PrefixHint); default 65536, oldest dropped first. */
  maxHints?: number;
  /** A session seen within this long (ms) counts as live in ClusterView.liveContextTokens; default 60 s. */
  liveWindowMs?: number;
}

/**
 * What a session's last turn learnt of the index, so the next turn costs what is new in its prompt rather than
 * the whole prompt: its walk found `pod` holding the first `count` blocks (the last one `lastKey`) after reading
 * the pod's loss epoch `epoch`; and it last recorded every key of its prompt on `fullPod` at `fullAt`, and before
 * that on `prevPod` at `prevAt`. A session that moved is held by two pods, its old host's blocks living until they
 * expire or are evicted: the walk found the pod holding most after `pod` holding `count2` blocks (`pod2`, `lastKey2`,
 * `epoch2`; −1, 0: none).
 */
interface PrefixHint {
  pod: number;
  count: number;
  lastKey: bigint;
  epoch: number;
  fullPod: number;
  fullAt: number;
  prevPod: number;
  prevAt: number;
  pod2: number;
  count2: number;
  lastKey2: bigint;
  epoch2: number;
}

/** How route() matched prompts against the index: whole walks, and walks that skipped a session's known prefix. */
export interface PrefixWalkStats {
  full: number;
  shortcut: number;
  /** Of the shortcuts, those taken although the hint's pod had lost blocks since (its loss ring said which). */
  shortcutAfterLoss: number;
  /** Keys recorded on pods, and of them those of full records (the rest are a session's new blocks). */
  recordedKeys: number;
  fullRecords: number;
  /** Of the shortcuts, those told of a second pod's blocks too (a moved session's other host). */
  secondHint: number;
}

/** A hint with nothing learnt of the index yet (a walk fills pod and count): its last full record on `fullPod` at `fullAt`. */
function newHint (pod: number, count: number, fullPod: number, fullAt: number): PrefixHint {
  return { pod, count, lastKey: 0n, epoch: 0, fullPod, fullAt, prevPod: -1, prevAt: 0, pod2: -1, count2: 0, lastKey2: 0n, epoch2: 0 };
}

export class Router {
  readonly #t: RouterTables;
  readonly #opts: RouterOptions;
  readonly #loadView: LoadView;
  readonly #sessionView: SessionView;
  /** The index's counts as route() found them, reused by every call (route is synchronous and not reentrant). */
  readonly #counts: Uint32Array;
  /** Whether #counts may hold a count (a request without keys then clears it: a fill costs, a check does not). */
  #countsSet = false;
  /** The session of the decision under way, as read at its start (null between decisions). */
  #own: { key: bigint; info: SessionInfo | null } | null = null;
  /** The session's host when the last route() began (−1: none, no session, or a forced decision). */
  #priorHost = -1;
  /** Decisions that placed a request with no live binding (ClusterView.placements). */
  #placements = 0;
  /** The largest session context seen within the last one to two session TTLs, in tokens (ClusterView.maxContextTokens). */
  readonly #maxContext: RecentMax;
  /** The context of the sessions seen within the live window (ClusterView.liveContextTokens). */
  readonly #live: LiveContexts;
  readonly #hints = new Map<bigint, PrefixHint>();
  readonly #maxHints: number;
  /** The pods' loss epochs as read before the current walk (#readEpochs). */
  readonly #epochs: Uint32Array;
  readonly #walks: PrefixWalkStats = { full: 0, shortcut: 0, shortcutAfterLoss: 0, recordedKeys: 0, fullRecords: 0, secondHint: 0 };

  constructor (tables: RouterTables, readonly policy: Policy, opts: RouterOptions) {
    this.#t = tables;
    this.#opts = opts;
    this.#counts = new Uint32Array(tables.index.counts.length);
    this.#epochs = new Uint32Array(tables.index.maxPods);
    this.#maxHints = opts.maxHints ?? 65536;
    this.#maxContext = new RecentMax(opts.sessionTtlMs);
    this.#live = new LiveContexts(opts.liveWindowMs ?? 60_000);
    this.#loadView = loadViewOf(tables.load);
    const stored = sessionViewOf(tables.sessions);
    // The request's own session is read once per decision (route() needs it first) and served from that read.
    this.#sessionView = { get: (key) => (this.#own !== null && this.#own.key === key ? this.#own.info : stored.get(key)) };
  }

  /**
   * Decides where the request goes among `candidates` and records the decision (not yet the dispatch). A
   * `retry` (the same request again after a pod failed it) rebinds the session without counting a migration:
   * the session did not move by choice, and a migration resets the cooldown that migration policies read.
   */
  route (req: RouteRequest, candidates: readonly PodView[], now: number, random: number, retry = false, forced: Decision | null = null): Routed {
    const { index, load, sessions } = this.#t;
    // A snapshot: the offload tier's lookup below reuses the index's output area. Copied into one array kept
    // for the purpose: a fresh slice() a request was an off-heap allocation, most of route()'s own cost.
    const counts = this.#counts;
    const hint = req.sessionKey === null || req.keys.count === 0 ? undefined : this.#hints.get(req.sessionKey);
    if (req.keys.count > 0) {
      if (req.sessionKey !== null) this.#readEpochs(candidates, hint);
      const from = hint === undefined ? 0 : this.#heldFrom(hint, req.keys, now);
      const from2 = hint === undefined || hint.pod2 < 0 ? 0 : this.#heldFrom2(hint, req.keys, now);
      if (hint !== undefined && (from > 0 || from2 > 0)) {
        index.longestPrefixFrom(req.keys, index.mask.all, hint.pod, from, now, from2 > 0 ? hint.pod2 : -1, from2);
        this.#walks.shortcut++;
        if (from2 > 0) this.#walks.secondHint++;
      } else {
        index.longestPrefix(req.keys, index.mask.all, now);
        this.#walks.full++;
      }
      counts.set(index.counts);
      this.#countsSet = true;
    } else if (this.#countsSet) {
      // Only the copy: the index's own counts are in shared memory, where a fill cost ~0.7 µs a request.
      counts.fill(0);
      this.#countsSet = false;
    }
    let onGpu: Uint32Array | null = null;
    const keys = req.keys;
    const u64 = index.region.u64;
    const prefix: PrefixMatch = {
      totalBlocks: keys.count,
      blockSize: req.blockSize,
      matched: (p) => counts[p],
      blockKey: (i) => {
        if (!(i >= 0 && i < keys.count)) throw new RangeError(`block ${i} is outside the prompt's ${keys.count} blocks`);
        return u64[(keys.ptr >>> 3) + i];
      },
      // Matched blocks held only on an offload tier: the match over every kind minus the match in GPU memory
      // (confirmed or assumed). Looked up only for the policies that ask.
      offloadedBlocks: (p) => {
        if (keys.count === 0) return 0;
        if (onGpu === null) {
          index.longestPrefix(keys, index.mask.confirmed | index.mask.assumed, now);
          onGpu = index.counts.slice();
        }
        return counts[p] - onGpu[p];
      }
    };
    const decisions = decisionsOf(load, candidates);
    if (req.sessionKey !== null) {
      this.#maxContext.observe(req.promptTokens, now);
      this.#live.observe(req.sessionKey, req.promptTokens, now);
    }
    const cluster = new RouteCluster(candidates, this.#loadView, this.#sessionView, decisions, this.#placements, this.#t.users, now, this.#t.retention,
      this.#maxContext.value(now), this.#live.tokens(now));
    const features: RequestFeatures = {
      model: req.model,
      sessionKey: req.sessionKey,
      parentSessionKey: req.parentSessionKey,
      promptTokens: req.promptTokens,
      prefix,
      expectedOutputTokens: req.expectedOutputTokens,
      userKey: req.userKey,
      random
    };
    // The one rule for a turn that arrives while its session migrates: it goes to the source, which still
    // holds the session's KV (the export holds it until the target pulls), and the binding stays on the target.
    // Nothing waits, and the turn cannot race the transfer for the target's KV.
    let moving = -1;
    let d: Decision;
    this.#priorHost = -1;
    if (forced !== null) d = forced;
    else {
      let bound = false;
      if (req.sessionKey !== null) {
        const s = sessions.get(req.sessionKey);
        this.#own = { key: req.sessionKey, info: s === undefined ? null : sessionInfoOf(s) };
        this.#priorHost = s === undefined ? -1 : s.host;
        if (!retry && s !== undefined && s.migratingFrom >= 0 && candidates.some((p) => p.index === s.migratingFrom)) moving = s.migratingFrom;
        bound = s !== undefined && s.host >= 0 && candidates.some((p) => p.index === s.host);
      }
      if (!bound) this.#placements++;
      try {
        d = moving >= 0 ? { pod: moving, reason: 'migration-in-flight' } : this.policy.route(features, cluster, now);
      } finally {
        this.#own = null;
      }
    }
    const matchedBlocks = counts[d.pod];
    if (req.sessionKey !== null && req.keys.count > 0) this.#learn(req.sessionKey, hint, req.keys, candidates, d.pod);
    load.countDecision(d.pod);
    if (req.sessionKey !== null) {
      sessions.upsert(req.sessionKey, now, this.#opts.sessionTtlMs);
      if (forced !== null || moving >= 0) {
        // The caller binds (a failed transfer's revert), or the binding stays on the migration's target.
      } else if (retry) sessions.setCount(req.sessionKey, 'host', d.pod);
      else sessions.setHost(req.sessionKey, d.pod, now);
    }
    const expectedPrefill = Math.max(0, req.promptTokens - matchedBlocks * req.blockSize);
    // Field by field: an object spread here cost ~0.9 µs a request, the largest item of a short request's route.
    const r: { -readonly [K in keyof Routed]: Routed[K] } = { pod: d.pod, reason: d.reason, matchedBlocks, expectedPrefill };
    if (d.migrateFrom !== undefined) r.migrateFrom = d.migrateFrom;
    if (d.prefillOn !== undefined) r.prefillOn = d.prefillOn;
    if (d.keepsRetained === false) r.keepsRetained = false;
    return r;
  }

  /** The session's host when the last route() began, before its decision bound it (−1: none, or no session). */
  get priorHost (): number {
    return this.#priorHost;
  }

  /** The request was sent to the pod: count it in flight and its prompt as pending prefill, and teach the index. */
  dispatched (r: Routed, req: RouteRequest, now: number): void {
    const { load, sessions } = this.#t;
    load.addInFlight(r.pod, 1);
    load.addPendingPrefill(r.pod, r.expectedPrefill);
    if (req.sessionKey !== null) sessions.addInFlight(req.sessionKey, 1, now);
    if (req.keys.count > 0) this.#record(r, req, now);
  }

  /**
   * A session's turn records only the blocks its pod did not hold at the decision (its new ones): the index's
   * writer then does per turn what is new, not the whole prompt again. Assumed presence expires (the writer's
   * TTL), so every key is recorded again once the last full record on this pod is a quarter TTL old; with no
   * TTL known yet, or without a session, every key is recorded each time.
   */
  #record (r: Routed, req: RouteRequest, now: number): void {
    let from = 0;
    if (req.sessionKey !== null) {
      const h = this.#hints.get(req.sessionKey);
      const ttl = this.#t.index.assumedTtlMs();
      if (h !== undefined && ttl > 0 && h.fullPod === r.pod && now - h.fullAt < ttl / 4) from = Math.min(r.matchedBlocks, req.keys.count);
      else if (h !== undefined) {
        // A move: the old host's record is what its blocks live from (#heldFrom2).
        if (h.fullPod !== r.pod) {
          h.prevPod = h.fullPod;
          h.prevAt = h.fullAt;
        }
        h.fullPod = r.pod;
        h.fullAt = now;
      } else {
        this.#remember(req.sessionKey, newHint(-1, 0, r.pod, now));
      }
    }
    if (from === 0) this.#walks.fullRecords++;
    this.#walks.recordedKeys += req.keys.count - from;
    if (from < req.keys.count) this.#opts.record(r.pod, from === 0 ? req.keys : { ptr: req.keys.ptr + 8 * from, count: req.keys.count - from }, now);
  }

  /**
   * The loss epochs the walk's hint, and the hint learnt from it, rest on: the candidates' (#learn picks among them)
   * and the hinted pod's. Each an atomic load, before the walk: a plain copy of the epochs may on a weakly ordered
   * CPU (arm64) read an epoch later than the walk's view, and a hint whose epoch is too new trusts blocks the pod
   * lost during the walk. Any other entry of #epochs is only ever older than the pod's epoch, which is safe.
   */
  #readEpochs (candidates: readonly PodView[], hint: PrefixHint | undefined): void {
    const { index } = this.#t;
    const epochs = this.#epochs;
    for (const p of candidates) epochs[p.index] = index.lossEpoch(p.index);
    if (hint !== undefined) {
      epochs[hint.pod] = index.lossEpoch(hint.pod);
      if (hint.pod2 >= 0) epochs[hint.pod2] = index.lossEpoch(hint.pod2);
    }
  }

  /**
   * How many of this prompt's first blocks the hint vouches its pod holds: none unless the prompt starts with the
   * hint's blocks; all of them if the pod lost nothing since the hint's walk; else up to the first of them the pod
   * lost (its loss ring, PrefixIndex.heldSince). On an index at its capacity CLOCK evicts a key with nearly every
   * insert, so a pod's epoch moves between any two turns; the ring keeps those losses of other sessions' blocks
   * from costing this session a walk of its whole prompt (bench/RESULTS.md, "At the index's capacity").
   *
   * The walk does not look up the blocks the hint vouches for, so it cannot drop assumed presence that is past the
   * writer's TTL but not yet swept (a sweep of the index takes ~51 s at 1 Mi keys). So the hint stands only while
   * the session's own records keep those blocks within the TTL: on the pod of its last full record (every key of a
   * prompt; later turns record their new blocks), until a TTL after it, less the TTL/64 by which a re-record may
   * leave an entry's time behind (asm/prefix-index.ts, unchanged). Past that the walk is whole and checks each block.
   */
  #heldFrom (h: PrefixHint, keys: KeySpan, now: number): number {
    if (!(h.count > 0 && h.count <= keys.count && this.#t.index.region.u64[(keys.ptr >>> 3) + h.count - 1] === h.lastKey)) return 0;
    const ttl = this.#t.index.assumedTtlMs();
    if (ttl > 0 && (h.fullPod !== h.pod || now - h.fullAt >= ttl - ttl / 64)) return 0;
    if (this.#epochs[h.pod] === h.epoch) return h.count;
    const held = this.#t.index.heldSince(keys, h.pod, h.count, h.epoch);
    if (held > 0) this.#walks.shortcutAfterLoss++;
    return held;
  }

  /**
   * How many of the prompt's first blocks the hint's other pod (`pod2`, a moved session's other host) holds for sure,
   * as #heldFrom tells it of `pod`: only a pod this session last recorded its whole prompt on (`fullPod`, or the
   * `prevPod` before it), until a TTL after that record, whose assumed times it stands on.
   */
  #heldFrom2 (h: PrefixHint, keys: KeySpan, now: number): number {
    if (!(h.count2 > 0 && h.count2 <= keys.count && this.#t.index.region.u64[(keys.ptr >>> 3) + h.count2 - 1] === h.lastKey2)) return 0;
    const ttl = this.#t.index.assumedTtlMs();
    const own = h.pod2 === h.fullPod ? h.fullAt : h.pod2 === h.prevPod ? h.prevAt : -Infinity;
    if (ttl > 0 && !(now - own < ttl - ttl / 64)) return 0;
    if (this.#epochs[h.pod2] === h.epoch2) return h.count2;
    return this.#t.index.heldSince(keys, h.pod2, h.count2, h.epoch2);
  }

  /**
   * Remembers this walk for the session's next turn: the candidate holding most of the prompt (the chosen pod on a
   * tie), and the one holding most after it (a moved session's other host).
   */
  #learn (key: bigint, h: PrefixHint | undefined, keys: KeySpan, candidates: readonly PodView[], chosen: number): void {
    const counts = this.#counts;
    let pod = chosen;
    for (const p of candidates) if (counts[p.index] > counts[pod]) pod = p.index;
    // The walk takes a second pod only on an index of one pod group: past that, none is learnt.
    let pod2 = -1;
    if (this.#t.index.takesSecondHint) {
      for (const p of candidates) if (p.index !== pod && counts[p.index] > 0 && (pod2 < 0 || counts[p.index] > counts[pod2])) pod2 = p.index;
    }
    // A pod holding the whole prompt (a retry, a replay, two sessions of one text) holds its last block too, which
    // ends in the template's generation prompt: the next turn's prompt has its reply there instead, so a hint on
    // that block never holds and every later turn would walk whole. The hint stops a block short of the prompt.
    const count = Math.min(counts[pod], keys.count - 1);
    if (h === undefined) {
      if (count === 0) return;
      h = this.#remember(key, newHint(-1, 0, -1, 0));
    }
    const u64 = this.#t.index.region.u64;
    h.pod = pod;
    h.count = count;
    h.epoch = this.#epochs[pod];
    h.lastKey = count > 0 ? u64[(keys.ptr >>> 3) + count - 1] : 0n;
    const count2 = pod2 < 0 ? 0 : Math.min(counts[pod2], keys.count - 1);
    h.pod2 = count2 > 0 ? pod2 : -1;
    h.count2 = count2;
    h.epoch2 = count2 > 0 ? this.#epochs[pod2] : 0;
    h.lastKey2 = count2 > 0 ? u64[(keys.ptr >>> 3) + count2 - 1] : 0n;
  }

  #remember (key: bigint, h: PrefixHint): PrefixHint {
    if (this.#hints.size >= this.#maxHints) this.#hints.delete(this.#hints.keys().next().value as bigint);
    this.#hints.set(key, h);
    return h;
  }

  /** How prompts were matched and recorded so far. */
  walkStats (): PrefixWalkStats {
    return { ...this.#walks };
  }

  /** The first token came back: the prompt is computed. */
  firstToken (r: Routed): void {
    this.#t.load.addPendingPrefill(r.pod, -r.expectedPrefill);
  }

  /**
   * The request ended. `sawFirstToken` false means its prefill never completed (failure, abort): the pending
   * prefill is released here instead. `serviceMs` is the time it held the engine (its attained service).
   */
  finished (r: Routed, req: RouteRequest, out: { sawFirstToken: boolean; contextTokens: number | null; serviceMs: number }, now: number): void {
    const { load, sessions } = this.#t;
    load.addInFlight(r.pod, -1);
    if (!out.sawFirstToken) load.addPendingPrefill(r.pod, -r.expectedPrefill);
    if (req.sessionKey !== null && sessions.addInFlight(req.sessionKey, -1, now) >= 0) {
      sessions.setTime(req.sessionKey, 'attained', out.serviceMs, true);
      if (out.contextTokens !== null) sessions.setCount(req.sessionKey, 'contextTokens', out.contextTokens);
    }
    if (req.sessionKey !== null && out.contextTokens !== null) {
      this.#maxContext.observe(out.contextTokens, now);
      this.#live.observe(req.sessionKey, out.contextTokens, now);
    }
  }

  /** The request's tokens count against its user (weighted by the table) from `now`. */
  usage (req: RouteRequest, promptTokens: number, completionTokens: number, now: number): void {
    if (req.userKey !== null) this.#t.users?.record(req.userKey, promptTokens, completionTokens, now);
  }
}

/**
 * One decision's ClusterView. The user window is read when a policy first asks for it: only the fairness
 * policies do, and reading it for every request cost the others ~0.5 µs.
 */
class RouteCluster implements ClusterView {
  #users: UserView | undefined | null = null;

  constructor (readonly pods: readonly PodView[], readonly load: LoadView, readonly sessions: SessionView, readonly decisions: number,
    readonly placements: number, readonly usage: UserUsage | undefined, readonly now: number, readonly retention: RetentionView | undefined,
    readonly maxContextTokens: number, readonly liveContextTokens: number) {}

  /** The user window as of the decision (undefined when the tables keep none). */
  get users (): UserView | undefined {
    if (this.#users === null) {
      const users = this.usage;
      const now = this.now;
      if (users === undefined) this.#users = undefined;
      else {
        const { active, min, max } = users.range(now);
        this.#users = { tokens: (key) => users.tokens(key, now), active, min, max };
      }
    }
    return this.#users;
  }
}
