// gRPC health checking (grpc.health.v1) as the endpoint picker protocol asks: `liveness` (the process answers),
// `readiness` and the ext_proc service (backends probed and at least one routable, and not draining). Statuses
// are computed when asked; Watch re-reads them once a second and sends each change.
import * as grpc from '@grpc/grpc-js';
import { EXT_PROC_SERVICE, healthService } from './protocol.js';

export type ServingStatus = 'SERVING' | 'NOT_SERVING' | 'SERVICE_UNKNOWN';

export const HEALTH_SERVICES = ['', 'liveness', 'readiness', EXT_PROC_SERVICE] as const;

/** Watch streams open at once; more are refused (RESOURCE_EXHAUSTED): a probe should use Check. */
const MAX_WATCHERS = 64;
const WATCH_INTERVAL_MS = 1000;

export interface HealthSource {
  /** Ready to pick: backends probed, one routable, not draining. */
  ready (): boolean;
}

export function healthStatus (service: string, src: HealthSource): ServingStatus | null {
  switch (service) {
    case '': case 'liveness': return 'SERVING';
    case 'readiness': case EXT_PROC_SERVICE: return src.ready() ? 'SERVING' : 'NOT_SERVING';
    default: return null;
  }
}

/** Adds the Health service to `server`; returns a function that ends every Watch stream (shutdown). */
export function addHealthService (server: grpc.Server, src: HealthSource): () => void {
  const watchers = new Set<grpc.ServerWritableStream<{ service?: string }, { status: string }>>();
  const timer = setInterval(() => { for (const w of watchers) (w as unknown as { poll: () => void }).poll(); }, WATCH_INTERVAL_MS);
  timer.unref();
  server.addService(healthService().service, {
    Check (call: grpc.ServerUnaryCall<{ service?: string }, { status: string }>, cb: grpc.sendUnaryData<{ status: string }>) {
      const s = healthStatus(call.request.service ?? '', src);
      if (s === null) cb({ code: grpc.status.NOT_FOUND, details: `unknown service "${call.request.service ?? ''}"` });
      else cb(null, { status: s });
    },
    List (_call: grpc.ServerUnaryCall<unknown, unknown>, cb: grpc.sendUnaryData<{ statuses: Record<string, { status: string }> }>) {
      const statuses: Record<string, { status: string }> = {};
      for (const name of HEALTH_SERVICES) statuses[name] = { status: healthStatus(name, src)! };
      cb(null, { statuses });
    },
    Watch (call: grpc.ServerWritableStream<{ service?: string }, { status: string }>) {
      if (watchers.size >= MAX_WATCHERS) {
        call.emit('error', { code: grpc.status.RESOURCE_EXHAUSTED, details: 'too many health watchers' });
        return;
      }
      const service = call.request.service ?? '';
      let last = '';
      const poll = (): void => {
        const s = healthStatus(service, src) ?? 'SERVICE_UNKNOWN';
        if (s !== last) {
          last = s;
          call.write({ status: s });
        }
      };
      Object.assign(call, { poll });
      watchers.add(call);
      call.on('cancelled', () => watchers.delete(call));
      poll();
    }
  });
  return () => {
    clearInterval(timer);
    for (const w of watchers) w.end();
    watchers.clear();
  };
}
