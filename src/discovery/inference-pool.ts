// An InferencePool (inference.networking.k8s.io/v1) as a pod source: its spec.selector.matchLabels pick the
// pods and spec.targetPorts[0].number is the engines' port.
export const INFERENCE_POOL_GROUP_VERSION = 'inference.networking.k8s.io/v1';

export interface PoolSource {
  /** The label selector built from matchLabels ("k=v,k2=v2", keys sorted). */
  labelSelector: string;
  port: number;
}

/** The pool's source, or why it cannot be one (the caller logs it and keeps waiting for a valid pool). */
export function poolSource (pool: { spec?: unknown; [k: string]: unknown }): PoolSource | { error: string } {
  const spec = (pool.spec ?? {}) as { selector?: { matchLabels?: Record<string, unknown> }; targetPorts?: Array<{ number?: unknown }> };
  const labels = spec.selector?.matchLabels;
  if (labels === undefined || labels === null || typeof labels !== 'object' || Object.keys(labels).length === 0) {
    return { error: 'spec.selector.matchLabels is missing or empty' };
  }
  for (const [k, v] of Object.entries(labels)) if (typeof v !== 'string') return { error: `spec.selector.matchLabels.${k} is not a string` };
  const port = spec.targetPorts?.[0]?.number;
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1 || port > 65535) return { error: 'spec.targetPorts[0].number is not a port' };
  const labelSelector = Object.keys(labels).sort().map((k) => `${k}=${labels[k] as string}`).join(',');
  return { labelSelector, port };
}
