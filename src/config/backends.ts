// The `backends` list: the engines EAR routes to, as the config file, `--backend` flags or discovery
// (src/discovery/, which hands its pods over as BackendConfig) name them.
import type { PodRole } from '../core/policy.js';
import { parseEnginePriority, type EnginePriorityKind } from '../core/engine-priority.js';
import { ConfigError } from './config-error.js';
import { checkHeaderValue, checkInt, checkString, checkUrl, isMapping } from './checks.js';

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
  /**
   * Whether the engine orders its queue by the request's `priority`, and in which polarity: vllm (its
   * --scheduling-policy priority: lower first), sglang (--enable-priority-scheduling: higher first),
   * sglang-low-first (with --schedule-low-priority-values-first). null (off, the default): EAR sends none.
   */
  priority: EnginePriorityKind | null;
  /**
   * What the backend gets of a client's `vllm_xargs.agentic_context`: 'strip' (the default: an engine has no use
   * for it) or 'forward' (a vLLM router whose program scheduling reads it, vllm-project/router #286). Absent:
   * strip (discovered pods are engines).
   */
  agenticContext?: 'strip' | 'forward';
}

/** A backend entry's fields besides `url` (required) and `id` (`backend-<index>` when absent), as the file names them. */
export const BACKEND_DEFAULTS = Object.freeze({
  kvEvents: null,
  replay: null,
  topic: '',
  role: 'both' as PodRole,
  kvCapacityBlocks: null,
  maxConcurrent: null,
  apiKey: null,
  priority: null,
  agenticContext: 'strip' as const
});

/** Keys a backend entry takes; the kebab-case ones are the `--backend` flag's spelling of the same field. */
export const BACKEND_KEYS = ['id', 'url', 'kvEvents', 'kv-events', 'replay', 'topic', 'role', 'kvCapacityBlocks', 'kv-blocks', 'maxConcurrent', 'max-concurrent', 'apiKey', 'api-key', 'priority', 'agenticContext', 'agentic-context'];

const ROLES: readonly PodRole[] = ['both', 'prefill', 'decode'];
/** Backend ids; discovery names backends after their pods (src/discovery/pod-backend.ts) and skips a pod whose name is not one. */
export const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

function checkTopic (path: string, v: unknown): string {
  if (typeof v !== 'string') throw new ConfigError(path, 'must be a string (a prefix of the engine\'s KV-event topic)');
  return v;
}

function backend (path: string, raw: unknown, index: number): BackendConfig {
  if (!isMapping(raw)) throw new ConfigError(path, 'must be a mapping');
  const r = raw;
  for (const k of Object.keys(r)) {
    if (!BACKEND_KEYS.includes(k)) throw new ConfigError(`${path}.${k}`, `unknown field (known: ${BACKEND_KEYS.join(', ')})`);
  }
  const url = checkUrl(`${path}.url`, r.url, ['http:', 'https:']);
  const id = r.id === undefined ? `backend-${index}` : checkString(`${path}.id`, r.id);
  if (!ID_RE.test(id)) throw new ConfigError(`${path}.id`, `"${id}" must match ${ID_RE}`);
  const kv = r.kvEvents ?? r['kv-events'];
  const kvBlocks = r.kvCapacityBlocks ?? r['kv-blocks'];
  const maxConcurrent = r.maxConcurrent ?? r['max-concurrent'];
  const apiKey = r.apiKey ?? r['api-key'];
  const role = (r.role ?? BACKEND_DEFAULTS.role) as PodRole;
  if (!ROLES.includes(role)) throw new ConfigError(`${path}.role`, `must be one of ${ROLES.join(', ')}`);
  return {
    id,
    url,
    kvEvents: kv === undefined || kv === null ? BACKEND_DEFAULTS.kvEvents : checkUrl(`${path}.kv-events`, kv, ['tcp:', 'ipc:']),
    replay: r.replay === undefined || r.replay === null ? BACKEND_DEFAULTS.replay : checkUrl(`${path}.replay`, r.replay, ['tcp:', 'ipc:']),
    kvTopic: r.topic === undefined || r.topic === null ? BACKEND_DEFAULTS.topic : checkTopic(`${path}.topic`, r.topic),
    role,
    kvCapacityBlocks: kvBlocks === undefined || kvBlocks === null ? BACKEND_DEFAULTS.kvCapacityBlocks : checkInt(`${path}.kv-blocks`, kvBlocks, 1, 0xFFFFFFFF),
    maxConcurrent: maxConcurrent === undefined || maxConcurrent === null ? BACKEND_DEFAULTS.maxConcurrent : checkInt(`${path}.max-concurrent`, maxConcurrent, 1, 1_000_000),
    apiKey: apiKey === undefined || apiKey === null ? BACKEND_DEFAULTS.apiKey : checkHeaderValue(`${path}.apiKey`, apiKey),
    priority: checkEnginePriority(`${path}.priority`, r.priority),
    // Absent means strip: a backend's config stays as before unless it forwards.
    ...(checkAgenticContext(`${path}.agenticContext`, r.agenticContext ?? r['agentic-context']) === 'forward' ? { agenticContext: 'forward' as const } : {})
  };
}

function checkAgenticContext (path: string, v: unknown): 'strip' | 'forward' {
  if (v === undefined || v === null) return BACKEND_DEFAULTS.agenticContext;
  if (v !== 'strip' && v !== 'forward') throw new ConfigError(path, `must be "strip" or "forward", got ${JSON.stringify(v)}`);
  return v;
}

function checkEnginePriority (path: string, v: unknown): EnginePriorityKind | null {
  try {
    return parseEnginePriority(v);
  } catch (err) {
    throw new ConfigError(path, `${(err as Error).message}, got ${JSON.stringify(v)}`);
  }
}

/** The backends list (the file's, or the `--backend` flags' when any is given), each entry checked, ids unique. */
export function checkBackends (raw: unknown): BackendConfig[] {
  if (!Array.isArray(raw)) throw new ConfigError('backends', 'must be a list');
  const backends = raw.map((b, i) => backend(`backends[${i}]`, b, i));
  const ids = new Set<string>();
  for (const [i, b] of backends.entries()) {
    if (ids.has(b.id)) throw new ConfigError(`backends[${i}].id`, `"${b.id}" is used twice`);
    ids.add(b.id);
  }
  return backends;
}

/** Parses one `--backend URL[,id=NAME][,kv-events=tcp://H:P][,replay=tcp://H:P][,topic=PREFIX][,role=both|prefill|decode][,kv-blocks=N][,max-concurrent=N][,api-key=KEY][,priority=vllm|sglang|sglang-low-first][,agentic-context=strip|forward]` flag. */
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
