// Gateway configuration: from a YAML file (--config) and/or command-line flags, validated once at start with
// messages that name the field and the rule, then frozen. Flags override the file.
import { TRANSFER_MODES, type TransferMode } from '../migration/cost.js';
import { readFileSync } from 'node:fs';
import YAML from 'yaml';
import type { PodRole } from '../core/policy.js';
import { ADMISSION_DEFAULTS, PRIORITY_CLASSES, SCHEDULERS, type PriorityClass, type SchedulerKind } from '../core/admission.js';
import { CAPACITY_DEFAULTS } from '../core/capacity.js';
import { USER_USAGE_DEFAULTS, type UserUsageOptions } from '../core/user-usage.js';
import { MAX_CONTEXT_TTL_SECONDS } from '../store/session-store.js';
import { REMOTE_TOKENIZER_DEFAULTS, remoteTokenizerUrl, type RemoteTokenizerOptions } from '../tokenize/remote.js';
import { parseSessionStoreSpec } from '../store/session-store.js';
import type { BucketLimit } from './rate-limit.js';
import { DEFAULT_REGION_CONFIG } from '../core/region.js';
import { DEFAULT_PROFILE } from '../engine-model/profile.js';
import { BLOCK_SIZE, KV_CONNECTORS, MAX_MAPPED_BLOCKS, MAX_SESSIONS, METRICS_INTERVAL_MS, PROACTIVE_INTERVAL_MS, SCHEDULER, SESSION_IDLE_MS } from '../core/defaults.js';
import { checkHa, HA_DEFAULTS, type HaConfig } from '../ha/ha-config.js';
import { DNS_LABEL, DNS_SUBDOMAIN } from '../kube/names.js';

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
  /** Requests in flight the admission scheduler lets this backend hold; null = as its engine's figures say. */
  maxConcurrent: number | null;
  /** The engine's own API key (vLLM --api-key), sent upstream as `Authorization: Bearer`; from config only. */
  apiKey: string | null;
}

/** Where backends come from when not listed: Kubernetes pods (src/discovery/). */
export interface DiscoveryConfig {
  kind: 'k8s';
  /** Kubeconfig file; '' = in-cluster (KUBERNETES_SERVICE_HOST) else KUBECONFIG / ~/.kube/config. */
  kubeconfig: string;
  /** '' = the pod's own (POD_NAMESPACE, else the service account's namespace file, else the kubeconfig context's, else "default"). */
  namespace: string;
  /** Pods watched (Kubernetes label selector syntax); not used with inferencePool, whose selector picks the pods. */
  labelSelector: string;
  /** An inference.networking.k8s.io/v1 InferencePool whose spec.selector.matchLabels and spec.targetPorts[0] are used; '' = none. */
  inferencePool: string;
  /** Engine HTTP port without an InferencePool. */
  port: number;
  roleLabel: string;
  modelLabel: string;
  /** Pods with this label "true" are followed for KV events at kvEventsPort, replay at kvReplayPort. */
  kvEventsLabel: string;
  kvEventsPort: number;
  kvReplayPort: number;
  /** Pods taken as backends at once; more matching pods wait (logged, counted) until one leaves. */
  maxPods: number;
}

export const DISCOVERY_DEFAULTS: Readonly<DiscoveryConfig> = Object.freeze({
  kind: 'k8s',
  kubeconfig: '',
  namespace: '',
  labelSelector: 'app=vllm',
  inferencePool: '',
  port: 8000,
  roleLabel: 'llm-d.ai/role',
  modelLabel: 'llm-d.ai/model',
  kvEventsLabel: 'model.aibrix.ai/kv-events-enabled',
  kvEventsPort: 5557,
  kvReplayPort: 5558,
  // One pod row each (src/core/pod-rows.ts): the region holds DEFAULT_REGION_CONFIG.pods, and a rolling update
  // needs free rows for the surge while the old pods' rows are still being released.
  maxPods: DEFAULT_REGION_CONFIG.pods
});

