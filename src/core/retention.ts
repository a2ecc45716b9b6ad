// Retention (issue 31 part 3, in the form the routing core needs): a turn that ended in a tool call is a
// promise that the session comes back with the same prefix plus the tool's result, so the host keeps a record
// that the prefix is wanted on its engine for the session's tool gap. Policies read it (RetentionView): the
// session's next turn goes back to that engine unless a move's cost says otherwise, the migration planner does
// not move a session in its gap off a cool engine, and new work is not placed where it would have to evict
// retained prefixes while another engine has room. Nothing is pinned in the engine: a record is the router's
// promise to itself about where it sends work.
//
// The TTL of a record: a hint (cache_control, kv_retention_ttl_seconds: the gateway feeds it as `ttlMs`, already
// bounded at the door by the config's maxRetentionTtlMs, the one bound of a hint), else the session's learnt tool
// gap (an EWMA of the time from a tool-call turn's end to the next turn's arrival), else `defaultGapMs`; times
// `gapFactor`, within [minTtlMs, maxTtlMs] (the bounds of a learnt TTL only: a client that asks for 1 h gets 1 h).
// Bounded per engine: the retained blocks of one engine stay ≤ maxShare of its KV capacity; beyond it the oldest
// records there go first.
//
// Evictions: the engine may still evict a retained prefix (another client's work, a policy that does not read
// retention). The host watches each record's prefix in the prefix index, which the engines' KV events keep
// (precise mode): the first and the deepest block of the prompt the pod held when the record was made. The index
// is written by the kv-events thread and read here (its one-writer rule holds): when a watched block leaves the
// pod's confirmed presence while the record is live, the prefix was evicted: counted
// (ear_retained_prefix_evictions_total) and the record ends (its blocks are free again, not kept). An engine
// evicts the least recently freed block first and frees a request's blocks tail first, so the deepest block goes
// first; the first block goes when the whole prefix did. A block between them evicted alone is seen when one of
// the two goes. Without KV events (approximate mode) nothing is confirmed and nothing is counted.
//
// Single writer, the host's thread (the gateway's main thread, the lab's only one). The records live here, not
// in the shared region: the migration thread does not read them (issue 31: it may not move a session in its gap
// off a cool engine, and it moves only idle sessions off hot ones, so it needs no record to keep that rule).

export interface RetentionOptions {
  /** Share of an engine's KV (0..1) that retained prefixes may hold; beyond it the oldest are dropped. */
  maxShare: number;
  /** Gap assumed for a session whose gap is not learnt yet (ms). */
  defaultGapMs: number;
  /** The TTL is the learnt gap times this (a gap is log-normal: the mean undershoots half of them). */
  gapFactor: number;
  /** Bounds of a learnt TTL (ms); a hinted one is bounded at the door (config maxRetentionTtlMs). */
  minTtlMs: number;
  maxTtlMs: number;
  /** Weight of the newest gap in the session's learnt gap (EWMA). */
  gapAlpha: number;
  /** Sessions whose learnt gap is remembered; the oldest go first. */
  maxLearnt: number;
}

export const RETENTION_DEFAULTS: Readonly<RetentionOptions> = Object.freeze({
  maxShare: 0.5,
  defaultGapMs: 5000,
  gapFactor: 2,
  minTtlMs: 1000,
  maxTtlMs: 5 * 60_000,
  gapAlpha: 0.3,
  maxLearnt: 1 << 16
});

/** The blocks of a retained prefix the host watches in the prefix index: its first and its deepest held. */
export interface PrefixWatch {
  readonly head: bigint;
  readonly tail: bigint;
  /** Whether the index showed the pod holding both when the record was made (else: pending, until it does). */
  readonly held: boolean;
}

/** Whether the pod holds the block `key` in GPU memory, as the prefix index says (the engine's events). */
export type HoldsBlock = (pod: number, key: bigint) => boolean;

/** A watch pending (its blocks not yet seen held: the engine's events come after the turn's end) gives up after this (ms). */
export const WATCH_PENDING_MS = 10_000;

/** One retained prefix: the session's KV on `pod`, promised until `until` (ms). */
export interface Retained {
  readonly pod: number;
  readonly blocks: number;
  readonly since: number;
  readonly until: number;
}

/** What a policy sees of retention (read-only, valid during the decision). */
export interface RetentionView {
  /** Blocks retained on the pod for sessions in their tool gap. */
  blocks (pod: number): number;
  /** The session's retained prefix, or null if none is live. */
  of (sessionKey: bigint): Retained | null;
}

