// Per-user token usage, kept by the routing host for the policies that are fair across users (vtc-basic) and
// for the VTC scheduler (Sheng et al., "Fairness in Serving Large Language Models", OSDI'24). Policies are
// pure, so what they need to know of a user's past lives here, on the host's thread (the gateway's main
// thread; the discrete-event driver's only thread). Plain JS state, not shared memory: no other thread reads it.
//
// Two things per user, under one 64-bit user key (the host hashes the user string, as it hashes session ids):
//
// 1. Weighted tokens in a sliding window: a request that finished adds
//      input tokens · inputWeight + output tokens · outputWeight        (defaults 1 and 2, as AIBrix)
//    to the bucket of the time it finished. Time is cut into buckets of windowMs / buckets ms aligned on 0
//    (bucket number e = ⌊now / bucketMs⌋); the window at `now` is the last `buckets` buckets, the current one
//    included, so it covers between windowMs − bucketMs and windowMs of the past. Each user keeps a ring of
//    `buckets` sums and the number of the bucket it last wrote, so a lookup drops what left the window in
//    O(buckets). Because buckets are aligned, a user's total changes only when it records, or at a bucket
//    boundary (a bucket leaves the window): never between two requests in the same bucket.
//
//    min / max over active users (those with tokens > 0 in the window): no scan per request. At the first
//    call in a new bucket, one pass over the table brings every total to the new bucket and recomputes the
//    range exactly (O(users · buckets), once per bucketMs: 65 536 users × 8 buckets is ~1 ms every 37.5 s with
//    the defaults). Between boundaries, record() keeps the range up to date in O(1): a user's total only
//    grows, so `max` stays exact and a user that becomes active lowers `min` exactly; but when the user that
//    held the minimum grows, `min` is not raised until the next boundary. The bound: `min` never exceeds
//    the true minimum and equals it at each boundary; `max` is exact, except that evicting (see below) the
//    user holding it leaves it an upper bound until the next boundary. `active` counts the same way (exact,
//    but an eviction between boundaries is subtracted at once).
//
// 2. VTC's virtual token counters. counter(u) is the weighted service u has been charged (charge(u, w) adds
//    w, the scheduler's call as it serves u's tokens). The paper's rule for a user that arrives with nothing
//    queued is lift(u): u becomes active and its counter is raised to the least counter among active users
//    (or, with none active, to the counter of the last user that went idle), so that coming back after a
//    quiet spell earns no credit. idle(u) is the scheduler's call when u's queue empties. The least counter
//    over active users is kept in an indexed binary min-heap: lift, idle and charge are O(log users).
//    Counters are not windowed (the paper's are not either).
//
// Bound: at most maxUsers users (default 65 536). A new user beyond that evicts the least recently used one
// (record, charge, lift and idle use a user; tokens() and counter() only read), whatever it holds, an active
// VTC user included (it leaves the heap); evictions are counted in stats().evicted. Time must not go
// backwards; a `now` older than the newest seen is taken as the newest.

export interface UserUsageOptions {
  /** Length of the sliding window (ms); default 5 minutes, AIBrix's 5 × 1 minute. */
  windowMs?: number;
  /** Buckets the window is cut into; default 5 (AIBrix: one bucket per time unit, 5 units). */
  buckets?: number;
  /** Weight of an input (prompt) token; default 1. */
  inputWeight?: number;
  /** Weight of an output (completion) token; default 2. */
  outputWeight?: number;
  /** Users kept at most; default 65 536. */
  maxUsers?: number;
}

export const USER_USAGE_DEFAULTS: Readonly<Required<UserUsageOptions>> = Object.freeze({
  windowMs: 5 * 60_000,
  buckets: 5,
  inputWeight: 1,
  outputWeight: 2,
  maxUsers: 65_536
});

/** The window's range over active users, as of one call. */
export interface UserRange {
  /** Users with tokens > 0 in the window. */
  readonly active: number;
  /** Least weighted tokens of an active user (a lower bound between bucket boundaries); 0 with none active. */
  readonly min: number;
  /** Most weighted tokens of an active user; 0 with none active. */
  readonly max: number;
}

interface Entry {
  readonly key: bigint;
  /** Weighted tokens per bucket, at index (bucket number mod buckets). */
  readonly sums: Float64Array;
  /** The bucket number of the user's last record (−Infinity: never). */
  last: number;
  /** Tokens in the window as of bucket `at`. */
  total: number;
  at: number;
  /** VTC virtual token counter. */
  counter: number;
  /** Position in the heap of active VTC users, −1 when not active. */
  heapPos: number;
}

