// The `ha:` section of the gateway's configuration: how several `ear serve` replicas share the traffic.
// active-active (default): every replica is ready and serves. active-passive: the replicas elect a leader with a
// Kubernetes Lease (src/ha/leader-elector.ts) and only the leader reports ready on /ready, so a Service sends
// traffic to it alone. Timings follow client-go's leaderelection (15 s lease, 10 s renew deadline, 2 s retry period), and
// fields not given keep those ratios to the ones given.
import { DNS_LABEL, DNS_SUBDOMAIN } from '../kube/names.js';
import { ConfigError } from './config-error.js';
import type { FieldCheck } from './checks.js';

export const HA_MODES = ['active-active', 'active-passive'] as const;
export type HaMode = typeof HA_MODES[number];

export interface HaConfig {
  mode: HaMode;
  /** Name of the coordination.k8s.io/v1 Lease the replicas contend for (a DNS subdomain name). */
  leaseName: string;
  /** How long a follower waits, after it last saw the lease change, before it may take the lease over. */
  leaseDurationSeconds: number;
  /** A leader that has not renewed within this long of its last successful renewal steps down (not ready). */
  renewDeadlineSeconds: number;
  /** How often the leader renews and followers try to acquire. */
  retryPeriodSeconds: number;
  /**
   * Where the API server is: a kubeconfig path, else the `discovery` section's, else in-cluster
   * (KUBERNETES_SERVICE_HOST), else KUBECONFIG or ~/.kube/config. null: not set here.
   */
  kubeconfig: string | null;
  /** The lease's namespace; null: the `discovery` section's, else POD_NAMESPACE, the service account's, "default". */
  namespace: string | null;
}

/** client-go's defaults (LeaseDuration 15 s, RenewDeadline 10 s, RetryPeriod 2 s). */
export const HA_DEFAULTS: Readonly<HaConfig> = Object.freeze({
  mode: 'active-active',
  leaseName: 'ear-leader',
  leaseDurationSeconds: 15,
  renewDeadlineSeconds: 10,
  retryPeriodSeconds: 2,
  kubeconfig: null,
  namespace: null
});

/** client-go's JitterFactor: the renew deadline must leave room for a retry period stretched by its jitter. */
export const RETRY_JITTER = 1.2;

const FIELDS = Object.keys(HA_DEFAULTS);

function fail (path: string, rule: string): never {
  throw new ConfigError(path, rule);
}

/**
 * Validates `ha:`. Every field is optional; a mode given as a bare string (`--ha active-passive`) is accepted as
 * `{ mode }`.
 */
function checkHa (path: string, v: unknown): HaConfig {
  const raw: unknown = typeof v === 'string' ? { mode: v } : v;
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return fail(path, 'must be a mapping {mode, leaseName, leaseDurationSeconds, …}');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!FIELDS.includes(k)) fail(`${path}.${k}`, `unknown field (known: ${FIELDS.join(', ')})`);
  const mode = r.mode ?? HA_DEFAULTS.mode;
  if (!(HA_MODES as readonly unknown[]).includes(mode)) fail(`${path}.mode`, `must be one of ${HA_MODES.join(', ')}, got ${JSON.stringify(mode)}`);
  const leaseName = r.leaseName ?? HA_DEFAULTS.leaseName;
  if (typeof leaseName !== 'string' || !DNS_SUBDOMAIN.test(leaseName)) fail(`${path}.leaseName`, 'must be a Kubernetes object name (lower-case DNS subdomain, at most 253 characters)');
  const seconds = (k: string, v: unknown, min: number, max: number, integer: boolean): number => {
    const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
    if (typeof n !== 'number' || !Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
      fail(`${path}.${k}`, `must be ${integer ? 'an integer' : 'a number'} in [${min}, ${max}], got ${JSON.stringify(v)}`);
    }
    return n as number;
  };
  // The Lease object holds whole seconds.
  const leaseDurationSeconds = r.leaseDurationSeconds === undefined ? HA_DEFAULTS.leaseDurationSeconds : seconds('leaseDurationSeconds', r.leaseDurationSeconds, 1, 3600, true);
  const scale = leaseDurationSeconds / HA_DEFAULTS.leaseDurationSeconds;
  const renewDeadlineSeconds = r.renewDeadlineSeconds === undefined ? HA_DEFAULTS.renewDeadlineSeconds * scale : seconds('renewDeadlineSeconds', r.renewDeadlineSeconds, 0.1, 3600, false);
  // An unset retry period follows the renew deadline when that is given (client-go's 2 s to 10 s), else the lease.
  const retryPeriodSeconds = r.retryPeriodSeconds !== undefined
    ? seconds('retryPeriodSeconds', r.retryPeriodSeconds, 0.05, 3600, false)
    : renewDeadlineSeconds * HA_DEFAULTS.retryPeriodSeconds / HA_DEFAULTS.renewDeadlineSeconds;
  // The safety argument (src/ha/leader-elector.ts): a leader steps down before any follower may take over.
  if (renewDeadlineSeconds >= leaseDurationSeconds) fail(`${path}.renewDeadlineSeconds`, `must be less than leaseDurationSeconds (${leaseDurationSeconds}), got ${renewDeadlineSeconds}`);
  if (renewDeadlineSeconds <= RETRY_JITTER * retryPeriodSeconds) fail(`${path}.retryPeriodSeconds`, `must be less than renewDeadlineSeconds / ${RETRY_JITTER} (${+(renewDeadlineSeconds / RETRY_JITTER).toFixed(3)}), got ${retryPeriodSeconds}`);
  const optional = (k: 'kubeconfig' | 'namespace'): string | null => {
    const x = r[k];
    if (x === undefined || x === null || x === '') return null;
    if (typeof x !== 'string') return fail(`${path}.${k}`, 'must be a string');
    if (k === 'namespace' && !DNS_LABEL.test(x)) fail(`${path}.namespace`, 'must be a Kubernetes namespace name (lower-case DNS label, at most 63 characters)');
    return x;
  };
  return {
    mode: mode as HaMode,
    leaseName: leaseName as string,
    leaseDurationSeconds,
    renewDeadlineSeconds,
    retryPeriodSeconds,
    kubeconfig: optional('kubeconfig'),
    namespace: optional('namespace')
  };
}

export interface HaSection {
  /** Several replicas: active-active (default), or active-passive with a Kubernetes Lease. */
  ha: HaConfig;
}

export const HA_SECTION_DEFAULTS: Readonly<HaSection> = Object.freeze({ ha: HA_DEFAULTS });

export const HA_SECTION_FIELDS: Record<keyof HaSection, FieldCheck> = { ha: checkHa };
