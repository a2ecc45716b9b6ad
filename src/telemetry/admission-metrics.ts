// Prometheus series of the admission scheduler (src/core/admission.ts), read from the host's stats when
// /metrics is scraped. The wait histogram by level is recorded per release in GatewayMetrics.admissionWait.
import { Gauge, type Registry } from 'prom-client';
import { registerTotal } from './metrics.js';
import type { AdmissionStats } from '../core/admission-control.js';

export function registerAdmissionMetrics (registry: Registry, read: () => AdmissionStats): void {
  new Gauge({
    name: 'ear_admission_queue_depth', help: 'Requests waiting for admission, by priority level (0 first).', labelNames: ['level'], registers: [registry],
    collect () {
      this.reset();
      read().depthByLevel.forEach((n, level) => this.set({ level: String(level) }, n));
    }
  });
  new Gauge({
    name: 'ear_admission_parked', help: 'Waiting requests routed to a backend that has no room yet (their session\'s host).', registers: [registry],
    collect () { this.set(read().parked); }
  });
  const totals: Array<[keyof AdmissionStats, string, string]> = [
    ['promotions', 'ear_admission_promotions_total', 'Waiting requests moved to the top level by anti-starvation.'],
    ['rejected', 'ear_admission_rejected_total', 'Requests refused because the queue was at its bound (429).'],
    ['timedOut', 'ear_admission_timeouts_total', 'Requests that waited past queueTimeoutMs (504).'],
    ['released', 'ear_admission_released_total', 'Requests admitted (at once or after waiting).']
  ];
  for (const [field, name, help] of totals) registerTotal(registry, name, help, () => Number(read()[field]));
  new Gauge({
    name: 'ear_admission_oldest_wait_seconds', help: 'How long the oldest waiting request has waited.', registers: [registry],
    collect () { this.set(read().oldestWaitMs / 1000); }
  });
  new Gauge({
    name: 'ear_admission_longest_wait_seconds', help: 'The longest wait of any admitted request since start (the starvation figure).', registers: [registry],
    collect () { this.set(read().longestWaitMs / 1000); }
  });
  new Gauge({
    name: 'ear_admission_capacity', help: 'Requests in flight each backend may hold, as configured or learned from its engine (absent: no limit).', labelNames: ['backend'], registers: [registry],
    collect () {
      this.reset();
      for (const l of read().limits) if (Number.isFinite(l.limit)) this.set({ backend: l.id }, l.limit);
    }
  });
}
