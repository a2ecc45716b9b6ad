// The `discovery` section: backends taken from Kubernetes pods (src/discovery/) instead of a `backends` list.
import { DEFAULT_REGION_CONFIG } from '../core/region.js';
import { maxPodRows } from './pod-rows.js';
import { DNS_LABEL, DNS_SUBDOMAIN } from '../kube/names.js';
import { ConfigError } from './config-error.js';
import { checkInt, checkString, shown, type FieldCheck } from './checks.js';

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
  /** Pod label saying whether its engine orders by request priority: vllm, sglang, sglang-low-first (absent: off). */
  priorityLabel: string;
  kvEventsPort: number;
  kvReplayPort: number;
  /**
   * Pods taken as backends at once; more matching pods wait (logged, counted) until one leaves. Follows the
   * top-level maxPods (the pod rows) unless set, and may not exceed it.
   */
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
  priorityLabel: 'ear.dev/engine-priority',
  kvEventsPort: 5557,
  kvReplayPort: 5558,
  // One pod row each (src/core/pod-rows.ts): the top-level maxPods unless set (followMaxPods). Pods past the rows
  // while old pods' rows are still being released wait for a row in the fleet (src/fleet/fleet.ts).
  maxPods: DEFAULT_REGION_CONFIG.pods
});

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
  for (const k of ['roleLabel', 'modelLabel', 'kvEventsLabel', 'priorityLabel'] as const) if (r[k] !== undefined) out[k] = checkLabelKey(`${p}.${k}`, r[k]);
  for (const k of ['port', 'kvEventsPort', 'kvReplayPort'] as const) if (r[k] !== undefined) out[k] = checkInt(`${p}.${k}`, r[k], 1, 65535);
  if (out.kvEventsPort === out.kvReplayPort) throw new ConfigError(`${p}.kvReplayPort`, `must differ from kvEventsPort (${out.kvEventsPort})`);
  if (r.maxPods !== undefined) out.maxPods = checkInt(`${p}.maxPods`, r.maxPods, 1, maxPodRows());
  return out;
}

/**
 * discovery.maxPods once the top-level maxPods is known: the pod rows unless the section sets it (`given`), and
 * never more than the rows (a discovered backend beyond them could only wait).
 */
export function followMaxPods (d: DiscoveryConfig, given: unknown, maxPods: number): DiscoveryConfig {
  if (given === undefined) return { ...d, maxPods };
  if (d.maxPods > maxPods) throw new ConfigError('discovery.maxPods', `must be at most maxPods (${maxPods}, the pod rows), got ${d.maxPods}`);
  return d;
}

export interface DiscoverySection {
  /** Backends discovered (Kubernetes pods) rather than listed; null = the static `backends` list. */
  discovery: DiscoveryConfig | null;
}

export const DISCOVERY_SECTION_DEFAULTS: Readonly<DiscoverySection> = Object.freeze({ discovery: null });

export const DISCOVERY_SECTION_FIELDS: Record<keyof DiscoverySection, FieldCheck> = { discovery: checkDiscovery };
