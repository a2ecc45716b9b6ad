// Keeps the prefix index, on its one writing thread: applies the record ops other threads push on the ring
// (a routing decision's prompt keys, assumed on the chosen pod), and ages assumed entries out a slice at a time
// so no single call sweeps the whole table. Engine events (precise mode) are applied by the same thread.
import type { PrefixIndexWriter } from '../core/prefix-index.js';
import type { RingConsumer } from '../core/ring.js';

export interface FeederOptions {
  /** Assumed presence is dropped this long after it was recorded: 20 min approximate, 5 s precise. */
  assumedTtlMs: number;
  /** Slots examined per expiry call. */
  expiryBudget: number;
}

export interface FeederStats {
  /** Ring ops applied to the index. */
  applied: number;
  /** Ring ops dropped because their lease was not their pod row's lease any more (the backend had left). */
  stale: number;
  /** Assumed entries aged out. */
  expired: number;
  /** forgetPod ops applied. */
  forgotten: number;
  /** Rows purged (every entry of the pod, in every kind) after their backend left. */
  purgedPods: number;
  /** Sweeps of the index those purges took (rows released together share one). */
  purgeSweeps: number;
}

export class IndexFeeder {
  readonly stats: FeederStats = { applied: 0, stale: 0, expired: 0, forgotten: 0, purgedPods: 0, purgeSweeps: 0 };
  readonly #w: PrefixIndexWriter;
  readonly #ring: RingConsumer;
  readonly #opts: FeederOptions;

  constructor (writer: PrefixIndexWriter, ring: RingConsumer, opts: FeederOptions) {
    this.#w = writer;
    this.#ring = ring;
    this.#opts = opts;
  }

  /** Precise mode switches on or off with the backend list (a reload). */
  setAssumedTtl (ms: number): void {
    if (!(Number.isInteger(ms) && ms >= 0 && ms < 2 ** 31)) throw new RangeError(`assumed TTL must be an integer in [0, 2^31) ms, got ${ms}`);
    this.#opts.assumedTtlMs = ms;
  }

  /**
   * Takes up to `limit` ring ops in one kernel call and applies those stamped with their pod row's lease now
   * (assumed: add the pod; touch: refresh a key the index still has; forgetPod: clear the pod); the others are
   * dropped and counted in `stale`. Returns how many ops it took off the ring.
   */
  pump (limit = 1 << 16): number {
    const { taken, applied, stale, forgotten } = this.#w.applyRing(this.#ring, limit);
    this.stats.applied += applied;
    this.stats.stale += stale;
    this.stats.forgotten += forgotten;
    return taken;
  }

  /**
   * Purges a released row: every entry of `pod` in every kind (assumed, confirmed, offloaded). Call it once the
   * row's lease was bumped (PodTable.release) and nothing else writes this pod's entries any more (its KV-event
   * stream is no longer followed and its EventApplier is gone): the ring is drained first, so an op pushed
   * before the call is applied and purged, or dropped as stale; one that comes later is dropped as stale.
   * Returns how many keys it changed. The index's writer thread only.
   */
  purgePod (pod: number): number {
    return this.purgePods([pod]);
  }

  /**
   * purgePod for several released rows in ONE sweep of the index (rows released while a purge was pending):
   * the sweep costs the same for one row or all of them. Same preconditions, for each row. Returns keys changed.
   */
  purgePods (pods: readonly number[]): number {
    this.pump(Infinity);
    const changed = this.#w.clearPods(pods, this.#w.mask.all);
    this.stats.purgedPods += new Set(pods).size;
    if (pods.length > 0) this.stats.purgeSweeps++;
    return changed;
  }

  /** Ages out one slice of assumed entries. */
  expire (now: number): number {
    const n = this.#w.expireAssumed(now, this.#opts.assumedTtlMs, this.#opts.expiryBudget);
    this.stats.expired += n;
    return n;
  }
}
