// Gateway configuration: from a YAML file (--config) and/or command-line flags, validated once at start with
// messages that name the field and the rule, then frozen. Flags override the file.
import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import type { PodRole } from '../core/policy.js';
import { MAX_CONTEXT_TTL_SECONDS } from '../store/session-store.js';
import { REMOTE_TOKENIZER_DEFAULTS, remoteTokenizerUrl, type RemoteTokenizerOptions } from '../tokenize/remote.js';

export interface BackendConfig {
  id: string;
  url: string;
  /** ZeroMQ PUB endpoint of the engine's KV events. */
  kvEvents: string | null;
  /** ZeroMQ ROUTER endpoint for replay. */
  replay: string | null;
  /** Topic prefix the KV-event SUB filters on ('' takes every message, vLLM's default topic). */
  kvTopic: string;
  role: PodRole;
  /** KV capacity in blocks, for engines that do not export vllm:cache_config_info; null = unknown. */
  kvCapacityBlocks: number | null;
}

export interface GatewayConfig {
  host: string;
  port: number;
  backends: BackendConfig[];
  policy: string;
  /** Knobs of the chosen policy, passed through to it. */
  policyConfig: Record<string, unknown>;
  /** Bearer token for /admin/*; null disables the admin endpoints. */
  adminToken: string | null;
  /** Client API keys; empty means no client auth. */
  apiKeys: string[];
  /** Largest request body accepted, in bytes (413 above). */
  maxBodyBytes: number;
  /** Upstream attempts for one request: the first plus retries on connect errors / 5xx before any byte reached the client. */
  maxAttempts: number;
  /** Health check period (ms); a backend failing `unhealthyAfter` checks in a row is ejected, re-admitted on a success. */
  healthIntervalMs: number;
  unhealthyAfter: number;
  /** Engine /metrics poll period (ms); 0 disables polling. */
  metricsIntervalMs: number;
  /** Upstream timeouts (ms): headers (time to first byte) and body (gap between chunks). */
  upstreamHeadersTimeoutMs: number;
  upstreamBodyTimeoutMs: number;
  /** Keep-alive connections per backend. */
  connectionsPerBackend: number;
  /** Threads of the route pool. */
  routeThreads: number;
  /**
   * Tokenizer for block keys; 'character' hashes the bytes of the rendered prompt; 'remote:<engine URL>' asks
   * that engine's /tokenize (settings in remoteTokenizer).
   */
  tokenizer: string;
  /** Timeout per attempt, retries and circuit breaker of a remote tokenizer (src/tokenize/remote.ts). */
  remoteTokenizer: RemoteTokenizerOptions;
  /** Sessions whose previous tokens and block keys each route thread keeps for incremental turns (LRU). */
  sessionsPerRouteThread: number;
  /** Block size for block keys (the engines' block size in precise mode). */
  blockSize: number;
  /**
   * How long a routing decision's assumed presence stays in the prefix index (ms). null: 5 s when any backend
   * publishes KV events (precise mode: the engine's events are the truth, hints only bridge their delay),
   * else 20 min (approximate mode: the index learns only from routing).
   */
  assumedTtlMs: number | null;
  /** Engine block hashes mapped to EAR keys, per backend with KV events; at the bound the oldest go. */
  kvMaxMappedBlocks: number;
  /** Session bound and idle expiry. */
  maxSessions: number;
  sessionIdleMs: number;
  /** How long SIGTERM waits for in-flight requests before closing them. */
  drainTimeoutMs: number;
  /** Explicit contexts (POST /v1/context) live at once in this gateway; at the bound a new one is refused (429). */
  maxContexts: number;
  /** A context's TTL when the client gives no ttl_seconds. */
  contextTtlSeconds: number;
}

export const DEFAULTS: Readonly<Omit<GatewayConfig, 'backends'>> = Object.freeze({
  host: '0.0.0.0',
  port: 8080,
  policy: 'sticky',
  policyConfig: {},
  adminToken: null,
  apiKeys: [],
  maxBodyBytes: 32 << 20,
  maxAttempts: 3,
  healthIntervalMs: 2000,
  unhealthyAfter: 2,
  metricsIntervalMs: 1000,
  upstreamHeadersTimeoutMs: 600_000,
  upstreamBodyTimeoutMs: 600_000,
  connectionsPerBackend: 128,
  routeThreads: 2,
  tokenizer: 'character',
  remoteTokenizer: REMOTE_TOKENIZER_DEFAULTS,
  sessionsPerRouteThread: 4096,
  blockSize: 16,
  assumedTtlMs: null,
  kvMaxMappedBlocks: 1 << 18,
  maxSessions: 65536,
  sessionIdleMs: 1_800_000,
  drainTimeoutMs: 30_000,
  maxContexts: 100_000,
  contextTtlSeconds: 3600
});

