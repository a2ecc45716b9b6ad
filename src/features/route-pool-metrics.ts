// The route pool's counters on the gateway's /metrics (read at scrape time from RoutePool.stats()).
import { Counter, type Registry } from 'prom-client';
import type { RoutePoolStats } from './route-pool.js';

const COUNTERS: ReadonlyArray<[keyof RoutePoolStats, string, string]> = [
  ['tokenizerFallbacks', 'ear_tokenizer_fallbacks_total', 'Requests whose remote tokenization failed, was rejected or skipped (breaker open) and used the character tokenizer.'],
  ['queueFull', 'ear_route_pool_queue_full_total', 'Requests refused with 429 because the route pool queue was full.']
];

export function registerRoutePoolMetrics (registry: Registry, read: () => RoutePoolStats): void {
  for (const [field, name, help] of COUNTERS) {
    new Counter({
      name, help, registers: [registry],
      collect () {
        this.reset();
        this.inc(read()[field]);
      }
    });
  }
}
