// The rate-limit headers of a limited client's responses, in the style of the API it speaks: SDKs and agents read
// them to pace themselves.
//   openai:    x-ratelimit-{limit,remaining,reset}-{requests,tokens}; reset is the time until the limit is back to
//              its initial state, as a Go duration the way OpenAI writes it ("1s", "6m0s", "12ms", "1.5s").
//   anthropic: anthropic-ratelimit-{requests,tokens}-{limit,remaining,reset}; reset is the moment the limit is fully
//              replenished, RFC 3339 in UTC to the second ("2025-01-15T14:24:00Z").
// Only the limits a client has are written (a key with tokensPerMinute alone gets no requests headers). Every delay
// is clamped to [0, MAX_HEADER_DELAY_MS] before it is written, so no value (a debt of 9e15 tokens, a clock gone
// wrong) can make a header throw (Date past year 275760) or say something no client can act on. Pure: the wall
// clock is passed in.

/**
 * The longest delay a header states (a reset, a Retry-After): a day. A client told to come back in a day that
 * finds its limit not yet back is told again; a longer figure helps nobody and a much longer one is not a date.
 */
export const MAX_HEADER_DELAY_MS = 86_400_000;

/** `ms` as a delay a header may state: a finite number in [0, MAX_HEADER_DELAY_MS] (NaN: 0). */
export function headerDelayMs (ms: number): number {
  return ms > 0 ? Math.min(ms, MAX_HEADER_DELAY_MS) : 0;
}

export type RateLimitStyle = 'openai' | 'anthropic';

/** One limit as it stands now. */
export interface LimitState {
  /** The most a full bucket holds: `burst` requests, or a minute's tokens. */
  limit: number;
  /** Whole units left now (0 when the bucket is empty or in debt). */
  remaining: number;
  /** Ms until the bucket is full again. */
  resetMs: number;
}

export interface RateLimitState {
  requests: LimitState | null;
  tokens: LimitState | null;
}

/** The headers for `state` in `style`; `wallNow` is the wall clock (ms since the epoch), read by the anthropic style. */
export function rateLimitHeaders (state: RateLimitState, style: RateLimitStyle, wallNow: number): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (const kind of ['requests', 'tokens'] as const) {
    const s = state[kind];
    if (s === null) continue;
    const resetMs = headerDelayMs(s.resetMs);
    const remaining = wholeCount(s.remaining);
    if (style === 'openai') {
      out.push([`x-ratelimit-limit-${kind}`, String(s.limit)], [`x-ratelimit-remaining-${kind}`, remaining],
        [`x-ratelimit-reset-${kind}`, goDuration(resetMs)]);
    } else {
      out.push([`anthropic-ratelimit-${kind}-limit`, String(s.limit)], [`anthropic-ratelimit-${kind}-remaining`, remaining],
        [`anthropic-ratelimit-${kind}-reset`, rfc3339Seconds(wallNow + resetMs)]);
    }
  }
  return out;
}

/** A count as a header writes it: a whole number ≥ 0 (never "NaN", "-3" or "1e+21"). */
function wholeCount (n: number): string {
  return n > 0 ? String(Math.floor(Math.min(n, Number.MAX_SAFE_INTEGER))) : '0';
}

/**
 * `ms` as Go's time.Duration prints it, rounded up to the millisecond (a client that waits that long finds the
 * limit reset): "0s", "12ms", "1s", "1.5s", "6m0s", "1h0m0.25s".
 */
export function goDuration (ms: number): string {
  const total = Math.ceil(headerDelayMs(ms));
  if (total === 0) return '0s';
  if (total < 1000) return `${total}ms`;
  const hours = Math.floor(total / 3_600_000);
  const minutes = Math.floor((total % 3_600_000) / 60_000);
  const secMs = total % 60_000;
  const whole = Math.floor(secMs / 1000);
  const frac = secMs % 1000;
  const seconds = frac === 0 ? String(whole) : `${whole}.${String(frac).padStart(3, '0').replace(/0+$/, '')}`;
  if (hours > 0) return `${hours}h${minutes}m${seconds}s`;
  if (minutes > 0) return `${minutes}m${seconds}s`;
  return `${seconds}s`;
}

/**
 * The moment `ms` (since the epoch) rounded up to the second, as RFC 3339 in UTC: "2025-01-15T14:24:00Z". Never
 * throws: a moment outside years 0000-9999 (what RFC 3339 can write; Date.toISOString throws past 275760) is
 * clamped to that range, NaN to the epoch.
 */
export function rfc3339Seconds (ms: number): string {
  const at = Math.min(Math.max(Math.ceil(ms / 1000) * 1000 || 0, RFC3339_FIRST_MS), RFC3339_LAST_MS);
  return `${new Date(at).toISOString().slice(0, 19)}Z`;
}

const RFC3339_FIRST_MS = Date.parse('0000-01-01T00:00:00Z');
const RFC3339_LAST_MS = Date.parse('9999-12-31T23:59:59Z');
