// What the upstream pools (pool.ts) did with keep-alive sockets the server may have closed, for /metrics.
import { Gauge, type Registry } from 'prom-client';
import { UPSTREAM_SOCKETS } from './pool.js';

export function registerUpstreamSocketMetrics (registry: Registry): void {
  new Gauge({ name: 'ear_upstream_stale_sockets_total', help: 'Idle keep-alive sockets to engines found closed or past their keep-alive when a request would take them (it took another).', registers: [registry], collect () { this.set(UPSTREAM_SOCKETS.staleSockets); } });
  new Gauge({ name: 'ear_upstream_resends_total', help: 'Requests sent again to the same engine on a new socket: the reused keep-alive socket closed before a byte of the answer (the server\'s idle timeout as the request left).', registers: [registry], collect () { this.set(UPSTREAM_SOCKETS.resent); } });
}
