// The admission scheduler (src/core/admission.ts) and the capacity that gates it (src/core/capacity.ts).
import { ADMISSION_DEFAULTS, PRIORITY_CLASSES, SCHEDULERS, type PriorityClass, type SchedulerKind } from '../core/admission.js';
import { CAPACITY_DEFAULTS } from '../core/capacity.js';
import { ConfigError } from './config-error.js';
import { checkBool, checkInt, checkNumber, isMapping, shown, type FieldCheck } from './checks.js';
import { SCHEDULER } from '../core/defaults.js';

export interface AdmissionConfig {
  /** Admission scheduler: off, fcfs, plas, atlas (Autellix), vtc. */
  scheduler: SchedulerKind;
  /** Its priority levels, level 0's bound (ms of service, doubling per level) and the anti-starvation β. */
  schedulerLevels: number;
  schedulerQuantumMs: number;
  schedulerBeta: number;
  /** Most requests waiting for admission (429 with Retry-After above), and the longest one may wait (504). */
  maxQueued: number;
  queueTimeoutMs: number;
  /** Prompt tokens a backend may have sent and not yet computed before it takes no more; 0 = no budget. */
  prefillBudgetTokens: number;
  /** KV usage (0..1) from which an engine takes no more requests until it frees some. */
  kvHighWatermark: number;
  /** Learn a concurrency limit per backend from its engine's /metrics (what it ran when it started queuing). */
  learnConcurrencyLimit: boolean;
  /** Priority class of a client's API key (high, normal, low), below an x-ear-priority header. */
  apiKeyPriority: Record<string, PriorityClass>;
  /**
   * API keys whose clients may set the engine's request `priority` themselves (their body's field is sent on as
   * they wrote it, in place of EAR's). Any other client's `priority` is dropped: it would jump an engine's queue.
   */
  enginePriorityKeys: string[];
}

export const ADMISSION_CONFIG_DEFAULTS: Readonly<AdmissionConfig> = Object.freeze({
  scheduler: SCHEDULER as SchedulerKind,
  schedulerLevels: ADMISSION_DEFAULTS.levels,
  schedulerQuantumMs: ADMISSION_DEFAULTS.quantumMs,
  schedulerBeta: ADMISSION_DEFAULTS.beta,
  maxQueued: ADMISSION_DEFAULTS.maxQueued,
  queueTimeoutMs: ADMISSION_DEFAULTS.queueTimeoutMs,
  prefillBudgetTokens: CAPACITY_DEFAULTS.prefillBudgetTokens,
  kvHighWatermark: CAPACITY_DEFAULTS.kvHighWatermark,
  learnConcurrencyLimit: CAPACITY_DEFAULTS.learnLimit,
  apiKeyPriority: {},
  enginePriorityKeys: []
});

export const ADMISSION_FIELDS: Record<keyof AdmissionConfig, FieldCheck> = {
  scheduler: (p, v) => {
    if (!(SCHEDULERS as readonly unknown[]).includes(v)) throw new ConfigError(p, `must be one of ${SCHEDULERS.join(', ')}, got ${shown(v)}`);
    return v;
  },
  schedulerLevels: (p, v) => checkInt(p, v, 1, 64),
  schedulerQuantumMs: (p, v) => checkInt(p, v, 1, 3_600_000),
  schedulerBeta: (p, v) => checkNumber(p, v, 0.01, 1e6),
  maxQueued: (p, v) => checkInt(p, v, 1, 1 << 20),
  queueTimeoutMs: (p, v) => checkInt(p, v, 1, 86_400_000),
  prefillBudgetTokens: (p, v) => checkInt(p, v, 0, 1 << 30),
  kvHighWatermark: (p, v) => checkNumber(p, v, 0.01, 1),
  learnConcurrencyLimit: (p, v) => checkBool(p, v),
  apiKeyPriority: (p, v) => {
    if (!isMapping(v)) throw new ConfigError(p, 'must be a mapping of API key to priority class');
    for (const [k, c] of Object.entries(v)) {
      if (!(PRIORITY_CLASSES as readonly unknown[]).includes(c)) throw new ConfigError(`${p}.<key ${k.slice(0, 4)}…>`, `must be one of ${PRIORITY_CLASSES.join(', ')}`);
    }
    return v;
  },
  enginePriorityKeys: (p, v) => {
    if (!Array.isArray(v)) throw new ConfigError(p, 'must be a list of API keys');
    return v.map((k, i) => {
      if (typeof k !== 'string' || k === '') throw new ConfigError(`${p}[${i}]`, 'must be a non-empty string (an API key)');
      return k;
    });
  }
};
