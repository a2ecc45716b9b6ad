// The KV the live sessions need: the sum of the last known context (tokens) of every session seen within the
// last `windowMs` (a turn routed or finished), as of now. The routing host keeps it (ClusterView.liveContextTokens)
// so that `ear` can tell a fleet short of KV — live sessions that together need more than the fleet holds — from
// one that merely serves a few long sessions (RESULTS "Short of KV": the largest context alone read ten Claude Code
// sessions as short on engines they never filled). Sessions past the window are taken as gone; at `maxSessions`
// the oldest is dropped first (its context leaves the sum), so the table and the sum stay bounded.
export class LiveContexts {
  /** Session → [last seen (ms), context (tokens)], oldest first (a Map keeps insertion order; a touch re-inserts). */
  readonly #live = new Map<bigint, [number, number]>();
  #sum = 0;

  constructor (readonly windowMs: number, readonly maxSessions = 1 << 20) {
    if (!(windowMs > 0)) throw new RangeError(`the live sessions' window must be > 0 ms, got ${windowMs}`);
    if (!(Number.isInteger(maxSessions) && maxSessions >= 1)) throw new RangeError(`maxSessions must be an integer ≥ 1, got ${maxSessions}`);
  }

  /** Session `key` was seen at `now` (ms, not decreasing) with `contextTokens` of context. */
  observe (key: bigint, contextTokens: number, now: number): void {
    const v = contextTokens > 0 ? contextTokens : 0;
    const e = this.#live.get(key);
    if (e !== undefined) {
      this.#sum -= e[1];
      this.#live.delete(key);
      e[0] = now;
      e[1] = v;
      this.#live.set(key, e);
    } else {
      if (this.#live.size >= this.maxSessions) this.#dropOldest();
      this.#live.set(key, [now, v]);
    }
    this.#sum += v;
    this.#expire(now);
  }

  /** Tokens of context of the sessions seen within the window, as of `now`. */
  tokens (now: number): number {
    this.#expire(now);
    return this.#sum;
  }

  /** Sessions seen within the window as of the last call. */
  get size (): number { return this.#live.size; }

  #expire (now: number): void {
    const oldest = now - this.windowMs;
    for (const [key, e] of this.#live) {
      if (e[0] >= oldest) break;
      this.#sum -= e[1];
      this.#live.delete(key);
    }
    if (this.#live.size === 0) this.#sum = 0;
  }

  #dropOldest (): void {
    for (const [key, e] of this.#live) {
      this.#sum -= e[1];
      this.#live.delete(key);
      return;
    }
  }
}
