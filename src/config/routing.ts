// The routing policy, its knobs, and the per-user token window that fairness policies read.
import { USER_USAGE_DEFAULTS, type UserUsageOptions } from '../core/user-usage.js';
import { ConfigError } from './config-error.js';
import { checkInt, checkString, isMapping, shown, type FieldCheck } from './checks.js';

export interface RoutingConfig {
  policy: string;
  /** Knobs of the chosen policy, passed through to it. */
  policyConfig: Record<string, unknown>;
  /** The per-user token window fairness policies read (src/core/user-usage.ts): window, buckets, token weights, bound. */
  userWindow: Required<UserUsageOptions>;
}

export const ROUTING_DEFAULTS: Readonly<RoutingConfig> = Object.freeze({
  policy: 'ear',
  policyConfig: {},
  userWindow: USER_USAGE_DEFAULTS
});

function checkWeight (path: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 1000) throw new ConfigError(path, `must be a number in [0, 1000], got ${shown(v)}`);
  return v;
}

const USER_WINDOW_FIELDS: Record<keyof UserUsageOptions, (path: string, x: unknown) => number> = {
  windowMs: (q, x) => checkInt(q, x, 1000, 86_400_000),
  buckets: (q, x) => checkInt(q, x, 1, 1024),
  inputWeight: checkWeight,
  outputWeight: checkWeight,
  maxUsers: (q, x) => checkInt(q, x, 1, 1 << 24)
};

export const ROUTING_FIELDS: Record<keyof RoutingConfig, FieldCheck> = {
  policy: checkString,
  policyConfig: (p, v) => {
    if (!isMapping(v)) throw new ConfigError(p, 'must be a mapping');
    return v;
  },
  userWindow: (p, v) => {
    if (!isMapping(v)) throw new ConfigError(p, 'must be a mapping');
    const out: Record<string, number> = { ...USER_USAGE_DEFAULTS };
    for (const [k, x] of Object.entries(v)) {
      const check = Object.hasOwn(USER_WINDOW_FIELDS, k) ? USER_WINDOW_FIELDS[k as keyof UserUsageOptions] : undefined;
      if (check === undefined) throw new ConfigError(`${p}.${k}`, `unknown field (known: ${Object.keys(USER_WINDOW_FIELDS).join(', ')})`);
      out[k] = check(`${p}.${k}`, x);
    }
    return out;
  }
};
