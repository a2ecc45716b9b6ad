// Who may use the client API (/v1/*), and how fast: the client's API key (credentials.ts), its request bucket
// (rate-limit.ts), checked once per request before its body is read (one call for every /v1 route), and its tokens
// per minute (token-rate.ts), charged once its prompt is counted (the pipeline's token-charge phase) and corrected
// at its end.
//
// Buckets are per API key (its own `rateLimits.keys` entry, else `rateLimits.default`), or per client IP
// address when no keys are configured (`rateLimits.perIp`): the address the connection comes from, never a
// header (x-forwarded-for is the client's to write). Behind a proxy every client shares the proxy's address.
import type { EnginePath } from '../dialects/dialect.js';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { GatewayConfig } from '../config/index.js';
import type { RateLimit } from '../config/clients.js';
import { ApiKeys } from './credentials.js';
import { EarError } from '../errors/errors.js';
import { available, RateLimiter, retryAfterSeconds, take, type ClientBuckets, type ClientLimit } from './rate-limit.js';
import { rateLimitHeaders, type RateLimitState, type RateLimitStyle } from './rate-limit-headers.js';
import { charge, correct, debtWait, remainingTokens, untilFull } from './token-rate.js';

/** Which limit refused a request: the label of ear_rate_limited_total (a fixed set: no key or address is a label). */
export type LimitScope = 'key' | 'default' | 'ip';

/** The routes that may be limited: the other label (fixed). */
export type GatedRoute = EnginePath | '/v1/context' | '/v1/models';

/**
 * Routes whose requests cost tokens and are refused at once, before their body is read, while the client's tokens
 * are in debt. (A context's prefill costs tokens too, charged in the pipeline; GET /v1/context/:id does not.)
 */
const TOKEN_ROUTES: ReadonlySet<string> = new Set<GatedRoute>(['/v1/chat/completions', '/v1/completions']);

/** A client admitted at the door: its user id (null without keys) and its limits (null when none applies). */
export interface AdmittedClient {
  readonly user: string | null;
  readonly limits: ClientLimits | null;
}

/**
 * What a request's door and pipeline ask of its client's limits: RequestLimits on the thread that owns the buckets,
 * or a data-plane thread's stand-in that asks that owner (src/gateway/owner-client.ts), whose charge answers later.
 */
export interface ClientLimits {
  readonly limitsTokens: boolean;
  chargeTokens (cost: number): RateLimitRefusal | null | Promise<RateLimitRefusal | null>;
  settleTokens (used: number | null): void;
  /** The client's limits as they stand now (as last heard, on a data-plane thread). */
  state (): RateLimitState;
  headers (style: RateLimitStyle, wallNow: number): Array<[string, string]>;
}

/** A 429 of a rate limit, with the limits of the client it refused (for the x-ratelimit-* headers of the answer). */
export class RateLimitRefusal extends EarError {
  constructor (message: string, retryAfterSeconds: number, readonly limits: ClientLimits) {
    super('EAR_ERR_RATE_LIMITED', message, { retryAfterSeconds });
  }
}

/** The limits of a request as admit answered it, refused or not: what its response's rate-limit headers describe. */
export function limitsOf (answer: AdmittedClient | EarError): ClientLimits | null {
  if (answer instanceof RateLimitRefusal) return answer.limits;
  return answer instanceof EarError ? null : answer.limits;
}

export class ClientGate {
  readonly keys: ApiKeys;
  readonly limiter: RateLimiter;
  readonly #own = new Map<string, ClientLimit>();
  #default: ClientLimit | null = null;
  #perIp: ClientLimit | null = null;
  readonly #limited: Counter<'scope' | 'route'>;
  readonly #tokenLimited: Counter<'scope' | 'route'>;
  readonly #tokens: Counter<'step'>;