export interface RetentionStats {
  retained: number;
  /** Records that reached their TTL, records dropped beyond an engine's share, and records ended by the next turn. */
  expired: number;
  overShare: number;
  resumed: number;
  /** Live records whose prefix the engine evicted, as its KV events told the index (ear_retained_prefix_evictions_total). */
  evictions: number;
  /** Live records now and their blocks; of them, those whose blocks the index shows held and watched for an eviction. */
  live: number;
  liveBlocks: number;
  watched: number;
}

const WATCH_NONE = 0;
const WATCH_PENDING = 1;
const WATCH_HELD = 2;

interface Entry extends Retained {
  readonly key: bigint;
  readonly head: bigint;
  readonly tail: bigint;
  /** WATCH_NONE, WATCH_PENDING or WATCH_HELD. */
  watch: number;
}

export class RetentionTable implements RetentionView {
  readonly opts: RetentionOptions;
  readonly #byKey = new Map<bigint, Entry>();
  /** Per pod, its records in the order they were made (oldest first: a renewal re-inserts). */
  readonly #byPod = new Map<number, Map<bigint, Entry>>();
  readonly #podBlocks = new Map<number, number>();
  /** Per session: its learnt gap (ms) and when its last tool-call turn ended (-1 once the next turn came). */
  readonly #learnt = new Map<bigint, { gapMs: number; endedAt: number }>();
  readonly #stats = { retained: 0, expired: 0, overShare: 0, resumed: 0, evictions: 0 };
  /** The index's answer for a watched block; null: nothing is watched. */
  readonly #holds: HoldsBlock | null;

  constructor (opts: Partial<RetentionOptions> = {}, holds: HoldsBlock | null = null) {
    this.#holds = holds;
    const o = { ...RETENTION_DEFAULTS, ...opts };
    if (!(o.maxShare >= 0 && o.maxShare <= 1)) throw new RangeError(`retention maxShare must be in [0, 1], got ${o.maxShare}`);
    if (!(o.minTtlMs >= 0 && o.maxTtlMs >= o.minTtlMs)) throw new RangeError(`retention TTL bounds must be 0 ≤ minTtlMs ≤ maxTtlMs, got ${o.minTtlMs}, ${o.maxTtlMs}`);
    if (!(o.gapAlpha > 0 && o.gapAlpha <= 1)) throw new RangeError(`retention gapAlpha must be in (0, 1], got ${o.gapAlpha}`);
    if (!(o.gapFactor > 0 && o.defaultGapMs >= 0 && Number.isInteger(o.maxLearnt) && o.maxLearnt >= 1)) throw new RangeError('retention gapFactor > 0, defaultGapMs ≥ 0 and maxLearnt ≥ 1 required');
    this.opts = o;
  }

  /** The session's learnt tool gap (ms), or null if none was seen. */
  learntGap (key: bigint): number | null {
    const g = this.#learnt.get(key)?.gapMs ?? -1;
    return g < 0 ? null : g;
  }

  /** The TTL a record made now gets: the hint as given, else the learnt gap (or the default) × gapFactor, within the bounds. */
  ttlFor (key: bigint, hintMs: number | null): number {
    const o = this.opts;
    if (hintMs !== null) return Math.max(0, hintMs);
    return Math.min(o.maxTtlMs, Math.max(o.minTtlMs, (this.learntGap(key) ?? o.defaultGapMs) * o.gapFactor));
  }