export class UserUsage {
  readonly windowMs: number;
  readonly buckets: number;
  readonly bucketMs: number;
  readonly inputWeight: number;
  readonly outputWeight: number;
  readonly maxUsers: number;
  /** Insertion order is recency: a used entry is deleted and set again, so the first is the least recent. */
  readonly #users = new Map<bigint, Entry>();
  /** The bucket number of the last call (time never goes back). */
  #epoch = -Infinity;
  #active = 0;
  #min = 0;
  #max = 0;
  #evicted = 0;
  /** Active VTC users, a binary min-heap on counter. */
  readonly #heap: Entry[] = [];
  /** The counter of the last user that went idle: where lift() starts when no user is active. */
  #lastIdleCounter = 0;

  constructor (opts: UserUsageOptions = {}) {
    const o = { ...USER_USAGE_DEFAULTS, ...opts };
    if (!(Number.isFinite(o.windowMs) && o.windowMs > 0)) throw new RangeError(`user usage: windowMs must be a number > 0, got ${o.windowMs}`);
    if (!(Number.isInteger(o.buckets) && o.buckets >= 1 && o.buckets <= 1024)) throw new RangeError(`user usage: buckets must be an integer in [1, 1024], got ${o.buckets}`);
    for (const k of ['inputWeight', 'outputWeight'] as const) {
      if (!(Number.isFinite(o[k]) && o[k] >= 0)) throw new RangeError(`user usage: ${k} must be a number ≥ 0, got ${o[k]}`);
    }
    if (!(Number.isInteger(o.maxUsers) && o.maxUsers >= 1)) throw new RangeError(`user usage: maxUsers must be an integer ≥ 1, got ${o.maxUsers}`);
    this.windowMs = o.windowMs;
    this.buckets = o.buckets;
    this.bucketMs = o.windowMs / o.buckets;
    this.inputWeight = o.inputWeight;
    this.outputWeight = o.outputWeight;
    this.maxUsers = o.maxUsers;
  }

  /** Weighted tokens of a request: input · inputWeight + output · outputWeight (negatives count as 0). */
  weigh (inputTokens: number, outputTokens: number): number {
    return Math.max(0, inputTokens) * this.inputWeight + Math.max(0, outputTokens) * this.outputWeight;
  }

