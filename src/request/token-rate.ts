// A client's tokens per minute (config `rateLimits.*.tokensPerMinute`): a bucket that holds up to a minute's tokens
// and refills continuously at tokensPerMinute/60 s. A request is let in while the bucket is not in debt (level ≥ 0)
// and is charged its whole estimate at once, so the level may go below zero: one request may overshoot, never two
// in a row, and the debt is paid back by refill before the next is let in. At the end the charge is corrected to
// what the engine reported (a refund never fills the bucket past a minute's tokens).
//
// The bound this gives (test/request/token-limit.test.ts checks it with fast-check): between two admissions at a and
// b, everything taken at or after a and before b (charges and corrections) is at most
// tokensPerMinute + tokensPerMinute·(b − a)/60 s, and with b's own charge at most that plus b's charge.
// Pure: time is passed in (ms), nothing here reads a clock.

export interface TokenBucket {
  /** Tokens held as of `at`; negative: the debt of a request that overshot. */
  level: number;
  /** Time of the last refill (ms). */
  at: number;
}

const MINUTE_MS = 60_000;

export function fullTokenBucket (perMinute: number, now: number): TokenBucket {
  return { level: perMinute, at: now };
}

/** Adds what time has refilled up to `now` (time that goes backwards adds nothing). */
export function refill (b: TokenBucket, perMinute: number, now: number): void {
  if (now > b.at) {
    b.level = Math.min(perMinute, b.level + (now - b.at) * perMinute / MINUTE_MS);
    b.at = now;
  } else if (b.level > perMinute) {
    b.level = perMinute; // a lower limit (SIGHUP) applies at once
  }
}

/**
 * Charges `cost` tokens at `now` if the bucket is not in debt: returns 0. Otherwise charges nothing and returns the
 * ms until the debt is paid back (when a request is let in again).
 */
export function charge (b: TokenBucket, perMinute: number, now: number, cost: number): number {
  refill(b, perMinute, now);
  if (b.level < 0) return untilLevel(b, perMinute, 0);
  b.level -= sane(cost);
  return 0;
}

/** Whether a request would be refused now (the bucket is in debt), without charging; the ms to wait, else 0. */
export function debtWait (b: TokenBucket, perMinute: number, now: number): number {
  refill(b, perMinute, now);
  return b.level < 0 ? untilLevel(b, perMinute, 0) : 0;
}

/**
 * The end's correction: `delta` tokens more (a request that used more than it was charged) or, negative, given back
 * (it used less). A refund stops at a full bucket.
 */
export function correct (b: TokenBucket, perMinute: number, now: number, delta: number): void {
  refill(b, perMinute, now);
  b.level = Math.min(perMinute, b.level - sane(delta));
}

/**
 * A charge or a correction as the bucket takes it: finite, and no larger than a safe integer either way (what
 * reaches here is already bounded, token-charge.ts; this keeps NaN or Infinity from ever making a level that no
 * refill brings back).
 */
function sane (n: number): number {
  return Number.isFinite(n) ? Math.max(-Number.MAX_SAFE_INTEGER, Math.min(n, Number.MAX_SAFE_INTEGER)) : 0;
}

/** Whole tokens left now (0 in debt). */
export function remainingTokens (b: TokenBucket, perMinute: number, now: number): number {
  refill(b, perMinute, now);
  return Math.max(0, Math.floor(b.level));
}

/** Ms until the bucket is full again (its "reset": back to its initial state). */
export function untilFull (b: TokenBucket, perMinute: number, now: number): number {
  refill(b, perMinute, now);
  return untilLevel(b, perMinute, perMinute);
}

function untilLevel (b: TokenBucket, perMinute: number, level: number): number {
  return Math.max(0, (level - b.level) * MINUTE_MS / perMinute);
}

/** Whether dropping the bucket loses nothing: it would be full at `now`. */
export function isTokenBucketFull (b: TokenBucket, perMinute: number, now: number): boolean {
  return b.level + Math.max(0, now - b.at) * perMinute / MINUTE_MS >= perMinute;
}