  /**
   * A turn of the session ended in a tool call on `pod`, its KV `blocks` long: retained until now + TTL
   * (`ttlMs`, a hint, else learnt). `capacityBlocks` (0: unknown, no bound) bounds the pod's retained blocks.
   * `watch`: the prefix's blocks to watch for its eviction (none: not watched).
   */
  retain (key: bigint, pod: number, blocks: number, now: number, capacityBlocks: number, ttlMs: number | null = null, watch: PrefixWatch | null = null): Retained {
    this.#drop(key);
    const e: Entry = {
      key, pod, blocks: Math.max(0, Math.ceil(blocks)), since: now, until: now + this.ttlFor(key, ttlMs),
      head: watch?.head ?? 0n, tail: watch?.tail ?? 0n, watch: watch === null || this.#holds === null ? WATCH_NONE : watch.held ? WATCH_HELD : WATCH_PENDING
    };
    this.#byKey.set(key, e);
    let m = this.#byPod.get(pod);
    if (m === undefined) this.#byPod.set(pod, (m = new Map()));
    m.set(key, e);
    this.#podBlocks.set(pod, (this.#podBlocks.get(pod) ?? 0) + e.blocks);
    this.#stats.retained++;
    this.#noteEnd(key, now);
    if (capacityBlocks > 0) {
      const bound = this.opts.maxShare * capacityBlocks;
      // Oldest first beyond the bound; the newest record itself goes too if it alone is over.
      for (const old of m.values()) {
        if ((this.#podBlocks.get(pod) ?? 0) <= bound) break;
        this.#drop(old.key);
        this.#stats.overShare++;
      }
    }
    return e;
  }

  /**
   * The session's next turn came at `now`: its gap is learnt (from the end of its last tool-call turn) and its
   * record, if any, ends (the turn's own KV is in use now, counted by the engine).
   */
  resume (key: bigint, now: number): void {
    const l = this.#learnt.get(key);
    if (l !== undefined && l.endedAt >= 0) {
      const gap = Math.max(0, now - l.endedAt);
      l.gapMs = l.gapMs < 0 ? gap : l.gapMs + this.opts.gapAlpha * (gap - l.gapMs);
      l.endedAt = -1;
    }
    const e = this.#byKey.get(key);
    if (e === undefined) return;
    // Its last look: a prefix evicted since the last check was evicted while retained.
    if (this.#evicted(e)) this.#stats.evictions++;
    this.#drop(key);
    this.#stats.resumed++;
  }

  /** Ends records past their TTL (the host's upkeep), each looked at once more for an eviction first. */
  expire (now: number): number {
    let n = 0;
    for (const e of this.#byKey.values()) {
      if (e.until > now) continue;
      if (this.#evicted(e)) this.#stats.evictions++;
      this.#drop(e.key);
      n++;
    }
    this.#stats.expired += n;
    return n;
  }

  /**
   * Looks for evicted prefixes (the host's upkeep): pending watches whose blocks the index now shows held become
   * held (or give up after WATCH_PENDING_MS); a held one on a pod that lost blocks since the last look
   * (`lostBlocks`, the index's loss epochs) whose head or tail is gone is an eviction: counted, and the record
   * ends. Returns the evictions found.
   */
  checkEvictions (now: number, lostBlocks: (pod: number) => boolean): number {
    const holds = this.#holds;
    if (holds === null) return 0;
    let n = 0;
    for (const e of this.#byKey.values()) {
      if (e.watch === WATCH_PENDING) {
        if (holds(e.pod, e.head) && holds(e.pod, e.tail)) e.watch = WATCH_HELD;
        else if (now - e.since > WATCH_PENDING_MS) e.watch = WATCH_NONE;
      } else if (e.watch === WATCH_HELD && lostBlocks(e.pod) && this.#evicted(e)) {
        this.#drop(e.key);
        n++;
      }
    }
    this.#stats.evictions += n;
    return n;
  }

  /** The pod left: its records go (nothing there can be kept). */
  podLeft (pod: number): void {
    const m = this.#byPod.get(pod);
    if (m === undefined) return;
    for (const key of [...m.keys()]) this.#drop(key);
  }

  /** The session forgot its host (moved, unbound): its record on another pod goes. */
  forget (key: bigint): void {
    this.#drop(key);
  }

  blocks (pod: number): number {
    return this.#podBlocks.get(pod) ?? 0;
  }

  of (key: bigint): Retained | null {
    return this.#byKey.get(key) ?? null;
  }

  stats (): RetentionStats {
    let liveBlocks = 0;
    for (const b of this.#podBlocks.values()) liveBlocks += b;
    let watched = 0;
    for (const e of this.#byKey.values()) if (e.watch === WATCH_HELD) watched++;
    return { ...this.#stats, live: this.#byKey.size, liveBlocks, watched };
  }

  #noteEnd (key: bigint, now: number): void {
    let l = this.#learnt.get(key);
    if (l === undefined) {
      if (this.#learnt.size >= this.opts.maxLearnt) this.#learnt.delete(this.#learnt.keys().next().value as bigint);
      l = { gapMs: -1, endedAt: now };
      this.#learnt.set(key, l);
    } else {
      // Most recent last: the bound drops the sessions not heard of for longest.
      this.#learnt.delete(key);
      this.#learnt.set(key, l);
      l.endedAt = now;
    }
  }

  /** A held watch whose head or tail the pod no longer holds. */
  #evicted (e: Entry): boolean {
    return e.watch === WATCH_HELD && this.#holds !== null && !(this.#holds(e.pod, e.tail) && this.#holds(e.pod, e.head));
  }

  #drop (key: bigint): boolean {
    const e = this.#byKey.get(key);
    if (e === undefined) return false;
    this.#byKey.delete(key);
    this.#byPod.get(e.pod)?.delete(key);
    const left = (this.#podBlocks.get(e.pod) ?? 0) - e.blocks;
    if (left > 0) this.#podBlocks.set(e.pod, left);
    else this.#podBlocks.delete(e.pod);
    return true;
  }
}
