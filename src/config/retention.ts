// Retention of the prefixes of sessions in their tool gap (src/core/retention.ts): the share of an engine's KV they
// may hold and how a session's TTL is learnt. A hinted TTL (cache_control, kv_retention_ttl_seconds) has one
// bound, maxRetentionTtlMs (features.ts), applied at the door; minTtlMs and maxTtlMs bound the learnt ones.
import { RETENTION_DEFAULTS, type RetentionOptions } from '../core/retention.js';
import { ConfigError } from './config-error.js';
import { checkInt, checkNumber, isMapping, type FieldCheck } from './checks.js';

export interface RetentionConfig {
  retention: RetentionOptions;
}

export const RETENTION_CONFIG_DEFAULTS: Readonly<RetentionConfig> = Object.freeze({ retention: RETENTION_DEFAULTS });

const DAY_MS = 86_400_000;

const OPTION_CHECKS: Record<keyof RetentionOptions, (path: string, x: unknown) => number> = {
  maxShare: (q, x) => checkNumber(q, x, 0, 1),
  defaultGapMs: (q, x) => checkInt(q, x, 0, DAY_MS),
  gapFactor: (q, x) => checkNumber(q, x, 0.1, 100),
  minTtlMs: (q, x) => checkInt(q, x, 0, DAY_MS),
  maxTtlMs: (q, x) => checkInt(q, x, 0, DAY_MS),
  gapAlpha: (q, x) => {
    const a = checkNumber(q, x, 0, 1);
    if (a === 0) throw new ConfigError(q, 'must be a number in (0, 1], got 0');
    return a;
  },
  maxLearnt: (q, x) => checkInt(q, x, 1, 1 << 24)
};

export const RETENTION_FIELDS: Record<keyof RetentionConfig, FieldCheck> = {
  retention: (p, v) => {
    if (!isMapping(v)) throw new ConfigError(p, 'must be a mapping');
    const out: Record<string, number> = { ...RETENTION_DEFAULTS };
    for (const [k, x] of Object.entries(v)) {
      const check = Object.hasOwn(OPTION_CHECKS, k) ? OPTION_CHECKS[k as keyof RetentionOptions] : undefined;
      if (check === undefined) throw new ConfigError(`${p}.${k}`, `unknown field (known: ${Object.keys(OPTION_CHECKS).join(', ')})`);
      out[k] = check(`${p}.${k}`, x);
    }
    if (out.minTtlMs > out.maxTtlMs) throw new ConfigError(`${p}.minTtlMs`, `must be ≤ maxTtlMs (${out.maxTtlMs}), got ${out.minTtlMs}`);
    return out;
  }
};