  /** A request of `userKey` finished at `now` with these tokens: they count in the window from now on. */
  record (userKey: bigint, inputTokens: number, outputTokens: number, now: number): void {
    const w = this.weigh(inputTokens, outputTokens);
    const e = this.#advance(now);
    const u = this.#use(userKey);
    const before = this.#bring(u, e);
    if (u.last < e) {
      // Buckets between the last record and now hold tokens of buckets that left the window: clear them.
      const from = Math.max(u.last + 1, e - this.buckets + 1);
      for (let b = from; b <= e; b++) u.sums[this.#slot(b)] = 0;
      u.last = e;
    }
    if (w === 0) return;
    u.sums[this.#slot(e)] += w;
    u.total = before + w;
    if (before === 0) {
      this.#active++;
      this.#min = this.#active === 1 ? u.total : Math.min(this.#min, u.total);
    }
    if (u.total > this.#max) this.#max = u.total;
  }

  /** Weighted tokens of `userKey` in the window at `now` (0 for an unknown user). */
  tokens (userKey: bigint, now: number): number {
    const e = this.#advance(now);
    const u = this.#users.get(userKey);
    return u === undefined ? 0 : this.#bring(u, e);
  }

  /** Active users and the least and most tokens among them, at `now`. */
  range (now: number): UserRange {
    this.#advance(now);
    return { active: this.#active, min: this.#min, max: this.#max };
  }

  /** VTC: the user's virtual token counter (0 for an unknown user). */
  counter (userKey: bigint): number {
    return this.#users.get(userKey)?.counter ?? 0;
  }

  /** VTC: adds `weightedTokens` (≥ 0) of service to the user's counter; returns the new counter. */
  charge (userKey: bigint, weightedTokens: number): number {
    if (!(weightedTokens >= 0)) throw new RangeError(`user usage: charge must be ≥ 0, got ${weightedTokens}`);
    const u = this.#use(userKey);
    u.counter += weightedTokens;
    if (u.heapPos >= 0) this.#down(u.heapPos);
    return u.counter;
  }

  /**
   * VTC: the user becomes active (its first request is queued). Its counter is raised to the least counter
   * of the active users, or with none active to that of the last user that went idle. Already active: no
   * change. Returns the counter.
   */
  lift (userKey: bigint): number {
    const u = this.#use(userKey);
    if (u.heapPos >= 0) return u.counter;
    const floor = this.#heap.length > 0 ? this.#heap[0].counter : this.#lastIdleCounter;
    if (u.counter < floor) u.counter = floor;
    u.heapPos = this.#heap.length;
    this.#heap.push(u);
    this.#up(u.heapPos);
    return u.counter;
  }

  /** VTC: the user has nothing queued any more. */
  idle (userKey: bigint): void {
    const u = this.#users.get(userKey);
    if (u === undefined || u.heapPos < 0) return;
    this.#lastIdleCounter = u.counter;
    this.#heapRemove(u);
    this.#touch(u);
  }

  /** VTC: the least counter among active users, or null with none active. */
  minCounter (): number | null {
    return this.#heap.length > 0 ? this.#heap[0].counter : null;
  }

  /** VTC: the least counter of the active users (where a user lifted now would start). */
  leastActiveCounter (): number {
    return this.#heap.length > 0 ? this.#heap[0].counter : this.#lastIdleCounter;
  }

  /** Whether the user is active for VTC (lifted and not idle since). */
  isActive (userKey: bigint): boolean {
    return (this.#users.get(userKey)?.heapPos ?? -1) >= 0;
  }

  stats (): { users: number; active: number; vtcActive: number; evicted: number } {
    return { users: this.#users.size, active: this.#active, vtcActive: this.#heap.length, evicted: this.#evicted };
  }

  /** The bucket number of `now`; at the first call in a new bucket, every total and the range are brought to it. */
  #advance (now: number): number {
    const e = Math.floor(now / this.bucketMs);
    if (e <= this.#epoch) return this.#epoch;
    this.#epoch = e;
    let active = 0;
    let min = Infinity;
    let max = 0;
    for (const u of this.#users.values()) {
      const t = this.#bring(u, e);
      if (t > 0) {
        active++;
        if (t < min) min = t;
        if (t > max) max = t;
      }
    }
    this.#active = active;
    this.#min = active > 0 ? min : 0;
    this.#max = max;
    return e;
  }

  /** The user's tokens in the window of bucket `e` (≥ its last record's), cached on the entry. */
  #bring (u: Entry, e: number): number {
    if (u.at === e) return u.total;
    let t = 0;
    // Buckets last − buckets + 1 … last hold what the user recorded; those older than e − buckets + 1 left.
    for (let b = Math.max(u.last - this.buckets + 1, e - this.buckets + 1); b <= u.last; b++) t += u.sums[this.#slot(b)];
    u.total = t;
    u.at = e;
    return t;
  }

  /** The ring index of bucket number `b` (negative times included). */
  #slot (b: number): number {
    return ((b % this.buckets) + this.buckets) % this.buckets;
  }

  /** The user's entry, made most recent; a new one evicts the least recent when the table is full. */
  #use (key: bigint): Entry {
    let u = this.#users.get(key);
    if (u !== undefined) {
      this.#touch(u);
      return u;
    }
    if (this.#users.size >= this.maxUsers) this.#evictOldest();
    u = { key, sums: new Float64Array(this.buckets), last: -Infinity, total: 0, at: this.#epoch, counter: 0, heapPos: -1 };
    this.#users.set(key, u);
    return u;
  }

  #touch (u: Entry): void {
    this.#users.delete(u.key);
    this.#users.set(u.key, u);
  }

  #evictOldest (): void {
    const first = this.#users.values().next();
    if (first.done === true) return;
    const u = first.value;
    this.#users.delete(u.key);
    this.#evicted++;
    if (this.#bring(u, this.#epoch) > 0) this.#active--; // min / max stay bounds until the next boundary
    if (this.#active === 0) this.#min = this.#max = 0;
    if (u.heapPos >= 0) this.#heapRemove(u);
  }

  #heapRemove (u: Entry): void {
    const h = this.#heap;
    const i = u.heapPos;
    const last = h.pop()!;
    u.heapPos = -1;
    if (last === u) return;
    h[i] = last;
    last.heapPos = i;
    this.#up(i);
    this.#down(last.heapPos);
  }

  #up (i: number): void {
    const h = this.#heap;
    const x = h[i];
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent].counter <= x.counter) break;
      h[i] = h[parent];
      h[i].heapPos = i;
      i = parent;
    }
    h[i] = x;
    x.heapPos = i;
  }

  #down (i: number): void {
    const h = this.#heap;
    const n = h.length;
    const x = h[i];
    for (;;) {
      let c = 2 * i + 1;
      if (c >= n) break;
      if (c + 1 < n && h[c + 1].counter < h[c].counter) c++;
      if (h[c].counter >= x.counter) break;
      h[i] = h[c];
      h[i].heapPos = i;
      i = c;
    }
    h[i] = x;
    x.heapPos = i;
  }
}
