// The migration thread's copy of each session's last request body: what a proactive transfer replays on the
// source (export leg) and the target (import or recompute pre-warm). Bounded in bytes (principle 4 of
// docs/architecture.md#principles): least recently used first out, counted; a body larger than the whole bound is
// not kept, counted.
// Keyed by session key; Map order is recency (an entry is re-inserted when it is written or read).

export interface SessionBody {
  /** The session id as the client sent it (the shared store's key). */
  sessionId: string;
  /** The request's model: a session moves only between pods serving it. */
  model: string;
  /** The engine path (/v1/chat/completions or /v1/completions). */
  path: string;
  /** The forwarded body (client kv_transfer_params already stripped). */
  body: Uint8Array;
}

export interface BodyCacheStats {
  entries: number;
  bytes: number;
  maxBytes: number;
  /** Bodies dropped to stay within maxBytes, least recently used first. */
  evicted: number;
  /** Bodies larger than maxBytes on their own, never kept. */
  tooLarge: number;
}

/** What an entry costs: its body, its strings (two bytes a UTF-16 unit) and a fixed overhead for the objects. */
const ENTRY_OVERHEAD = 128;
function sizeOf (e: SessionBody): number {
  return e.body.byteLength + 2 * (e.sessionId.length + e.model.length + e.path.length) + ENTRY_OVERHEAD;
}

export class BodyCache {
  readonly maxBytes: number;
  readonly #map = new Map<bigint, SessionBody>();
  #bytes = 0;
  #evicted = 0;
  #tooLarge = 0;

  constructor (maxBytes: number) {
    if (!(Number.isInteger(maxBytes) && maxBytes > 0)) throw new RangeError(`maxBytes must be a positive integer, got ${maxBytes}`);
    this.maxBytes = maxBytes;
  }

  /** Keeps the session's latest body (replacing an older one), evicting the least recently used beyond the bound. */
  set (key: bigint, e: SessionBody): void {
    this.delete(key);
    const size = sizeOf(e);
    if (size > this.maxBytes) {
      this.#tooLarge++;
      return;
    }
    this.#map.set(key, e);
    this.#bytes += size;
    for (const [k, old] of this.#map) {
      if (this.#bytes <= this.maxBytes) break;
      this.#map.delete(k);
      this.#bytes -= sizeOf(old);
      this.#evicted++;
    }
  }

  /** The session's body, now the most recently used; undefined if none is kept. */
  get (key: bigint): SessionBody | undefined {
    const e = this.#map.get(key);
    if (e === undefined) return undefined;
    this.#map.delete(key);
    this.#map.set(key, e);
    return e;
  }

  /** The session's body without making it the most recently used (a planning pass looks at every session). */
  peek (key: bigint): SessionBody | undefined {
    return this.#map.get(key);
  }

  has (key: bigint): boolean {
    return this.#map.has(key);
  }

  delete (key: bigint): boolean {
    const e = this.#map.get(key);
    if (e === undefined) return false;
    this.#map.delete(key);
    this.#bytes -= sizeOf(e);
    return true;
  }

  stats (): BodyCacheStats {
    return { entries: this.#map.size, bytes: this.#bytes, maxBytes: this.maxBytes, evicted: this.#evicted, tooLarge: this.#tooLarge };
  }
}
