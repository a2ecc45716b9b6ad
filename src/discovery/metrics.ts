// Discovery's series on the gateway's /metrics (ear_discovery_*), read from its stats when scraped.
import { Gauge, type Registry } from 'prom-client';
import { registerTotal } from '../telemetry/metrics.js';
import type { ApplierStats } from './backend-applier.js';
import type { DiscoveryStats } from './k8s-pods.js';

export function registerDiscoveryMetrics (registry: Registry, stats: DiscoveryStats, applier: ApplierStats): void {
  new Gauge({ name: 'ear_discovery_pods', help: 'Discovered pods that are backends now (Running, Ready, not terminating, with an IP; at most discovery.maxPods).', registers: [registry], collect () { this.set(stats.pods); } });
  new Gauge({
    name: 'ear_discovery_pods_skipped', help: 'Pods the selector matches that are not backends now, by reason (over-max-pods: ready, beyond discovery.maxPods).',
    labelNames: ['reason'], registers: [registry],
    collect () {
      for (const [reason, n] of Object.entries(stats.skipped)) this.set({ reason }, n);
    }
  });
  registerTotal(registry, 'ear_discovery_relists_total', 'Lists after the first (410 Gone, an expired continue token, a watch that could not resume).', () => stats.relists);
  registerTotal(registry, 'ear_discovery_watch_restarts_total', 'Watches resumed after one ended (server timeout, dropped connection, API-server restart, error).', () => stats.watchRestarts);
  registerTotal(registry, 'ear_discovery_errors_total', 'Lists and watches that failed (each retried with backoff).', () => stats.errors);
  registerTotal(registry, 'ear_discovery_updates_total', 'Changed backend lists discovery handed to the gateway.', () => stats.updates);
  registerTotal(registry, 'ear_discovery_reloads_total', 'Gateway reloads applied from discovered backend lists (bursts coalesced).', () => applier.reloads);
  registerTotal(registry, 'ear_discovery_reload_failures_total', 'Reloads that failed (e.g. every pod row still draining) and were tried again.', () => applier.failures);
}
