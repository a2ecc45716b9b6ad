// Prometheus series of active-passive leader election (leader-elector.ts), read from the elector when scraped.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { LeaderElector } from './leader-elector.js';

export function registerHaMetrics (registry: Registry, elector: LeaderElector): void {
  new Gauge({
    name: 'ear_ha_leader', help: 'Active-passive: 1 while this replica holds the leader lease (and reports ready), else 0.', registers: [registry],
    collect () { this.set(elector.isLeader ? 1 : 0); }
  });
  new Counter({
    name: 'ear_ha_lease_transitions_total', help: 'This replica\'s leadership changes: to="leader" when it acquired the lease, to="follower" when it lost it (renew deadline passed, lease taken) or released it.',
    labelNames: ['to'], registers: [registry],
    collect () {
      this.reset();
      this.inc({ to: 'leader' }, elector.stats.acquired);
      this.inc({ to: 'follower' }, elector.stats.lost);
    }
  });
  new Counter({
    name: 'ear_ha_lease_errors_total', help: 'Lease calls that failed: kind="conflict" (409, another replica wrote first), kind="api" (unreachable, timed out, 5xx, forbidden).',
    labelNames: ['kind'], registers: [registry],
    collect () {
      this.reset();
      this.inc({ kind: 'conflict' }, elector.stats.conflicts);
      this.inc({ kind: 'api' }, elector.stats.errors);
    }
  });
}
