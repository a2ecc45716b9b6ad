// Starts and stops the kv-events thread (workers/kv-events-thread.ts) from the main thread, tells it which
// backends publish KV events, and asks for its counters.
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import type { SharedRegion } from '../core/region.js';
import { BLOCK_SIZE, MAX_MAPPED_BLOCKS } from '../core/defaults.js';
import type { FeederStats } from './index-feeder.js';
import type { ApplierStats } from './event-applier.js';
import type { KvSubscriberOptions, KvSubscriberStats } from './subscriber.js';
import type { KvEventsThreadData } from '../../workers/kv-events-thread.js';

const URL_ = new URL('../../workers/kv-events-thread.js', import.meta.url);

/** A backend whose engine publishes KV events, as the kv-events thread follows it. */
export interface KvBackendSpec {
  /** The backend's row in the pod table (its pod index in the prefix index). */
  index: number;
  id: string;
  /** The model name requests use for it (the root of its block keys when an event carries no LoRA name). */
  model: string;
  kvEvents: string;
  replay: string | null;
  /** SUB prefix filter; '' takes every message. */
  topic: string;
}

export interface KvThreadOptions {
  /** Assumed presence (routing hints) lives this long; changeable later with setBackends. */
  assumedTtlMs: number;
  /** The gateway's block size: events of other sizes are counted and skipped. Default 16. */
  blockSize?: number;
  /** Engine-hash mappings kept per backend (default 262 144). */
  maxMappedBlocks?: number;
  /** Departed backend ids whose counters are kept, the most recently departed (default 1024). */
  maxRetiredBackends?: number;
  /** Subscriber knobs (tests shorten the timeouts). */
  subscriber?: Pick<KvSubscriberOptions, 'replayTimeoutMs' | 'reconnectMinMs' | 'reconnectMaxMs' | 'receiveHighWaterMark'>;
}

/** Counters of one backend's stream since the gateway started (kept across reconnects of the same id). */
export interface KvBackendStats extends Omit<KvSubscriberStats, 'lastSeq'>, ApplierStats {
  index: number;
  id: string;
  /** Following it now (false once removed; its entries are purged). */
  active: boolean;
  lastSeq: bigint | null;
  /** Blocks the events say this backend holds, and of them per tier. */
  indexedBlocks: number;
  confirmedBlocks: number;
  offloadedBlocks: number;
}

export interface KvThreadStats extends FeederStats {
  backends: KvBackendStats[];
  /** Event ts → applied, over the last batches applied (any backend), ms; null before any. */
  applyLagP50Ms: number | null;
  applyLagP99Ms: number | null;
  /** Backends purged because they left the list (or their row was released while followed). */
  purged: number;
  /** Departed backends' counters dropped at maxRetiredBackends (the oldest departures first). */
  retiredDropped: number;
}

export interface KvEventsThread {
  /** Follows exactly these backends (others are closed and purged); resolves once the thread has applied it. */
  setBackends (backends: readonly KvBackendSpec[], assumedTtlMs?: number): Promise<void>;
  /**
   * Purges a released row: the thread stops following the backend at `index` if it still does, drains the
   * ring, and clears the pod from every index entry in every kind (assumed, confirmed, offloaded). Call it after
   * PodTable.release(index) moved the row's lease, so no op of the old lease can land after the purge; leave the
   * backend out of later setBackends lists. Resolves, with the keys the purge changed, once the purge is done.
   */
  purgePod (index: number): Promise<number>;
  /**
   * purgePod for several released rows (distinct, 1 to 256) in one sweep of the index: what a batch of rows
   * released together costs. Rejects with a RangeError, purging none, if any row is out of range or repeated.
   */
  purgePods (rows: readonly number[]): Promise<number>;
  /** Drops the counters kept for a backend id that left for good (its ear_kv_* series go); false if none or still followed. */
  forget (backendId: string): Promise<boolean>;
  stats (): Promise<KvThreadStats>;
  stop (): Promise<KvThreadStats>;
}

export function startKvEventsThread (shared: SharedRegion, opts: KvThreadOptions): KvEventsThread {
  const data: KvEventsThreadData = {
    shared,
    assumedTtlMs: opts.assumedTtlMs,
    blockSize: opts.blockSize ?? BLOCK_SIZE,
    maxMappedBlocks: opts.maxMappedBlocks ?? MAX_MAPPED_BLOCKS,
    maxRetiredBackends: opts.maxRetiredBackends ?? 1024,
    subscriber: opts.subscriber ?? {}
  };
  const worker = new Worker(URL_, { workerData: data });
  let nextId = 0;
  let failed: Error | null = null;
  const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  worker.on('message', (m: { id: number; value?: unknown; error?: string }) => {
    const w = waiting.get(m.id);
    waiting.delete(m.id);
    if (m.error !== undefined) w?.reject(new RangeError(m.error));
    else w?.resolve(m.value);
  });
  const fail = (err: Error): void => {
    failed = err;
    for (const w of waiting.values()) w.reject(err);
    waiting.clear();
  };
  worker.on('error', fail);
  worker.on('exit', () => fail(new Error('the kv-events thread has exited')));
  const ask = <T>(msg: Record<string, unknown>): Promise<T> => {
    if (failed) return Promise.reject(failed);
    const id = nextId++;
    const reply = new Promise<T>((resolve, reject) => waiting.set(id, { resolve: resolve as (v: unknown) => void, reject }));
    worker.postMessage({ ...msg, id });
    return reply;
  };
  let stopping: Promise<KvThreadStats> | null = null;
  return {
    setBackends: (backends, assumedTtlMs) => ask<void>({ type: 'backends', backends, assumedTtlMs }),
    purgePod: (index) => ask<number>({ type: 'purge', rows: [index] }),
    purgePods: (rows) => ask<number>({ type: 'purge', rows: [...rows] }),
    forget: (backendId) => ask<boolean>({ type: 'forget', backendId }),
    stats: () => ask<KvThreadStats>({ type: 'stats' }),
    stop () {
      stopping ??= (async () => {
        const exited = once(worker, 'exit');
        const s = await ask<KvThreadStats>({ type: 'stop' });
        await exited;
        return s;
      })();
      return stopping;
    }
  };
}