export class ConfigError extends Error {
  readonly code = 'EAR_ERR_CONFIG';
  constructor (path: string, rule: string) {
    super(`config ${path}: ${rule}`);
    this.name = 'ConfigError';
  }
}

const ROLES: readonly PodRole[] = ['both', 'prefill', 'decode'];
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

function checkUrl (path: string, v: unknown, schemes: string[]): string {
  if (typeof v !== 'string' || v === '') throw new ConfigError(path, 'must be a non-empty string');
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(path, `"${v}" is not a URL`);
  }
  if (!schemes.includes(u.protocol)) throw new ConfigError(path, `"${v}" must use ${schemes.join(' or ')}`);
  return v.replace(/\/+$/, '');
}

function checkInt (path: string, v: unknown, min: number, max: number): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(path, `must be an integer in [${min}, ${max}], got ${JSON.stringify(v)}`);
  }
  return n;
}

function checkString (path: string, v: unknown): string {
  if (typeof v !== 'string' || v === '') throw new ConfigError(path, 'must be a non-empty string');
  return v;
}

function checkTopic (path: string, v: unknown): string {
  if (typeof v !== 'string') throw new ConfigError(path, 'must be a string (a prefix of the engine\'s KV-event topic)');
  return v;
}

function backend (path: string, raw: unknown, index: number): BackendConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError(path, 'must be a mapping');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) {
    if (!['id', 'url', 'kvEvents', 'kv-events', 'replay', 'topic', 'role', 'kvCapacityBlocks', 'kv-blocks'].includes(k)) throw new ConfigError(`${path}.${k}`, 'unknown field');
  }
  const url = checkUrl(`${path}.url`, r.url, ['http:', 'https:']);
  const id = r.id === undefined ? `backend-${index}` : checkString(`${path}.id`, r.id);
  if (!ID_RE.test(id)) throw new ConfigError(`${path}.id`, `"${id}" must match ${ID_RE}`);
  const kv = r.kvEvents ?? r['kv-events'];
  const kvBlocks = r.kvCapacityBlocks ?? r['kv-blocks'];
  const role = (r.role ?? 'both') as PodRole;
  if (!ROLES.includes(role)) throw new ConfigError(`${path}.role`, `must be one of ${ROLES.join(', ')}`);
  return {
    id,
    url,
    kvEvents: kv === undefined || kv === null ? null : checkUrl(`${path}.kv-events`, kv, ['tcp:', 'ipc:']),
    replay: r.replay === undefined || r.replay === null ? null : checkUrl(`${path}.replay`, r.replay, ['tcp:', 'ipc:']),
    kvTopic: r.topic === undefined || r.topic === null ? '' : checkTopic(`${path}.topic`, r.topic),
    role,
    kvCapacityBlocks: kvBlocks === undefined || kvBlocks === null ? null : checkInt(`${path}.kv-blocks`, kvBlocks, 1, 0xFFFFFFFF)
  };
}

/** Parses one `--backend URL[,id=NAME][,kv-events=tcp://H:P][,replay=tcp://H:P][,topic=PREFIX][,role=both|prefill|decode][,kv-blocks=N]` flag. */
export function parseBackendFlag (flag: string): Record<string, string> {
  const [url, ...opts] = flag.split(',');
  const out: Record<string, string> = { url };
  for (const o of opts) {
    const eq = o.indexOf('=');
    if (eq <= 0) throw new ConfigError('--backend', `"${o}" is not key=value (in "${flag}")`);
    out[o.slice(0, eq)] = o.slice(eq + 1);
  }
  return out;
}

