// ear-proactive's series: what became of the moves the migration thread planned, and its body cache's bound.
// Read when scraped: the main thread's outcomes directly, the thread's counters by asking it (one ask shared by
// the series of one scrape, as the kv-events thread's are).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { MigrationThreadStats } from '../migration/thread-protocol.js';

export interface ProactiveMetricsSource {
  /** Moves the main thread applied (moved) or refused (dropped: a turn came, or another replica won). */
  outcomes (): { moved: number; dropped: number; errors: number };
  stats (): Promise<MigrationThreadStats>;
}

export function registerProactiveMetrics (registry: Registry, src: ProactiveMetricsSource): void {
  let pending: Promise<MigrationThreadStats | null> | null = null;
  const fetch = (): Promise<MigrationThreadStats | null> => {
    pending ??= src.stats().catch(() => null).finally(() => setTimeout(() => { pending = null; }, 50).unref());
    return pending;
  };
  new Counter({
    name: 'ear_proactive_migrations_total', labelNames: ['outcome'], registers: [registry],
    help: 'Idle sessions the migration thread planned to move (ear-proactive), by outcome: moved (transferred and rebound), dropped (a turn came during the transfer, or another replica moved it first), failed (the transfer failed; the session stays on its source), no_body (its last request body was not cached).',
    async collect () {
      const s = await fetch();
      const o = src.outcomes();
      this.reset();
      this.inc({ outcome: 'moved' }, o.moved);
      this.inc({ outcome: 'dropped' }, o.dropped);
      if (s === null) return;
      this.inc({ outcome: 'failed' }, s.failed);
      this.inc({ outcome: 'no_body' }, s.noBody);
    }
  });
  new Gauge({
    name: 'ear_proactive_transfers_in_flight', help: 'Proactive transfers running now.', registers: [registry],
    async collect () {
      const s = await fetch();
      if (s !== null) this.set(s.inFlight);
    }
  });
  new Counter({
    name: 'ear_proactive_deferred_total', registers: [registry],
    help: 'Planned moves left for a later tick because their source pod had maxMovesPerPod transfers in flight.',
    async collect () {
      const s = await fetch();
      if (s === null) return;
      this.reset();
      this.inc(s.deferred);
    }
  });
  new Gauge({
    name: 'ear_proactive_body_cache_bytes', help: 'Bytes of session bodies the migration thread keeps (bounded by proactiveBodyCacheBytes).', labelNames: ['kind'], registers: [registry],
    async collect () {
      const s = await fetch();
      if (s === null) return;
      this.set({ kind: 'used' }, s.bodies.bytes);
      this.set({ kind: 'max' }, s.bodies.maxBytes);
    }
  });
  new Counter({
    name: 'ear_proactive_body_cache_dropped_total', labelNames: ['reason'], registers: [registry],
    help: 'Session bodies the migration thread\'s cache dropped: lru (least recently used, at the byte bound), too_large (one body above the whole bound, never kept).',
    async collect () {
      const s = await fetch();
      if (s === null) return;
      this.reset();
      this.inc({ reason: 'lru' }, s.bodies.evicted);
      this.inc({ reason: 'too_large' }, s.bodies.tooLarge);
    }
  });
  new Counter({
    name: 'ear_proactive_errors_total', registers: [registry],
    help: 'Errors in proactive migration, counted and logged (the thread\'s, and the main thread\'s while applying moves).',
    async collect () {
      const s = await fetch();
      this.reset();
      this.inc(src.outcomes().errors + (s?.errors ?? 0));
    }
  });
}