  constructor (config: Pick<GatewayConfig, 'apiKeys' | 'rateLimits'>, registry: Registry, readonly now: () => number) {
    this.keys = new ApiKeys(config.apiKeys);
    this.limiter = new RateLimiter(config.rateLimits.maxBuckets);
    this.reconfigure(config);
    this.#limited = new Counter({ name: 'ear_rate_limited_total', help: 'Requests refused (429) by a request rate limit, by the limit that applied (key: the key\'s own; default; ip) and route.', labelNames: ['scope', 'route'], registers: [registry] });
    this.#tokenLimited = new Counter({ name: 'ear_token_rate_limited_total', help: 'Requests refused (429) by a tokens-per-minute limit (the client\'s tokens in debt), by the limit that applied (key, default, ip) and route.', labelNames: ['scope', 'route'], registers: [registry] });
    this.#tokens = new Counter({
      name: 'ear_token_rate_tokens_total',
      help: 'Tokens of token-limited clients: charged at admission (prompt + max_tokens), refunded at the end (used less), charged extra at the end (used more).',
      labelNames: ['step'],
      registers: [registry]
    });
    const stats = this.limiter.stats;
    new Gauge({ name: 'ear_rate_limit_buckets', help: 'Clients whose rate-limit buckets are held (bounded by rateLimits.maxBuckets).', registers: [registry], collect () { this.set(stats.buckets); } });
    new Gauge({
      name: 'ear_rate_limit_evicted_total',
      help: 'Clients dropped at rateLimits.maxBuckets, least recently used first: idle (had refilled, nothing lost) or active (its client starts full again, any token debt forgotten).',
      labelNames: ['state'],
      registers: [registry],
      collect () { this.set({ state: 'idle' }, stats.evictedIdle); this.set({ state: 'active' }, stats.evictedActive); }
    });
  }

  /**
   * The keys and limits from now on (SIGHUP). Buckets carry on: a client keeps what it has used of its burst and its
   * tokens (its debt too), under its new limit; a limit it did not have starts full. `rateLimits.maxBuckets` stays
   * as it started (the table's bound).
   */
  reconfigure (config: Pick<GatewayConfig, 'apiKeys' | 'rateLimits'>): void {
    this.keys.replace(config.apiKeys);
    const rl = config.rateLimits;
    // Limits are kept by the key's id: the raw keys stay in the frozen config only.
    this.#own.clear();
    for (const [k, lim] of Object.entries(rl.keys)) this.#own.set(this.keys.idOf(k)!, clientLimitOf(lim)!);
    this.#default = clientLimitOf(rl.default);
    this.#perIp = this.keys.enabled ? null : clientLimitOf(rl.perIp);
  }

  /**
   * Checks a request's credentials and limits at the door: the client (its user id, `key:<digest>` of its API key,
   * null when there are no keys; its limits, null when none applies), or an EarError to answer (401
   * EAR_ERR_UNAUTHORIZED; 429 EAR_ERR_RATE_LIMITED as a RateLimitRefusal with retryAfterSeconds, when its request
   * bucket is empty or, on a route that costs tokens, its tokens are in debt). `remoteAddress` is called only when a
   * per-IP limit applies.
   */
  /** No API keys and no per-IP limit: every client is admitted, anonymous and unlimited (admit returns ANONYMOUS). */
  get open (): boolean {
    return !this.keys.enabled && this.#perIp === null;
  }

  admit (route: GatedRoute, auth: string, remoteAddress: () => string): AdmittedClient | EarError {
    let user: string | null = null;
    let id: string | null = null;
    let limit: ClientLimit | null = null;
    let scope: LimitScope = 'default';
    if (this.keys.enabled) {
      user = this.keys.identify(auth);
      if (user === null) return new EarError('EAR_ERR_UNAUTHORIZED', 'missing or invalid API key');
      const own = this.#own.get(user);
      limit = own ?? this.#default;
      scope = own !== undefined ? 'key' : 'default';
      id = user;
    } else if (this.#perIp !== null) {
      limit = this.#perIp;
      scope = 'ip';
      id = `ip:${remoteAddress()}`;
    }
    if (limit === null || id === null) return user === null ? ANONYMOUS : { user, limits: null };
    const now = this.now();
    const client = this.limiter.client(id, limit, now);
    const limits = new RequestLimits(this, client, scope, route);
    // Tokens first: a refusal for debt takes nothing from the request bucket.
    if (client.tokens !== null && TOKEN_ROUTES.has(route)) {
      const waitMs = debtWait(client.tokens, limit.tokensPerMinute!, now);
      if (waitMs > 0) return this.tokenRefusal(limits, waitMs, null);
    }
    if (client.requests !== null) {
      const waitMs = take(client.requests, limit.requests!, now);
      if (waitMs > 0) {
        this.#limited.inc({ scope, route });
        const seconds = retryAfterSeconds(waitMs);
        return new RateLimitRefusal(`rate limit reached (${limit.requests!.requestsPerSecond} requests per second, burst ${limit.requests!.burst}); retry in ${seconds} s`, seconds, limits);
      }
    }
    return { user, limits };
  }

  /** The 429 for a client whose tokens are in debt (`requested`: the request's charge, when known). */
  tokenRefusal (limits: RequestLimits, waitMs: number, requested: number | null): RateLimitRefusal {
    this.#tokenLimited.inc({ scope: limits.scope, route: limits.route });
    const seconds = retryAfterSeconds(waitMs);
    const asked = requested === null ? '' : `, requested ${requested}`;
    return new RateLimitRefusal(`rate limit reached on tokens per minute (limit ${limits.client.limit.tokensPerMinute}${asked}): earlier requests used this minute's tokens; retry in ${seconds} s`, seconds, limits);
  }

  /** Counts tokens of ear_token_rate_tokens_total. */
  countTokens (step: 'charged' | 'refunded' | 'extra', n: number): void {
    if (n > 0) this.#tokens.inc({ step }, n);
  }
}

