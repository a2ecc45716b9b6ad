// Per-client request buckets (config `rateLimits`): a bucket holds up to `burst` tokens and refills at
// `requestsPerSecond`; a request takes one, and with none left it is refused (429) with the time until one
// comes back. In any window of t seconds a bucket admits at most burst + rate·t requests. A client's tokens per
// minute are a second bucket beside it (token-rate.ts).
//
// The table of clients is bounded (`maxBuckets`): the least recently used client goes to make room. One whose
// buckets have refilled loses nothing when it goes (a new one starts full); one whose had not (every client in use
// within its refill time) starts again full, any token debt forgotten. Both are counted.

import { fullTokenBucket, isTokenBucketFull, type TokenBucket } from './token-rate.js';
import { headerDelayMs } from './rate-limit-headers.js';

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

/** Tokens the bucket holds at `now` (what time has refilled counted in), without taking any. */
export function available (b: Bucket, limit: BucketLimit, now: number): number {
  return Math.min(limit.burst, b.tokens + Math.max(0, now - b.at) * limit.requestsPerSecond / 1000);
}

/** Whole seconds a client should wait (Retry-After) for a wait of `ms`: at least 1, at most a day (headerDelayMs). */
export function retryAfterSeconds (ms: number): number {
  return Math.max(1, Math.ceil(headerDelayMs(ms) / 1000));
}

export interface RateLimiterStats {
  /** Clients held (each with its request bucket and its token bucket, whichever it has). */
  buckets: number;
  /** Clients dropped at the bound whose buckets had refilled (nothing lost). */
  evictedIdle: number;
  /** Clients dropped at the bound whose buckets had not: they start again full, their debt forgotten. */
  evictedActive: number;
}

/** What one client may use: a request bucket, tokens per minute, or both (a client with neither is not limited). */
export interface ClientLimit {
  requests: BucketLimit | null;
  tokensPerMinute: number | null;
}

/** One client's state: its limit (the latest configured) and a bucket for each limit it has. */
export interface ClientBuckets {
  limit: ClientLimit;
  requests: Bucket | null;
  tokens: TokenBucket | null;
}

/** Clients by id, at most `maxBuckets`, least recently used out first. */
export class RateLimiter {
  /** Insertion order is use order: a client is moved to the end each time it is used. */
  readonly #clients = new Map<string, ClientBuckets>();
  readonly stats: RateLimiterStats = { buckets: 0, evictedIdle: 0, evictedActive: 0 };

  constructor (readonly maxBuckets: number) {
    if (!Number.isInteger(maxBuckets) || maxBuckets < 1) throw new RangeError(`maxBuckets must be a positive integer, got ${maxBuckets}`);
  }

  /**
   * `id`'s buckets under `limit` (made full on first use, and for a limit it did not have before: SIGHUP), as the
   * most recently used. A bucket keeps what its client has used under a changed limit.
   */
  client (id: string, limit: ClientLimit, now: number): ClientBuckets {
    let e = this.#clients.get(id);
    if (e !== undefined) {
      this.#clients.delete(id);
      if (e.limit !== limit) {
        e.limit = limit;
        if (limit.requests === null) e.requests = null;
        else e.requests ??= fullBucket(limit.requests, now);
        if (limit.tokensPerMinute === null) e.tokens = null;
        else e.tokens ??= fullTokenBucket(limit.tokensPerMinute, now);
      }
    } else {
      if (this.#clients.size >= this.maxBuckets) this.#evict(now);
      e = {
        limit,
        requests: limit.requests === null ? null : fullBucket(limit.requests, now),
        tokens: limit.tokensPerMinute === null ? null : fullTokenBucket(limit.tokensPerMinute, now)
      };
    }
    this.#clients.set(id, e);
    this.stats.buckets = this.#clients.size;
    return e;
  }

  #evict (now: number): void {
    const oldest = this.#clients.entries().next();
    if (oldest.done === true) return;
    const [id, e] = oldest.value;
    this.#clients.delete(id);
    const full = (e.requests === null || isFull(e.requests, e.limit.requests!, now)) &&
      (e.tokens === null || isTokenBucketFull(e.tokens, e.limit.tokensPerMinute!, now));
    if (full) this.stats.evictedIdle++;
    else this.stats.evictedActive++;
  }

  get size (): number {
    return this.#clients.size;
  }
}
