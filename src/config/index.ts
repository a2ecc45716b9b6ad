// The gateway's configuration, composed from its sections (one file each, with its defaults and checks) and
// validated once at start: a YAML file (--config) and/or flags, flags over the file, every field checked with a
// message that names it and the rule, then frozen. `ear serve`, `ear epp`, discovery and the lab read it from here.
import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import { ConfigError } from './config-error.js';
import { isMapping, type FieldCheck } from './checks.js';
import { SERVER_DEFAULTS, SERVER_FIELDS, type ServerConfig } from './server.js';
import { CLIENTS_DEFAULTS, CLIENTS_FIELDS, checkRateLimitKeys, type ClientsConfig } from './clients.js';
import { checkBackends, parseBackendFlag, type BackendConfig } from './backends.js';
import { UPSTREAM_DEFAULTS, UPSTREAM_FIELDS, type UpstreamConfig } from './upstream.js';
import { DISCOVERY_SECTION_DEFAULTS, DISCOVERY_SECTION_FIELDS, type DiscoverySection } from './discovery.js';
import { ROUTING_DEFAULTS, ROUTING_FIELDS, type RoutingConfig } from './routing.js';
import { FEATURES_DEFAULTS, FEATURES_FIELDS, type FeaturesConfig } from './features.js';
import { PREFIX_INDEX_DEFAULTS, PREFIX_INDEX_FIELDS, type PrefixIndexConfig } from './prefix-index.js';
import { SESSIONS_DEFAULTS, SESSIONS_FIELDS, type SessionsConfig } from './sessions.js';
import { ADMISSION_CONFIG_DEFAULTS, ADMISSION_FIELDS, type AdmissionConfig } from './admission.js';
import { MIGRATION_DEFAULTS, MIGRATION_FIELDS, type MigrationConfig } from './migration.js';
import { HA_SECTION_DEFAULTS, HA_SECTION_FIELDS, type HaSection } from './ha.js';
import { POD_ROWS_DEFAULTS, POD_ROWS_FIELDS, type PodRowsConfig } from './pod-rows.js';
import { RETENTION_CONFIG_DEFAULTS, RETENTION_FIELDS, type RetentionConfig } from './retention.js';
import { followMaxPods } from './discovery.js';

export { ConfigError } from './config-error.js';
export { parseBackendFlag, type BackendConfig } from './backends.js';
export { checkLabelSelector, DISCOVERY_DEFAULTS, type DiscoveryConfig } from './discovery.js';
import type { DiscoveryConfig } from './discovery.js';

export interface GatewayConfig extends ServerConfig, ClientsConfig, UpstreamConfig, DiscoverySection, RoutingConfig,
  FeaturesConfig, PrefixIndexConfig, SessionsConfig, AdmissionConfig, MigrationConfig, HaSection, PodRowsConfig, RetentionConfig {
  backends: BackendConfig[];
  /**
   * Whether httpThreads came from `auto` (buildConfig says, it is not a setting): then the gateway may lower it to
   * what the shared region holds (fitHttpThreads in src/gateway/ear.ts).
   */
  httpThreadsAuto: boolean;
}

export const DEFAULTS: Readonly<Omit<GatewayConfig, 'backends' | 'httpThreadsAuto'>> = Object.freeze({
  ...SERVER_DEFAULTS,
  ...CLIENTS_DEFAULTS,
  ...UPSTREAM_DEFAULTS,
  ...DISCOVERY_SECTION_DEFAULTS,
  ...ROUTING_DEFAULTS,
  ...FEATURES_DEFAULTS,
  ...PREFIX_INDEX_DEFAULTS,
  ...SESSIONS_DEFAULTS,
  ...ADMISSION_CONFIG_DEFAULTS,
  ...MIGRATION_DEFAULTS,
  ...HA_SECTION_DEFAULTS,
  ...POD_ROWS_DEFAULTS,
  ...RETENTION_CONFIG_DEFAULTS
});

