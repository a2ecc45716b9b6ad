// The route pool: piscina workers that compute request features (workers/route-worker.ts) over the shared
// region. Its queue is bounded: past `maxQueue` waiting tasks a request is refused with 429 rather than
// letting latency grow without limit.
import { Piscina } from 'piscina';
import type { SharedRegion } from '../core/region.js';
import { GatewayError, type ErrorCode } from './errors.js';
import type { Endpoint } from './request-body.js';
import type { Features } from './features.js';
import type { RouteResult, RouteTask, RouteWorkerData } from '../../workers/route-worker.js';

const WORKER = new URL('../../workers/route-worker.js', import.meta.url).href;

export interface RoutePool {
  features (endpoint: Endpoint, body: Buffer): Promise<Features>;
  close (): Promise<void>;
}

export function createRoutePool (shared: SharedRegion, opts: { threads: number; tokenizer: string; blockSize: number; maxQueue?: number }): RoutePool {
  const workerData: RouteWorkerData = { shared, tokenizer: opts.tokenizer, blockSize: opts.blockSize };
  const pool = new Piscina({
    filename: WORKER,
    minThreads: opts.threads,
    maxThreads: opts.threads,
    idleTimeout: Infinity,
    maxQueue: opts.maxQueue ?? 4096,
    workerData
  });
  return {
    async features (endpoint, body) {
      let r: RouteResult;
      try {
        r = await pool.run({ endpoint, body } satisfies RouteTask);
      } catch (err) {
        if (/queue is at limit/i.test((err as Error).message)) throw new GatewayError('EAR_ERR_QUEUE_FULL', 'the gateway is overloaded: try again');
        throw err;
      }
      if (!r.ok) throw new GatewayError(r.code as ErrorCode, r.message);
      return r.features;
    },
    close: () => pool.destroy()
  };
}
