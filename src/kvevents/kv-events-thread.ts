// Starts and stops the kv-events thread (workers/kv-events-thread.ts) from the main thread, tells it which
// backends publish KV events, and asks for its counters.
import type { SharedRegion } from '../core/region.js';
import { BLOCK_SIZE, MAX_MAPPED_BLOCKS } from '../core/defaults.js';
import { ThreadClient } from '../threads/thread-client.js';
import type { KvSubscriberOptions } from './subscriber.js';
import { kvThreadError, type KvBackendSpec, type KvEventsProtocol, type KvThreadStats } from './thread-protocol.js';

// The types of this API, for its callers.
export type { KvBackendSpec, KvBackendStats, KvThreadStats } from './thread-protocol.js';

const URL_ = new URL('../../workers/kv-events-thread.js', import.meta.url);

export interface KvThreadOptions {
  /** Assumed presence (routing hints) lives this long; changeable later with setBackends. */
  assumedTtlMs: number;
  /** The gateway's block size: events of other sizes are counted and skipped. Default 16. */
  blockSize?: number;
  /** Engine-hash mappings kept per backend (default 262 144). */
  maxMappedBlocks?: number;
  /** Departed backend ids whose counters are kept, the most recently departed (default 1024). */
  maxRetiredBackends?: number;
  /**
   * Make the prefix index's pages resident at start, in slices between drains of the ring (config
   * `prefixIndexWarm`; default false).
   */
  warmIndex?: boolean;
  /** Subscriber knobs (tests shorten the timeouts). */
  subscriber?: Pick<KvSubscriberOptions, 'replayTimeoutMs' | 'reconnectMinMs' | 'reconnectMaxMs' | 'receiveHighWaterMark'>;
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
   * purgePod for several released rows (distinct, 1 to the pod rows) in one sweep of the index: what a batch of rows
   * released together costs. Rejects with a RangeError, purging none, if any row is out of range or repeated.
   */
  purgePods (rows: readonly number[]): Promise<number>;
  /**
   * The engine leasing `row` (backend `backendId`) restarted: the thread drops every entry of the row (assumed,
   * confirmed, offloaded) and, if it follows that backend's KV events, resyncs the stream from the new process's
   * replay buffer. A row now followed for another id is left alone. Rejects with a RangeError for a bad row.
   */
  engineRestarted (row: number, backendId: string): Promise<void>;
  /** Drops the counters kept for a backend id that left for good (its ear_kv_* series go); false if none or still followed. */
  forget (backendId: string): Promise<boolean>;
  stats (): Promise<KvThreadStats>;
  stop (): Promise<KvThreadStats>;
}

export function startKvEventsThread (shared: SharedRegion, opts: KvThreadOptions): KvEventsThread {
  const thread = new ThreadClient<KvEventsProtocol>(URL_, {
    shared,
    assumedTtlMs: opts.assumedTtlMs,
    blockSize: opts.blockSize ?? BLOCK_SIZE,
    maxMappedBlocks: opts.maxMappedBlocks ?? MAX_MAPPED_BLOCKS,
    maxRetiredBackends: opts.maxRetiredBackends ?? 1024,
    warmIndex: opts.warmIndex ?? false,
    subscriber: opts.subscriber ?? {}
  }, { name: 'kv-events thread', toError: kvThreadError });
  return {
    setBackends: (backends, assumedTtlMs) => thread.call({ type: 'backends', backends, assumedTtlMs }),
    purgePod: (index) => thread.call({ type: 'purge', rows: [index] }),
    purgePods: (rows) => thread.call({ type: 'purge', rows }),
    engineRestarted: (row, backendId) => thread.call({ type: 'restarted', row, backendId }),
    forget: (backendId) => thread.call({ type: 'forget', backendId }),
    stats: () => thread.call({ type: 'stats' }),
    stop: () => thread.stop({ type: 'stop' })
  };
}
