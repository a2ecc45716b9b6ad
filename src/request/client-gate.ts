// Who may use the client API (/v1/*), and how fast: the client's API key (credentials.ts) and its token
// bucket (rate-limit.ts), checked once per request before its body is read. One call for every /v1 route.
//
// Buckets are per API key (its own `rateLimits.keys` entry, else `rateLimits.default`), or per client IP
// address when no keys are configured (`rateLimits.perIp`): the address the connection comes from, never a
// header (x-forwarded-for is the client's to write). Behind a proxy every client shares the proxy's address.
import type { EnginePath } from '../dialects/dialect.js';
import { Counter, Gauge, type Registry } from 'prom-client';
import type { GatewayConfig } from '../config/index.js';
import { ApiKeys } from './credentials.js';
import { EarError } from './errors.js';
import { RateLimiter, retryAfterSeconds, type BucketLimit } from './rate-limit.js';

/** Which limit refused a request: the label of ear_rate_limited_total (a fixed set: no key or address is a label). */
export type LimitScope = 'key' | 'default' | 'ip';

/** The routes that may be limited: the other label (fixed). */
export type GatedRoute = EnginePath | '/v1/context' | '/v1/models';

export class ClientGate {
  readonly keys: ApiKeys;
  readonly limiter: RateLimiter;
  readonly #own = new Map<string, BucketLimit>();
  #default: BucketLimit | null = null;
  #perIp: BucketLimit | null = null;
  readonly #limited: Counter<'scope' | 'route'>;

  constructor (config: Pick<GatewayConfig, 'apiKeys' | 'rateLimits'>, registry: Registry, readonly now: () => number) {
    this.keys = new ApiKeys(config.apiKeys);
    this.limiter = new RateLimiter(config.rateLimits.maxBuckets);
    this.reconfigure(config);
    this.#limited = new Counter({ name: 'ear_rate_limited_total', help: 'Requests refused (429) by a rate limit, by the limit that applied (key: the key\'s own; default; ip) and route.', labelNames: ['scope', 'route'], registers: [registry] });
    const stats = this.limiter.stats;
    new Gauge({ name: 'ear_rate_limit_buckets', help: 'Rate-limit buckets held (bounded by rateLimits.maxBuckets).', registers: [registry], collect () { this.set(stats.buckets); } });
    new Gauge({
      name: 'ear_rate_limit_evicted_total',
      help: 'Buckets dropped at rateLimits.maxBuckets, least recently used first: idle (had refilled, nothing lost) or active (its client starts a fresh burst).',
      labelNames: ['state'],
      registers: [registry],
      collect () { this.set({ state: 'idle' }, stats.evictedIdle); this.set({ state: 'active' }, stats.evictedActive); }
    });
  }

  /**
   * The keys and limits from now on (SIGHUP). Buckets carry on: a client keeps what it has used of its burst, under
   * its new limit. `rateLimits.maxBuckets` stays as it started (the table's bound).
   */
  reconfigure (config: Pick<GatewayConfig, 'apiKeys' | 'rateLimits'>): void {
    this.keys.replace(config.apiKeys);
    const rl = config.rateLimits;
    // Limits are kept by the key's id: the raw keys stay in the frozen config only.
    this.#own.clear();
    for (const [k, lim] of Object.entries(rl.keys)) this.#own.set(this.keys.idOf(k)!, lim);
    this.#default = rl.default;
    this.#perIp = this.keys.enabled ? null : rl.perIp;
  }

  /**
   * Checks a request's credentials and bucket: the client's user id (`key:<digest>` of its API key; null when
   * there are no keys), or an EarError to answer (401 EAR_ERR_UNAUTHORIZED; 429 EAR_ERR_RATE_LIMITED with
   * retryAfterSeconds). `remoteAddress` is called only when a per-IP limit applies.
   */
  admit (route: GatedRoute, auth: string, remoteAddress: () => string): { user: string | null } | EarError {
    let user: string | null = null;
    let id: string | null = null;
    let limit: BucketLimit | null = null;
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
    if (limit === null || id === null) return user === null ? ANONYMOUS : { user };
    const waitMs = this.limiter.take(id, limit, this.now());
    if (waitMs === 0) return user === null ? ANONYMOUS : { user };
    this.#limited.inc({ scope, route });
    const seconds = retryAfterSeconds(waitMs);
    return new EarError('EAR_ERR_RATE_LIMITED', `rate limit reached (${limit.requestsPerSecond} requests per second, burst ${limit.burst}); retry in ${seconds} s`, { retryAfterSeconds: seconds });
  }
}

/** What admit answers for every request when there are no API keys (one object, not one a request). */
const ANONYMOUS: { readonly user: null } = Object.freeze({ user: null });

/** The text form of a uWS response's peer address (read while the handler runs). */
export function remoteAddressOf (res: { getRemoteAddressAsText (): ArrayBuffer }): string {
  return Buffer.from(res.getRemoteAddressAsText()).toString('latin1');
}