/**
 * One request of a limited client: its client's buckets, and what its tokens were charged at admission, corrected
 * once at its end. Its response's rate-limit headers are read from it when they go out.
 */
export class RequestLimits implements ClientLimits {
  #charged = 0;
  #open = false;

  constructor (readonly gate: ClientGate, readonly client: ClientBuckets, readonly scope: LimitScope, readonly route: string) {}

  /** Whether the client has a tokens-per-minute limit. */
  get limitsTokens (): boolean {
    return this.client.tokens !== null;
  }

  /**
   * Charges the request's estimate, `cost` tokens, if the client's tokens are not in debt: null. Otherwise the 429
   * to answer (nothing charged). Charged once: a second call charges nothing.
   */
  chargeTokens (cost: number): RateLimitRefusal | null {
    const b = this.client.tokens;
    const perMinute = this.client.limit.tokensPerMinute;
    if (b === null || perMinute === null || this.#open) return null;
    const waitMs = charge(b, perMinute, this.gate.now(), cost);
    if (waitMs > 0) return this.gate.tokenRefusal(this, waitMs, cost);
    this.#charged = cost;
    this.#open = true;
    this.gate.countTokens('charged', cost);
    return null;
  }

  /** The request ended having used `used` tokens: the charge is corrected to that (once); null: it stands. */
  settleTokens (used: number | null): void {
    if (!this.#open) return;
    this.#open = false;
    if (used === null) return;
    const b = this.client.tokens;
    const perMinute = this.client.limit.tokensPerMinute;
    // The limit was removed meanwhile (SIGHUP): nothing to correct.
    if (b === null || perMinute === null) return;
    const delta = used - this.#charged;
    correct(b, perMinute, this.gate.now(), delta);
    this.gate.countTokens(delta < 0 ? 'refunded' : 'extra', Math.abs(delta));
  }

  /** The client's limits as they stand now. */
  state (): RateLimitState {
    const now = this.gate.now();
    const { requests, tokens, limit } = this.client;
    const r = limit.requests;
    const perMinute = limit.tokensPerMinute;
    let rs = null;
    if (requests !== null && r !== null) {
      const level = available(requests, r, now);
      rs = { limit: r.burst, remaining: Math.floor(level), resetMs: (r.burst - level) * 1000 / r.requestsPerSecond };
    }
    const ts = tokens === null || perMinute === null ? null : { limit: perMinute, remaining: remainingTokens(tokens, perMinute, now), resetMs: untilFull(tokens, perMinute, now) };
    return { requests: rs, tokens: ts };
  }

  /** The response headers that describe them, in `style` (`wallNow`: the wall clock, ms). */
  headers (style: RateLimitStyle, wallNow: number): Array<[string, string]> {
    return rateLimitHeaders(this.state(), style, wallNow);
  }
}

/** A configured limit as the limiter takes it (null: none). */
function clientLimitOf (r: RateLimit | null): ClientLimit | null {
  if (r === null) return null;
  return { requests: r.requestsPerSecond === null ? null : { requestsPerSecond: r.requestsPerSecond, burst: r.burst! }, tokensPerMinute: r.tokensPerMinute };
}

/** What admit answers for every request when there are no API keys (one object, not one a request). */
export const ANONYMOUS: AdmittedClient = Object.freeze({ user: null, limits: null });

/** The text form of a uWS response's peer address (read while the handler runs). */
export function remoteAddressOf (res: { getRemoteAddressAsText (): ArrayBuffer }): string {
  return Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
}
