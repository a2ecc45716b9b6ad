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
  applied: number;
  expired: number;
  forgotten: number;
}

export class IndexFeeder {
  readonly stats: FeederStats = { applied: 0, expired: 0, forgotten: 0 };
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
   * Applies up to `limit` ring ops in one kernel call (assumed: add the pod; touch: refresh a key the index still
   * has; forgetPod: clear the pod); returns how many were applied.
   */
  pump (limit = 1 << 16): number {
    const { applied, forgotten } = this.#w.applyRing(this.#ring, limit);
    this.stats.applied += applied;
    this.stats.forgotten += forgotten;
    return applied;
  }

  /** Ages out one slice of assumed entries. */
  expire (now: number): number {
    const n = this.#w.expireAssumed(now, this.#opts.assumedTtlMs, this.#opts.expiryBudget);
    this.stats.expired += n;
    return n;
  }
}
