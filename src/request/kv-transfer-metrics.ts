// The KV transfer series (ear_kv_transfer*), one set per registry: the request path's transfer step and the
// migration thread's proactive moves count into the same series, told apart by `kind`.
import { Counter, Histogram, type Registry } from 'prom-client';

export interface KvTransferMetrics {
  total: Counter<'kind' | 'mode' | 'outcome'>;
  sourceSeconds: Histogram<'mode'>;
  bytes: Counter<'mode'>;
}

const byRegistry = new WeakMap<Registry, KvTransferMetrics>();

export function kvTransferMetrics (registry: Registry): KvTransferMetrics {
  let m = byRegistry.get(registry);
  if (m !== undefined) return m;
  m = {
    total: new Counter({
      name: 'ear_kv_transfers_total', labelNames: ['kind', 'mode', 'outcome'], registers: [registry],
      help: 'KV transfers by kind (migration: a session moved with its turn; pd: a prefill moved to its decode pod; proactive: an idle session moved by the migration thread), connector (nixl, shared-store, recompute) and outcome (ok; failed: the session stayed on its source, or the decode pod computed the prompt).'
    }),
    sourceSeconds: new Histogram({
      name: 'ear_kv_transfer_source_seconds', labelNames: ['mode'], registers: [registry],
      help: 'Time of a transfer\'s source leg (nixl: the export request on the source).',
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
    }),
    bytes: new Counter({ name: 'ear_kv_transfer_bytes_total', labelNames: ['mode'], registers: [registry], help: 'KV bytes moved by transfers that succeeded (estimated from the context\'s tokens).' })
  };
  byRegistry.set(registry, m);
  return m;
}