/** Per-client token buckets (src/gateway/rate-limit.ts); off by default. */
export interface RateLimitsConfig {
  /** Every API key without its own entry; null: no limit. */
  default: BucketLimit | null;
  /** Per API key: each one of `apiKeys`. */
  keys: Record<string, BucketLimit>;
  /** Per client IP address, when no `apiKeys` are configured; null: no limit. */
  perIp: BucketLimit | null;
  /** Buckets kept at once; beyond, the least recently used goes. */
  maxBuckets: number;
}

export interface GatewayConfig {
  host: string;
  port: number;
  backends: BackendConfig[];
  /** Backends discovered (Kubernetes pods) rather than listed; null = the static `backends` list. */
  discovery: DiscoveryConfig | null;
  policy: string;
  /** Knobs of the chosen policy, passed through to it. */
  policyConfig: Record<string, unknown>;
  /** Bearer token for /admin/*; null disables the admin endpoints. */
  adminToken: string | null;
  /** Client API keys; empty means no client auth. */
  apiKeys: string[];
  /** Token-bucket rate limits per API key (or per client IP without keys): 429 with Retry-After beyond. */
  rateLimits: RateLimitsConfig;
  /** Largest request body accepted, in bytes (413 above). */
  maxBodyBytes: number;
  /**
   * The whole request body must arrive within this long of its headers (ms), else 408 and the connection closes.
   * uWebSockets.js itself closes, unanswered, a body slower than about 16 KB/s; this bounds faster trickles too.
   */
  clientBodyTimeoutMs: number;
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
  /** Requests that may wait for one of a backend's connections; beyond, the request tries another backend (or 503). */
  upstreamMaxQueued: number;
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
  /** Admission scheduler (src/core/admission.ts): off, fcfs, plas, atlas (Autellix), vtc. */
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
   * Where session state lives: `memory` (the local session table only) or `redis://HOST[:PORT][/DB]`, shared by
   * every replica that names the same server (src/gateway/shared-sessions.ts).
   */
  sessionStore: string;
  /** Longest wait for a shared store's reply (ms); past it the request goes on from the local table. */
  sessionStoreTimeoutMs: number;
  /** The per-user token window fairness policies read (src/core/user-usage.ts): window, buckets, token weights, bound. */
  userWindow: Required<UserUsageOptions>;
  /** Explicit contexts (POST /v1/context) live at once in this gateway; at the bound a new one is refused (429). */
  maxContexts: number;
  /** A context's TTL when the client gives no ttl_seconds. */
  contextTtlSeconds: number;
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
  /** Several replicas: active-active (default), or active-passive with a Kubernetes Lease (src/ha/ha-config.ts). */
  ha: HaConfig;
}

export const DEFAULTS: Readonly<Omit<GatewayConfig, 'backends'>> = Object.freeze({
  host: '0.0.0.0',
  port: 8080,
  discovery: null,
  policy: 'ear',
  policyConfig: {},
  adminToken: null,
  apiKeys: [],
  rateLimits: { default: null, keys: {}, perIp: null, maxBuckets: 65_536 },
  maxBodyBytes: 32 << 20,
  clientBodyTimeoutMs: 30_000,
  maxAttempts: 3,
  healthIntervalMs: 2000,
  unhealthyAfter: 2,
  metricsIntervalMs: METRICS_INTERVAL_MS,
  upstreamHeadersTimeoutMs: 600_000,
  upstreamBodyTimeoutMs: 600_000,
  connectionsPerBackend: 128,
  upstreamMaxQueued: 4096,
  routeThreads: 2,
  tokenizer: 'character',
  remoteTokenizer: REMOTE_TOKENIZER_DEFAULTS,
  sessionsPerRouteThread: 4096,
  blockSize: BLOCK_SIZE,
  assumedTtlMs: null,
  kvMaxMappedBlocks: MAX_MAPPED_BLOCKS,
  maxSessions: MAX_SESSIONS,
  sessionIdleMs: SESSION_IDLE_MS,
  drainTimeoutMs: 30_000,
  kvConnectors: [...KV_CONNECTORS] as TransferMode[],
  kvConnector: 'auto' as TransferMode | 'auto',
  kvCostProfile: DEFAULT_PROFILE,
  proactiveIntervalMs: PROACTIVE_INTERVAL_MS,
  proactiveBodyCacheBytes: 256 << 20,
  scheduler: SCHEDULER,
  schedulerLevels: ADMISSION_DEFAULTS.levels,
  schedulerQuantumMs: ADMISSION_DEFAULTS.quantumMs,
  schedulerBeta: ADMISSION_DEFAULTS.beta,
  maxQueued: ADMISSION_DEFAULTS.maxQueued,
  queueTimeoutMs: ADMISSION_DEFAULTS.queueTimeoutMs,
  prefillBudgetTokens: CAPACITY_DEFAULTS.prefillBudgetTokens,
  kvHighWatermark: CAPACITY_DEFAULTS.kvHighWatermark,
  learnConcurrencyLimit: CAPACITY_DEFAULTS.learnLimit,
  apiKeyPriority: {},
  sessionStore: 'memory',
  sessionStoreTimeoutMs: 50,
  userWindow: USER_USAGE_DEFAULTS,
  maxContexts: 100_000,
  contextTtlSeconds: 3600,
  ha: HA_DEFAULTS
});