const FIELDS: Record<string, (path: string, v: unknown) => unknown> = {
  host: checkString,
  port: (p, v) => checkInt(p, v, 0, 65535),
  policy: checkString,
  policyConfig: (p, v) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ConfigError(p, 'must be a mapping');
    return v;
  },
  adminToken: (p, v) => (v === null ? null : checkString(p, v)),
  apiKeys: (p, v) => {
    if (!Array.isArray(v)) throw new ConfigError(p, 'must be a list of strings');
    return v.map((k, i) => checkString(`${p}[${i}]`, k));
  },
  maxBodyBytes: (p, v) => checkInt(p, v, 1024, 1 << 30),
  maxAttempts: (p, v) => checkInt(p, v, 1, 10),
  healthIntervalMs: (p, v) => checkInt(p, v, 50, 3_600_000),
  unhealthyAfter: (p, v) => checkInt(p, v, 1, 100),
  metricsIntervalMs: (p, v) => checkInt(p, v, 0, 3_600_000),
  upstreamHeadersTimeoutMs: (p, v) => checkInt(p, v, 100, 86_400_000),
  upstreamBodyTimeoutMs: (p, v) => checkInt(p, v, 100, 86_400_000),
  connectionsPerBackend: (p, v) => checkInt(p, v, 1, 10_000),
  routeThreads: (p, v) => checkInt(p, v, 1, 64),
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
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ConfigError(p, 'must be a mapping');
    const r = v as Record<string, unknown>;
    const limits: Record<keyof RemoteTokenizerOptions, [number, number]> = {
      timeoutMs: [1, 600_000], retries: [0, 10], breakerFailures: [1, 1000], breakerCooldownMs: [0, 3_600_000]
    };
    const out: Record<string, number> = { ...REMOTE_TOKENIZER_DEFAULTS };
    for (const [k, x] of Object.entries(r)) {
      const lim = limits[k as keyof RemoteTokenizerOptions];
      if (lim === undefined) throw new ConfigError(`${p}.${k}`, `unknown field (known: ${Object.keys(limits).join(', ')})`);
      out[k] = checkInt(`${p}.${k}`, x, lim[0], lim[1]);
    }
    return out;
  },
  sessionsPerRouteThread: (p, v) => checkInt(p, v, 1, 1 << 20),
  blockSize: (p, v) => checkInt(p, v, 1, 4096),
  assumedTtlMs: (p, v) => (v === null ? null : checkInt(p, v, 0, 2 ** 31 - 1)),
  kvMaxMappedBlocks: (p, v) => checkInt(p, v, 1024, 1 << 26),
  maxSessions: (p, v) => checkInt(p, v, 16, 1 << 24),
  sessionIdleMs: (p, v) => checkInt(p, v, 1000, 86_400_000 * 7),
  drainTimeoutMs: (p, v) => checkInt(p, v, 0, 3_600_000),
  maxContexts: (p, v) => checkInt(p, v, 1, 1 << 24),
  contextTtlSeconds: (p, v) => checkInt(p, v, 1, MAX_CONTEXT_TTL_SECONDS)
};

/**
 * Builds the configuration from a parsed YAML document (or {}) and flag overrides, validating every field.
 * `flags.backend` holds the raw `--backend` strings; any backend flag replaces the file's list.
 */
export function buildConfig (file: Record<string, unknown>, flags: Record<string, unknown> = {}): Readonly<GatewayConfig> {
  const merged: Record<string, unknown> = { ...file };
  for (const [k, v] of Object.entries(flags)) if (k !== 'backend' && v !== undefined) merged[k] = v;
  const cfg: Record<string, unknown> = { ...DEFAULTS };
  for (const [k, v] of Object.entries(merged)) {
    if (k === 'backends') continue;
    const check = FIELDS[k];
    if (!check) throw new ConfigError(k, `unknown field (known: backends, ${Object.keys(FIELDS).join(', ')})`);
    cfg[k] = check(k, v);
  }
  const flagBackends = (flags.backend as string[] | undefined) ?? [];
  const rawBackends: unknown = flagBackends.length > 0 ? flagBackends.map(parseBackendFlag) : (merged.backends ?? []);
  if (!Array.isArray(rawBackends)) throw new ConfigError('backends', 'must be a list');
  const backends = rawBackends.map((b, i) => backend(`backends[${i}]`, b, i));
  const ids = new Set<string>();
  for (const [i, b] of backends.entries()) {
    if (ids.has(b.id)) throw new ConfigError(`backends[${i}].id`, `"${b.id}" is used twice`);
    ids.add(b.id);
  }
  cfg.backends = backends;
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
