// The KV transfer series (ear_kv_transfer*), one set per registry: the request path's transfers (counted from its
// transfer-end events, src/request/channels.ts) and the migration thread's proactive moves count into the same
// series, told apart by `kind`.
import { Counter, Histogram, type Registry } from 'prom-client';
import { subscribeRequests } from '../request/channels.js';
import type { MigrationStats } from '../core/routing-host.js';
import { registerTotal } from './metrics.js';

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

/**
 * The request path's KV transfers, kept from `pipeline`'s transfer-end events, and the turns its routing state sent
 * to a migration's source (read at each scrape from `migrations`). Returns the unsubscribe.
 */
export function subscribeKvTransferMetrics (pipeline: object, registry: Registry, migrations: () => MigrationStats | null): () => void {
  const m = kvTransferMetrics(registry);
  registerTotal(registry, 'ear_migration_turns_to_source_total', 'Turns sent to a migration\'s source because they came while their session moved.', () => migrations()?.turnsToSource ?? null);
  return subscribeRequests(pipeline, {
    transferEnd: ({ kind, transfer: t }) => {
      // A source leg that ran is timed; one that could not start (its source not serving) is only counted.
      if (t.seconds !== undefined) m.sourceSeconds.observe({ mode: t.mode }, t.seconds);
      m.total.inc({ kind, mode: t.mode, outcome: t.ok ? 'ok' : 'failed' });
      if (t.ok) m.bytes.inc({ mode: t.mode }, t.bytes);
    }
  });
}
