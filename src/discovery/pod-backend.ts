// A Pod as the API server describes it → the gateway's BackendConfig, or why it is not one (yet). Pure: the
// watch (reflector.ts) keeps the pods, this decides which serve. A pod serves when Running, Ready (condition
// Ready=True), not being deleted (no deletionTimestamp: it is draining) and given an IP.
import type { PodRole } from '../core/policy.js';
import type { BackendConfig, DiscoveryConfig } from '../config/index.js';
// Pods are named as backend ids must be (Deployment pod names fit); one that is not is skipped.
import { ID_RE } from '../config/backends.js';
import { parseEnginePriority, type EnginePriorityKind } from '../core/engine-priority.js';

/** The fields of a v1 Pod this module reads (list items and watch objects alike). */
export interface PodLike {
  metadata?: {
    name?: string;
    labels?: Record<string, string> | null;
    deletionTimestamp?: unknown;
  };
  status?: {
    phase?: string;
    podIP?: string;
    conditions?: Array<{ type?: string; status?: string }> | null;
  } | null;
}

/** What the mapping reads of the discovery config; `port` is the config's, or the InferencePool's targetPorts[0]. */
export type PodBackendOptions = Pick<DiscoveryConfig, 'port' | 'roleLabel' | 'modelLabel' | 'kvEventsLabel' | 'priorityLabel' | 'kvEventsPort' | 'kvReplayPort'>;

export type SkipReason = 'not-running' | 'not-ready' | 'no-ip' | 'terminating' | 'bad-name' | 'bad-role' | 'bad-priority';

export type PodVerdict = { backend: BackendConfig; skip: null } | { backend: null; skip: SkipReason };

/** llm-d's role label values → EAR's roles; no label = both. */
const ROLES: Record<string, PodRole> = { prefill: 'prefill', decode: 'decode', both: 'both' };

/** An IPv6 address goes in brackets in a URL. */
function host (ip: string): string {
  return ip.includes(':') ? `[${ip}]` : ip;
}

/** `obj` is a Pod (a list item or a watch event's object), read as PodLike. */
export function podVerdict (obj: object, o: PodBackendOptions): PodVerdict {
  const pod = obj as PodLike;
  const name = pod.metadata?.name ?? '';
  if (!ID_RE.test(name)) return { backend: null, skip: 'bad-name' };
  if (pod.metadata?.deletionTimestamp !== undefined && pod.metadata.deletionTimestamp !== null) return { backend: null, skip: 'terminating' };
  const status = pod.status ?? {};
  if (status.phase !== 'Running') return { backend: null, skip: 'not-running' };
  if (!(status.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')) return { backend: null, skip: 'not-ready' };
  const ip = status.podIP ?? '';
  if (ip === '') return { backend: null, skip: 'no-ip' };
  const labels = pod.metadata?.labels ?? {};
  const roleValue = labels[o.roleLabel];
  const role = roleValue === undefined ? 'both' : (Object.hasOwn(ROLES, roleValue) ? ROLES[roleValue] : undefined);
  if (role === undefined) return { backend: null, skip: 'bad-role' };
  let priority: EnginePriorityKind | null;
  try {
    priority = parseEnginePriority(labels[o.priorityLabel]);
  } catch {
    return { backend: null, skip: 'bad-priority' }; // a typo would silently send a polarity the engine reads backwards
  }
  const kv = labels[o.kvEventsLabel] === 'true';
  const model = labels[o.modelLabel];
  const h = host(ip);
  return {
    skip: null,
    backend: {
      id: name,
      url: `http://${h}:${o.port}`,
      kvEvents: kv ? `tcp://${h}:${o.kvEventsPort}` : null,
      replay: kv ? `tcp://${h}:${o.kvReplayPort}` : null,
      // llm-d's topic kv@<pod>@<model>, a SUB prefix: without a model label, every model of the pod.
      kvTopic: kv ? `kv@${name}@${model ?? ''}` : '',
      role,
      kvCapacityBlocks: null,
      maxConcurrent: null,
      apiKey: null,
      priority
    }
  };
}
