// Per-client token buckets (config `rateLimits`): a bucket holds up to `burst` tokens and refills at
// `requestsPerSecond`; a request takes one, and with none left it is refused (429) with the time until one
// comes back. In any window of t seconds a bucket admits at most burst + rate·t requests.
//
// The table of buckets is bounded (`maxBuckets`): the least recently used bucket goes to make room. A bucket
// that has refilled to `burst` loses nothing when it goes (a new one starts full); one that had not (every
// bucket in use within its refill time) lets its client start again with a full burst. Both are counted.

export interface BucketLimit {
  /** Tokens added per second. */
  requestsPerSecond: number;
  /** Most tokens a bucket holds (the largest burst admitted at once). */
  burst: number;
}

export interface Bucket {
  /** Tokens held as of `at`. */
  tokens: number;
  /** Time of the last refill (ms). */
  at: number;
}

export function fullBucket (limit: BucketLimit, now: number): Bucket {
  return { tokens: limit.burst, at: now };
}

/**
 * Takes `cost` tokens from the bucket at time `now` (ms) if it holds them: returns 0. Otherwise takes nothing
 * and returns the ms until it will hold them. Time that goes backwards adds nothing.
 */
export function take (b: Bucket, limit: BucketLimit, now: number, cost = 1): number {
  if (now > b.at) {
    b.tokens = Math.min(limit.burst, b.tokens + (now - b.at) * limit.requestsPerSecond / 1000);
    b.at = now;
  }
  if (b.tokens >= cost) {
    b.tokens -= cost;
    return 0;
  }
  return (cost - b.tokens) * 1000 / limit.requestsPerSecond;
}

/** Whether the bucket would be full at `now` (dropping it loses nothing). */
export function isFull (b: Bucket, limit: BucketLimit, now: number): boolean {
  return b.tokens + Math.max(0, now - b.at) * limit.requestsPerSecond / 1000 >= limit.burst;
}

/** Whole seconds a client should wait (Retry-After) for a wait of `ms`: at least 1. */
export function retryAfterSeconds (ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

export interface RateLimiterStats {
  buckets: number;
  /** Buckets dropped at the bound that had refilled (nothing lost). */
  evictedIdle: number;
  /** Buckets dropped at the bound that had not: their clients got a fresh burst. */
  evictedActive: number;
}

/** Buckets by client id, at most `maxBuckets`, least recently used out first. */
export class RateLimiter {
  /** Insertion order is use order: a bucket is moved to the end each time it is used. */
  readonly #buckets = new Map<string, { bucket: Bucket; limit: BucketLimit }>();
  readonly stats: RateLimiterStats = { buckets: 0, evictedIdle: 0, evictedActive: 0 };

  constructor (readonly maxBuckets: number) {
    if (!Number.isInteger(maxBuckets) || maxBuckets < 1) throw new RangeError(`maxBuckets must be a positive integer, got ${maxBuckets}`);
  }

  /** As take() on `id`'s bucket (made full on first use). */
  take (id: string, limit: BucketLimit, now: number, cost = 1): number {
    let e = this.#buckets.get(id);
    if (e !== undefined) {
      this.#buckets.delete(id);
      e.limit = limit;
    } else {
      if (this.#buckets.size >= this.maxBuckets) this.#evict(now);
      e = { bucket: fullBucket(limit, now), limit };
    }
    this.#buckets.set(id, e);
    this.stats.buckets = this.#buckets.size;
    return take(e.bucket, limit, now, cost);
  }

  #evict (now: number): void {
    const oldest = this.#buckets.entries().next();
    if (oldest.done === true) return;
    const [id, e] = oldest.value;
    this.#buckets.delete(id);
    if (isFull(e.bucket, e.limit, now)) this.stats.evictedIdle++;
    else this.stats.evictedActive++;
  }

  get size (): number {
    return this.#buckets.size;
  }
}
