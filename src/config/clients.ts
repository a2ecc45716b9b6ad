// Who may call the gateway and how often: the admin token, client API keys and per-client limits, requests
// (src/request/rate-limit.ts) and tokens per minute (src/request/token-rate.ts). SIGHUP reloads this section alone
// (Gateway.reconfigure).
import { ConfigError } from './config-error.js';
import { checkInt, checkNumber, checkString, isMapping, type FieldCheck } from './checks.js';

/** One client's limits: requests (a bucket of `burst` refilled at `requestsPerSecond`), tokens per minute, or both. */
export interface RateLimit {
  /** Requests added to the bucket per second; null: requests are not limited (tokensPerMinute is set). */
  requestsPerSecond: number | null;
  /** Most requests the bucket holds (the largest burst admitted at once); null with requestsPerSecond. */
  burst: number | null;
  /** Prompt and output tokens per minute (a bucket of a minute's tokens); null: tokens are not limited. */
  tokensPerMinute: number | null;
}

/** Per-client limits; off by default. */
export interface RateLimitsConfig {
  /** Every API key without its own entry; null: no limit. */
  default: RateLimit | null;
  /** Per API key: each one of `apiKeys`. */
  keys: Record<string, RateLimit>;
  /** Per client IP address, when no `apiKeys` are configured; null: no limit. */
  perIp: RateLimit | null;
  /** Clients whose buckets are kept at once; beyond, the least recently used goes. */
  maxBuckets: number;
}

export interface ClientsConfig {
  /** Bearer token for /admin/*; null disables the admin endpoints. */
  adminToken: string | null;
  /** Client API keys; empty means no client auth. */
  apiKeys: string[];
  /** Request and token rate limits per API key (or per client IP without keys): 429 with Retry-After beyond. */
  rateLimits: RateLimitsConfig;
}

const RATE_LIMITS_DEFAULTS: Readonly<RateLimitsConfig> = Object.freeze({ default: null, keys: Object.freeze({}), perIp: null, maxBuckets: 65_536 });

export const CLIENTS_DEFAULTS: Readonly<ClientsConfig> = Object.freeze({
  adminToken: null,
  apiKeys: [],
  rateLimits: RATE_LIMITS_DEFAULTS
});

const BUCKET_FIELDS = ['requestsPerSecond', 'burst', 'tokensPerMinute'];

function checkBucket (path: string, v: unknown): RateLimit | null {
  if (v === null) return null;
  if (!isMapping(v)) throw new ConfigError(path, 'must be a mapping {requestsPerSecond, burst, tokensPerMinute} or null');
  for (const k of Object.keys(v)) if (!BUCKET_FIELDS.includes(k)) throw new ConfigError(`${path}.${k}`, `unknown field (known: ${BUCKET_FIELDS.join(', ')})`);
  const tokensPerMinute = v.tokensPerMinute === undefined ? null : checkInt(`${path}.tokensPerMinute`, v.tokensPerMinute, 1, 1_000_000_000);
  if (v.requestsPerSecond === undefined) {
    if (tokensPerMinute === null) throw new ConfigError(`${path}.requestsPerSecond`, 'is required (or tokensPerMinute)');
    if (v.burst !== undefined) throw new ConfigError(`${path}.burst`, 'needs requestsPerSecond');
    return { requestsPerSecond: null, burst: null, tokensPerMinute };
  }
  const rate = checkNumber(`${path}.requestsPerSecond`, v.requestsPerSecond, 0.001, 1_000_000);
  const burst = v.burst === undefined ? Math.max(1, Math.ceil(rate)) : checkInt(`${path}.burst`, v.burst, 1, 1_000_000);
  return { requestsPerSecond: rate, burst, tokensPerMinute };
}

function failNull (path: string): never {
  throw new ConfigError(path, 'must be a mapping {requestsPerSecond, burst, tokensPerMinute}');
}

function checkRateLimits (p: string, v: unknown): RateLimitsConfig {
  if (!isMapping(v)) throw new ConfigError(p, 'must be a mapping');
  const out: RateLimitsConfig = { ...RATE_LIMITS_DEFAULTS, keys: {} };
  for (const [k, x] of Object.entries(v)) {
    if (k === 'default' || k === 'perIp') out[k] = checkBucket(`${p}.${k}`, x);
    else if (k === 'maxBuckets') out.maxBuckets = checkInt(`${p}.maxBuckets`, x, 1, 1 << 24);
    else if (k === 'keys') {
      if (!isMapping(x)) throw new ConfigError(`${p}.keys`, 'must be a mapping of API key to {requestsPerSecond, burst, tokensPerMinute}');
      // A key is never printed whole in an error: its first characters say which one.
      for (const [key, lim] of Object.entries(x)) out.keys[key] = checkBucket(`${p}.keys.<key ${key.slice(0, 4)}…>`, lim) ?? failNull(`${p}.keys.<key ${key.slice(0, 4)}…>`);
    } else throw new ConfigError(`${p}.${k}`, `unknown field (known: ${Object.keys(RATE_LIMITS_DEFAULTS).join(', ')})`);
  }
  return out;
}

export const CLIENTS_FIELDS: Record<keyof ClientsConfig, FieldCheck> = {
  adminToken: (p, v) => (v === null ? null : checkString(p, v)),
  apiKeys: (p, v) => {
    if (!Array.isArray(v)) throw new ConfigError(p, 'must be a list of strings');
    return v.map((k, i) => checkString(`${p}[${i}]`, k));
  },
  rateLimits: checkRateLimits
};

/** rateLimits against apiKeys: a key's own limit names a configured key; per-IP limits are for a gateway without keys. */
export function checkRateLimitKeys (cfg: ClientsConfig): void {
  const keys = new Set(cfg.apiKeys);
  for (const k of Object.keys(cfg.rateLimits.keys)) {
    if (!keys.has(k)) throw new ConfigError(`rateLimits.keys.<key ${k.slice(0, 4)}…>`, 'is not one of apiKeys');
  }
  if (cfg.rateLimits.perIp !== null && keys.size > 0) throw new ConfigError('rateLimits.perIp', 'applies only without apiKeys (with keys, limit them with rateLimits.default)');
  if (cfg.rateLimits.default !== null && keys.size === 0) throw new ConfigError('rateLimits.default', 'limits API keys, and no apiKeys are configured (without keys, limit clients with rateLimits.perIp)');
}
