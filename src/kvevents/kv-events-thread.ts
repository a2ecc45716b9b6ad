// Starts and stops the kv-events thread (workers/kv-events-thread.ts) from the main thread.
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import type { SharedRegion } from '../core/region.js';
import type { FeederStats } from './index-feeder.js';
import type { KvEventsThreadData } from '../../workers/kv-events-thread.js';

const URL_ = new URL('../../workers/kv-events-thread.js', import.meta.url);

export interface KvEventsThread {
  stats (): Promise<FeederStats>;
  stop (): Promise<FeederStats>;
}

export function startKvEventsThread (shared: SharedRegion, opts: { assumedTtlMs: number }): KvEventsThread {
  const data: KvEventsThreadData = { shared, assumedTtlMs: opts.assumedTtlMs };
  const worker = new Worker(URL_, { workerData: data });
  const ask = async (msg: 'stats' | 'stop', type: string): Promise<FeederStats> => {
    const reply = new Promise<FeederStats>((resolve, reject) => {
      const onMsg = (m: { type: string; stats: FeederStats }) => {
        if (m.type !== type) return;
        worker.off('message', onMsg);
        resolve(m.stats);
      };
      worker.on('message', onMsg);
      worker.once('error', reject);
    });
    worker.postMessage(msg);
    return reply;
  };
  return {
    stats: () => ask('stats', 'stats'),
    async stop () {
      const s = await ask('stop', 'stopped');
      await once(worker, 'exit');
      return s;
    }
  };
}