export class ConfigError extends Error {
  readonly code = 'EAR_ERR_CONFIG';
  constructor (path: string, rule: string) {
    super(`config ${path}: ${rule}`);
    this.name = 'ConfigError';
  }
}

/** A value as an error message shows it; never a throw (YAML aliases can make a value cyclic, and JSON has no BigInt). */
function shown (v: unknown): string {
  try {
    const s = JSON.stringify(v) ?? String(v);
    return s.length > 200 ? `${s.slice(0, 200)}…` : s;
  } catch {
    return `a ${Array.isArray(v) ? 'list' : typeof v} that cannot be shown`;
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
    throw new ConfigError(path, `must be an integer in [${min}, ${max}], got ${shown(v)}`);
  }
  return n;
}

function checkString (path: string, v: unknown): string {
  if (typeof v !== 'string' || v === '') throw new ConfigError(path, 'must be a non-empty string');
  return v;
}

/** A secret sent in a header: non-empty, printable ASCII without spaces (nothing that could split a header). */
function checkHeaderValue (path: string, v: unknown): string {
  if (typeof v !== 'string' || !/^[\x21-\x7e]+$/.test(v)) throw new ConfigError(path, 'must be a non-empty string of printable ASCII without spaces');
  return v;
}

function checkBucket (path: string, v: unknown): BucketLimit | null {
  if (v === null) return null;
  if (typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(path, 'must be a mapping {requestsPerSecond, burst} or null');
  const r = v as Record<string, unknown>;
  for (const k of Object.keys(r)) if (k !== 'requestsPerSecond' && k !== 'burst') throw new ConfigError(`${path}.${k}`, 'unknown field (known: requestsPerSecond, burst)');
  if (r.requestsPerSecond === undefined) throw new ConfigError(`${path}.requestsPerSecond`, 'is required');
  const rate = checkNumber(`${path}.requestsPerSecond`, r.requestsPerSecond, 0.001, 1_000_000);
  const burst = r.burst === undefined ? Math.max(1, Math.ceil(rate)) : checkInt(`${path}.burst`, r.burst, 1, 1_000_000);
  return { requestsPerSecond: rate, burst };
}

function checkRateLimits (p: string, v: unknown): RateLimitsConfig {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ConfigError(p, 'must be a mapping');
  const r = v as Record<string, unknown>;
  const out: RateLimitsConfig = { ...DEFAULTS.rateLimits, keys: {} };
  for (const [k, x] of Object.entries(r)) {
    if (k === 'default' || k === 'perIp') out[k] = checkBucket(`${p}.${k}`, x);
    else if (k === 'maxBuckets') out.maxBuckets = checkInt(`${p}.maxBuckets`, x, 1, 1 << 24);
    else if (k === 'keys') {
      if (typeof x !== 'object' || x === null || Array.isArray(x)) throw new ConfigError(`${p}.keys`, 'must be a mapping of API key to {requestsPerSecond, burst}');
      // A key is never printed whole in an error: its first characters say which one.
      for (const [key, lim] of Object.entries(x)) out.keys[key] = checkBucket(`${p}.keys.<key ${key.slice(0, 4)}…>`, lim) ?? failNull(`${p}.keys.<key ${key.slice(0, 4)}…>`);
    } else throw new ConfigError(`${p}.${k}`, 'unknown field (known: default, keys, perIp, maxBuckets)');
  }
  return out;
}

function failNull (path: string): never {
  throw new ConfigError(path, 'must be a mapping {requestsPerSecond, burst}');
}

function checkTopic (path: string, v: unknown): string {
  if (typeof v !== 'string') throw new ConfigError(path, 'must be a string (a prefix of the engine\'s KV-event topic)');
  return v;
}

function backend (path: string, raw: unknown, index: number): BackendConfig {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw new ConfigError(path, 'must be a mapping');
  const r = raw as Record<string, unknown>;
  for (const k of Object.keys(r)) {
    if (!['id', 'url', 'kvEvents', 'kv-events', 'replay', 'topic', 'role', 'kvCapacityBlocks', 'kv-blocks', 'maxConcurrent', 'max-concurrent', 'apiKey', 'api-key'].includes(k)) throw new ConfigError(`${path}.${k}`, 'unknown field');
  }
  const url = checkUrl(`${path}.url`, r.url, ['http:', 'https:']);
  const id = r.id === undefined ? `backend-${index}` : checkString(`${path}.id`, r.id);
  if (!ID_RE.test(id)) throw new ConfigError(`${path}.id`, `"${id}" must match ${ID_RE}`);
  const kv = r.kvEvents ?? r['kv-events'];
  const kvBlocks = r.kvCapacityBlocks ?? r['kv-blocks'];
  const maxConcurrent = r.maxConcurrent ?? r['max-concurrent'];
  const apiKey = r.apiKey ?? r['api-key'];
  const role = (r.role ?? 'both') as PodRole;
  if (!ROLES.includes(role)) throw new ConfigError(`${path}.role`, `must be one of ${ROLES.join(', ')}`);
  return {
    id,
    url,
    kvEvents: kv === undefined || kv === null ? null : checkUrl(`${path}.kv-events`, kv, ['tcp:', 'ipc:']),
    replay: r.replay === undefined || r.replay === null ? null : checkUrl(`${path}.replay`, r.replay, ['tcp:', 'ipc:']),
    kvTopic: r.topic === undefined || r.topic === null ? '' : checkTopic(`${path}.topic`, r.topic),
    role,
    kvCapacityBlocks: kvBlocks === undefined || kvBlocks === null ? null : checkInt(`${path}.kv-blocks`, kvBlocks, 1, 0xFFFFFFFF),
    maxConcurrent: maxConcurrent === undefined || maxConcurrent === null ? null : checkInt(`${path}.max-concurrent`, maxConcurrent, 1, 1_000_000),
    apiKey: apiKey === undefined || apiKey === null ? null : checkHeaderValue(`${path}.apiKey`, apiKey)
  };
}

/** Parses one `--backend URL[,id=NAME][,kv-events=tcp://H:P][,replay=tcp://H:P][,topic=PREFIX][,role=both|prefill|decode][,kv-blocks=N][,max-concurrent=N][,api-key=KEY]` flag. */
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

// A Kubernetes label key is [prefix/]name: prefix a DNS subdomain, name up to 63 characters.
const K8S_LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

function checkLabelKey (path: string, v: unknown): string {
  const key = checkString(path, v);
  const slash = key.lastIndexOf('/');
  const prefix = slash < 0 ? null : key.slice(0, slash);
  if ((prefix !== null && !DNS_SUBDOMAIN.test(prefix)) || !K8S_LABEL_NAME.test(key.slice(slash + 1))) {
    throw new ConfigError(path, `"${key}" is not a Kubernetes label key ([DNS-subdomain/]name, name up to 63 of A-Z a-z 0-9 - _ .)`);
  }
  return key;
}

/**
 * A label selector as the API server takes it: comma-separated requirements `k`, `!k`, `k=v`, `k==v`, `k!=v`,
 * `k in (a,b)`, `k notin (a,b)`. Checked here so that a typo fails at start, not as a 400 on every list.
 */
export function checkLabelSelector (path: string, v: unknown): string {
  if (typeof v !== 'string') throw new ConfigError(path, 'must be a string (a Kubernetes label selector)');
  const value = '[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?';
  const req = new RegExp(`^\\s*(!?\\s*[^\\s=!,()]+|[^\\s=!,()]+\\s*(==|=|!=)\\s*(${value})?|[^\\s=!,()]+\\s+(in|notin)\\s*\\(\\s*(${value})?(\\s*,\\s*(${value})?)*\\s*\\))\\s*$`);
  // Split on commas outside parentheses.
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < v.length; i++) {
    if (v[i] === '(') depth++;
    else if (v[i] === ')') depth--;
    else if (v[i] === ',' && depth === 0) {
      parts.push(v.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(v.slice(start));
  if (v.trim() === '') return '';
  for (const p of parts) {
    if (!req.test(p)) throw new ConfigError(path, `"${p.trim()}" in "${v}" is not a label selector requirement (k, !k, k=v, k!=v, k in (a,b), k notin (a,b))`);
    const key = /^\s*!?\s*([^\s=!,()]+)/.exec(p)![1];
    checkLabelKey(`${path} (key "${key}")`, key);
  }
  return v.trim();
}

const DISCOVERY_FIELDS = Object.keys(DISCOVERY_DEFAULTS);

function checkDiscovery (p: string, v: unknown): DiscoveryConfig | null {
  if (v === null) return null;
  if (typeof v !== 'object' || Array.isArray(v)) throw new ConfigError(p, 'must be a mapping (kind: k8s, …) or null');
  const r = v as Record<string, unknown>;
  for (const k of Object.keys(r)) if (!DISCOVERY_FIELDS.includes(k)) throw new ConfigError(`${p}.${k}`, `unknown field (known: ${DISCOVERY_FIELDS.join(', ')})`);
  if (r.kind !== 'k8s') throw new ConfigError(`${p}.kind`, `must be k8s (the only discovery there is), got ${shown(r.kind)}`);
  const out: DiscoveryConfig = { ...DISCOVERY_DEFAULTS };
  const str = (k: string): string => {
    const x = r[k];
    if (x === undefined || x === null) return '';
    if (typeof x !== 'string') throw new ConfigError(`${p}.${k}`, `must be a string, got ${shown(x)}`);
    return x.trim();
  };
  out.kubeconfig = str('kubeconfig');
  out.namespace = str('namespace');
  if (out.namespace !== '' && !DNS_LABEL.test(out.namespace)) throw new ConfigError(`${p}.namespace`, `"${out.namespace}" is not a namespace name (DNS-1123 label)`);
  out.inferencePool = str('inferencePool');
  if (out.inferencePool !== '' && !DNS_SUBDOMAIN.test(out.inferencePool)) throw new ConfigError(`${p}.inferencePool`, `"${out.inferencePool}" is not an object name (DNS-1123 subdomain)`);
  // With an inferencePool its selector picks the pods and labelSelector is not used (the Helm chart writes both:
  // the pool's matchLabels as a selector); it must still be one.
  if (r.labelSelector !== undefined) out.labelSelector = checkLabelSelector(`${p}.labelSelector`, r.labelSelector);
  for (const k of ['roleLabel', 'modelLabel', 'kvEventsLabel'] as const) if (r[k] !== undefined) out[k] = checkLabelKey(`${p}.${k}`, r[k]);
  for (const k of ['port', 'kvEventsPort', 'kvReplayPort'] as const) if (r[k] !== undefined) out[k] = checkInt(`${p}.${k}`, r[k], 1, 65535);
  if (out.kvEventsPort === out.kvReplayPort) throw new ConfigError(`${p}.kvReplayPort`, `must differ from kvEventsPort (${out.kvEventsPort})`);
  if (r.maxPods !== undefined) out.maxPods = checkInt(`${p}.maxPods`, r.maxPods, 1, DEFAULT_REGION_CONFIG.pods);
  return out;
}

const FIELDS: Record<string, (path: string, v: unknown) => unknown> = {
  host: checkString,
  discovery: checkDiscovery,
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
  rateLimits: checkRateLimits,
  maxBodyBytes: (p, v) => checkInt(p, v, 1024, 1 << 30),
  clientBodyTimeoutMs: (p, v) => checkInt(p, v, 100, 3_600_000),
  maxAttempts: (p, v) => checkInt(p, v, 1, 10),
  healthIntervalMs: (p, v) => checkInt(p, v, 50, 3_600_000),
  unhealthyAfter: (p, v) => checkInt(p, v, 1, 100),
  metricsIntervalMs: (p, v) => checkInt(p, v, 0, 3_600_000),
  upstreamHeadersTimeoutMs: (p, v) => checkInt(p, v, 100, 86_400_000),
  upstreamBodyTimeoutMs: (p, v) => checkInt(p, v, 100, 86_400_000),
  connectionsPerBackend: (p, v) => checkInt(p, v, 1, 10_000),
  upstreamMaxQueued: (p, v) => checkInt(p, v, 1, 1 << 20),
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
      const lim = Object.hasOwn(limits, k) ? limits[k as keyof RemoteTokenizerOptions] : undefined;
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
  scheduler: (p, v) => {
    if (!(SCHEDULERS as readonly unknown[]).includes(v)) throw new ConfigError(p, `must be one of ${SCHEDULERS.join(', ')}, got ${shown(v)}`);
    return v;
  },
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
  schedulerLevels: (p, v) => checkInt(p, v, 1, 64),
  schedulerQuantumMs: (p, v) => checkInt(p, v, 1, 3_600_000),
  schedulerBeta: (p, v) => checkNumber(p, v, 0.01, 1e6),
  maxQueued: (p, v) => checkInt(p, v, 1, 1 << 20),
  queueTimeoutMs: (p, v) => checkInt(p, v, 1, 86_400_000),
  prefillBudgetTokens: (p, v) => checkInt(p, v, 0, 1 << 30),
  kvHighWatermark: (p, v) => checkNumber(p, v, 0.01, 1),
  learnConcurrencyLimit: (p, v) => {
    if (typeof v !== 'boolean') throw new ConfigError(p, `must be true or false, got ${shown(v)}`);
    return v;
  },
  apiKeyPriority: (p, v) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ConfigError(p, 'must be a mapping of API key to priority class');
    for (const [k, c] of Object.entries(v)) {
      if (!(PRIORITY_CLASSES as readonly unknown[]).includes(c)) throw new ConfigError(`${p}.<key ${k.slice(0, 4)}…>`, `must be one of ${PRIORITY_CLASSES.join(', ')}`);
    }
    return v;
  },
  sessionStore: (p, v) => {
    try {
      parseSessionStoreSpec(v, p);
    } catch (err) {
      throw new ConfigError(p, (err as Error).message.slice(`config ${p}: `.length));
    }
    return (v as string).trim();
  },
  sessionStoreTimeoutMs: (p, v) => checkInt(p, v, 1, 60_000),
  userWindow: (p, v) => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ConfigError(p, 'must be a mapping');
    const out: Record<string, number> = { ...USER_USAGE_DEFAULTS };
    const fields: Record<keyof UserUsageOptions, (path: string, x: unknown) => number> = {
      windowMs: (q, x) => checkInt(q, x, 1000, 86_400_000),
      buckets: (q, x) => checkInt(q, x, 1, 1024),
      inputWeight: checkWeight,
      outputWeight: checkWeight,
      maxUsers: (q, x) => checkInt(q, x, 1, 1 << 24)
    };
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      const check = Object.hasOwn(fields, k) ? fields[k as keyof UserUsageOptions] : undefined;
      if (check === undefined) throw new ConfigError(`${p}.${k}`, `unknown field (known: ${Object.keys(fields).join(', ')})`);
      out[k] = check(`${p}.${k}`, x);
    }
    return out;
  },
  maxContexts: (p, v) => checkInt(p, v, 1, 1 << 24),
  contextTtlSeconds: (p, v) => checkInt(p, v, 1, MAX_CONTEXT_TTL_SECONDS),
  proactiveIntervalMs: (p, v) => checkInt(p, v, 10, 3_600_000),
  // One MiB at least: a bound smaller than an agent's request body would keep nothing.
  proactiveBodyCacheBytes: (p, v) => checkInt(p, v, 1 << 20, 2 ** 40),
  ha: (p, v) => checkHa(p, v, (path, rule) => { throw new ConfigError(path, rule); })
};