/** Every top-level field but `backends`, with its check. */
const FIELDS: Record<keyof typeof DEFAULTS, FieldCheck> = {
  ...SERVER_FIELDS,
  ...CLIENTS_FIELDS,
  ...UPSTREAM_FIELDS,
  ...DISCOVERY_SECTION_FIELDS,
  ...ROUTING_FIELDS,
  ...FEATURES_FIELDS,
  ...PREFIX_INDEX_FIELDS,
  ...SESSIONS_FIELDS,
  ...ADMISSION_FIELDS,
  ...MIGRATION_FIELDS,
  ...HA_SECTION_FIELDS,
  ...POD_ROWS_FIELDS,
  ...RETENTION_FIELDS
};

/**
 * Builds the configuration from a parsed YAML document (or {}) and flag overrides, validating every field.
 * `flags.backend` holds the raw `--backend` strings; any backend flag replaces the file's list.
 */
export function buildConfig (file: Record<string, unknown>, flags: Record<string, unknown> = {}): Readonly<GatewayConfig> {
  const merged: Record<string, unknown> = { ...file };
  for (const [k, v] of Object.entries(flags)) {
    if (k === 'backend' || v === undefined) continue;
    // Discovery flags (--discovery, --kubeconfig, …) override single fields of the file's `discovery` mapping.
    if (k === 'discovery' && isMapping(v)) {
      const set = Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined));
      if (Object.keys(set).length === 0) continue;
      merged.discovery = { ...(isMapping(merged.discovery) ? merged.discovery : {}), ...set };
    } else merged[k] = v;
  }
  const cfg: Record<string, unknown> = { ...DEFAULTS };
  for (const [k, v] of Object.entries(merged)) {
    if (k === 'backends') continue;
    // Own fields only: `__proto__`, `constructor`, `toString` are keys a YAML file may hold, not checks.
    const check = Object.hasOwn(FIELDS, k) ? FIELDS[k as keyof typeof FIELDS] : undefined;
    if (!check) throw new ConfigError(k, `unknown field (known: backends, ${Object.keys(FIELDS).join(', ')})`);
    cfg[k] = check(k, v);
  }
  const flagBackends = (flags.backend as string[] | undefined) ?? [];
  const backends = checkBackends(flagBackends.length > 0 ? flagBackends.map(parseBackendFlag) : (merged.backends ?? []));
  cfg.backends = backends;
  cfg.httpThreadsAuto = merged.httpThreads === 'auto';
  if (cfg.discovery !== null && cfg.discovery !== undefined && backends.length > 0) {
    throw new ConfigError('backends', 'must be empty with discovery (the discovered pods are the backends)');
  }
  const maxPods = cfg.maxPods as number;
  if (backends.length > maxPods) {
    throw new ConfigError('backends', `lists ${backends.length} backends but maxPods is ${maxPods} (one pod row each): raise maxPods`);
  }
  if (cfg.discovery !== null && cfg.discovery !== undefined) {
    cfg.discovery = followMaxPods(cfg.discovery as DiscoveryConfig, isMapping(merged.discovery) ? merged.discovery.maxPods : undefined, maxPods);
  }
  checkRateLimitKeys(cfg as unknown as GatewayConfig);
  return deepFreeze(cfg as unknown as GatewayConfig);
}

export function loadConfigFile (path: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = YAML.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new ConfigError(path, `cannot be read as YAML: ${(err as Error).message}`);
  }
  if (doc === null || doc === undefined) return {};
  if (typeof doc !== 'object' || Array.isArray(doc)) throw new ConfigError(path, 'must hold a mapping at the top');
  return doc as Record<string, unknown>;
}

function deepFreeze<T> (o: T): T {
  if (o && typeof o === 'object' && !Object.isFrozen(o)) {
    Object.freeze(o);
    for (const v of Object.values(o as Record<string, unknown>)) deepFreeze(v);
  }
  return o;
}
