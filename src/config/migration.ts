// Moving a session's KV (src/migration/): the connectors the fleet offers, how one is chosen, the cost figures,
// and ear-proactive's migration thread.
import { TRANSFER_MODES, type TransferMode } from '../migration/cost.js';
import { ConfigError } from './config-error.js';
import { checkInt, shown, type FieldCheck } from './checks.js';
import { KV_CONNECTORS, PROACTIVE_INTERVAL_MS } from '../core/defaults.js';
import { DEFAULT_PROFILE } from '../engine-model/profile.js';

export interface MigrationConfig {
  /**
   * KV connectors the fleet offers for moving a session or a P/D request's KV (src/migration/): `nixl` (engines
   * run vLLM's NixlConnector), `shared-store` (engines share an LMCache / Mooncake store); `recompute` always.
   */
  kvConnectors: TransferMode[];
  /** `auto`: per transfer, the offered connector with the lowest estimated cost; or always the one named. */
  kvConnector: TransferMode | 'auto';
  /** Engine profile (src/engine-model/profiles) whose figures the cost estimate uses: KV bytes per token, link, prefill. */
  kvCostProfile: string;
  /** ear-proactive: how often the migration thread looks for idle sessions on hot pods to move (ms). */
  proactiveIntervalMs: number;
  /**
   * ear-proactive: bytes of session bodies the migration thread keeps (each session's last request, which a
   * proactive transfer replays); beyond it the least recently used go, counted.
   */
  proactiveBodyCacheBytes: number;
}

export const MIGRATION_DEFAULTS: Readonly<MigrationConfig> = Object.freeze({
  kvConnectors: [...KV_CONNECTORS] as TransferMode[],
  kvConnector: 'auto' as TransferMode | 'auto',
  kvCostProfile: DEFAULT_PROFILE,
  proactiveIntervalMs: PROACTIVE_INTERVAL_MS,
  proactiveBodyCacheBytes: 256 << 20
});

export const MIGRATION_FIELDS: Record<keyof MigrationConfig, FieldCheck> = {
  kvConnectors: (p, v) => {
    const list = typeof v === 'string' ? v.split(',').map((x) => x.trim()) : v;
    if (!Array.isArray(list) || list.length === 0) throw new ConfigError(p, 'must be a non-empty list of nixl, shared-store, recompute');
    for (const m of list) if (!(TRANSFER_MODES as readonly unknown[]).includes(m)) throw new ConfigError(p, `must list only ${TRANSFER_MODES.join(', ')}, got ${shown(m)}`);
    return [...new Set(list)];
  },
  kvConnector: (p, v) => {
    if (v !== 'auto' && !(TRANSFER_MODES as readonly unknown[]).includes(v)) throw new ConfigError(p, `must be auto or one of ${TRANSFER_MODES.join(', ')}, got ${shown(v)}`);
    return v;
  },
  kvCostProfile: (p, v) => {
    if (typeof v !== 'string' || !/^[a-z0-9][a-z0-9.-]*$/.test(v)) throw new ConfigError(p, `must name an engine profile, got ${shown(v)}`);
    return v;
  },
  proactiveIntervalMs: (p, v) => checkInt(p, v, 10, 3_600_000),
  // One MiB at least: a bound smaller than an agent's request body would keep nothing.
  proactiveBodyCacheBytes: (p, v) => checkInt(p, v, 1 << 20, 2 ** 40)
};
