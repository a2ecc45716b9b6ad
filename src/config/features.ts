// How a request's features are computed: the tokenizer and block size of its block keys, and the route pool's
// threads and per-session cache of previous turns (src/features/route-pool.ts).
import { REMOTE_TOKENIZER_DEFAULTS, remoteTokenizerUrl, type RemoteTokenizerOptions } from '../tokenize/remote.js';
import { ConfigError } from './config-error.js';
import { checkInt, checkString, isMapping, type FieldCheck } from './checks.js';
import { BLOCK_SIZE } from '../core/defaults.js';

export interface FeaturesConfig {
  /**
   * Tokenizer for block keys; 'character' hashes the bytes of the rendered prompt; 'remote:<engine URL>' asks
   * that engine's /tokenize (settings in remoteTokenizer).
   */
  tokenizer: string;
  /** Timeout per attempt, retries and circuit breaker of a remote tokenizer (src/tokenize/remote.ts). */
  remoteTokenizer: RemoteTokenizerOptions;
  /** Block size for block keys (the engines' block size in precise mode). */
  blockSize: number;
  /** Threads of the route pool. */
  routeThreads: number;
  /** Sessions whose previous tokens and block keys each route thread keeps for incremental turns (LRU). */
  sessionsPerRouteThread: number;
  /**
   * The longest prefix retention an agent's hint may ask for (ms): a cache_control ttl or agentic_context's
   * kv_retention_ttl_seconds beyond it is clamped to it (docs/api.md#agent-hints).
   */
  maxRetentionTtlMs: number;
}

export const FEATURES_DEFAULTS: Readonly<FeaturesConfig> = Object.freeze({
  tokenizer: 'character',
  remoteTokenizer: REMOTE_TOKENIZER_DEFAULTS,
  blockSize: BLOCK_SIZE,
  routeThreads: 2,
  sessionsPerRouteThread: 4096,
  // Anthropic's longest cache_control TTL (1h).
  maxRetentionTtlMs: 3_600_000
});

const REMOTE_TOKENIZER_LIMITS: Record<keyof RemoteTokenizerOptions, [number, number]> = {
  timeoutMs: [1, 600_000], retries: [0, 10], breakerFailures: [1, 1000], breakerCooldownMs: [0, 3_600_000]
};

export const FEATURES_FIELDS: Record<keyof FeaturesConfig, FieldCheck> = {
  tokenizer: (p, v) => {
    const name = checkString(p, v);
    try {
      remoteTokenizerUrl(name);
    } catch (err) {
      throw new ConfigError(p, (err as Error).message);
    }
    return name;
  },
  remoteTokenizer: (p, v) => {
    if (!isMapping(v)) throw new ConfigError(p, 'must be a mapping');
    const out: Record<string, number> = { ...REMOTE_TOKENIZER_DEFAULTS };
    for (const [k, x] of Object.entries(v)) {
      const lim = Object.hasOwn(REMOTE_TOKENIZER_LIMITS, k) ? REMOTE_TOKENIZER_LIMITS[k as keyof RemoteTokenizerOptions] : undefined;
      if (lim === undefined) throw new ConfigError(`${p}.${k}`, `unknown field (known: ${Object.keys(REMOTE_TOKENIZER_LIMITS).join(', ')})`);
      out[k] = checkInt(`${p}.${k}`, x, lim[0], lim[1]);
    }
    return out;
  },
  blockSize: (p, v) => checkInt(p, v, 1, 4096),
  routeThreads: (p, v) => checkInt(p, v, 1, 64),
  sessionsPerRouteThread: (p, v) => checkInt(p, v, 1, 1 << 20),
  maxRetentionTtlMs: (p, v) => checkInt(p, v, 0, 86_400_000)
};