function checkNumber (path: string, v: unknown, min: number, max: number): number {
  const n = typeof v === 'string' && v.trim() !== '' ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isFinite(n) || n < min || n > max) throw new ConfigError(path, `must be a number in [${min}, ${max}], got ${shown(v)}`);
  return n;
}

function checkWeight (path: string, v: unknown): number {
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 1000) throw new ConfigError(path, `must be a number in [0, 1000], got ${shown(v)}`);
  return v;
}

/**
 * Builds the configuration from a parsed YAML document (or {}) and flag overrides, validating every field.
 * `flags.backend` holds the raw `--backend` strings; any backend flag replaces the file's list.
 */
export function buildConfig (file: Record<string, unknown>, flags: Record<string, unknown> = {}): Readonly<GatewayConfig> {
  const merged: Record<string, unknown> = { ...file };
  for (const [k, v] of Object.entries(flags)) {
    if (k === 'backend' || v === undefined) continue;
    // Discovery flags (--discovery, --kubeconfig, …) override single fields of the file's `discovery` mapping.
    const isMap = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
    if (k === 'discovery' && isMap(v)) {
      const set = Object.fromEntries(Object.entries(v).filter(([, x]) => x !== undefined));
      if (Object.keys(set).length === 0) continue;
      merged.discovery = { ...(isMap(merged.discovery) ? merged.discovery : {}), ...set };
    } else merged[k] = v;
  }
  const cfg: Record<string, unknown> = { ...DEFAULTS };
  for (const [k, v] of Object.entries(merged)) {
    if (k === 'backends') continue;
    // Own fields only: `__proto__`, `constructor`, `toString` are keys a YAML file may hold, not checks.
    const check = Object.hasOwn(FIELDS, k) ? FIELDS[k] : undefined;
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
  if (cfg.discovery !== null && cfg.discovery !== undefined && backends.length > 0) {
    throw new ConfigError('backends', 'must be empty with discovery (the discovered pods are the backends)');
  }
  checkRateLimitKeys(cfg as unknown as GatewayConfig);
  return deepFreeze(cfg as unknown as GatewayConfig);
}

/** rateLimits against apiKeys: a key's own limit names a configured key; per-IP limits are for a gateway without keys. */
function checkRateLimitKeys (cfg: GatewayConfig): void {
  const keys = new Set(cfg.apiKeys);
  for (const k of Object.keys(cfg.rateLimits.keys)) {
    if (!keys.has(k)) throw new ConfigError(`rateLimits.keys.<key ${k.slice(0, 4)}…>`, 'is not one of apiKeys');
  }
  if (cfg.rateLimits.perIp !== null && keys.size > 0) throw new ConfigError('rateLimits.perIp', 'applies only without apiKeys (with keys, limit them with rateLimits.default)');
  if (cfg.rateLimits.default !== null && keys.size === 0) throw new ConfigError('rateLimits.default', 'limits API keys, and no apiKeys are configured (without keys, limit clients with rateLimits.perIp)');
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
