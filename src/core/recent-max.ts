// The largest value seen within the last one to two windows: two buckets, the older dropped as a window passes.
// The routing host keeps the largest session context this way (ClusterView.maxContextTokens) with the session
// TTL as the window, so one huge session long gone does not keep the fleet "short of KV" until a restart.
export class RecentMax {
  #cur = 0;
  #prev = 0;
  #since = Number.NaN;

  constructor (readonly windowMs: number) {}

  /** Counts `v` seen at `now` (ms, not decreasing). */
  observe (v: number, now: number): void {
    this.#rotate(now);
    if (v > this.#cur) this.#cur = v;
  }

  /** The largest value seen in the current window and the one before it, as of `now`. */
  value (now: number): number {
    this.#rotate(now);
    return this.#cur > this.#prev ? this.#cur : this.#prev;
  }

  #rotate (now: number): void {
    if (Number.isNaN(this.#since)) { this.#since = now; return; }
    const passed = now - this.#since;
    if (!(this.windowMs > 0) || passed < this.windowMs) return;
    this.#prev = passed < 2 * this.windowMs ? this.#cur : 0;
    this.#cur = 0;
    this.#since = now;
  }
}
