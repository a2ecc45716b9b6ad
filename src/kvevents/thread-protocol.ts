// The kv-events thread's messages (src/kvevents/kv-events-thread.ts ↔ src/kvevents/kv-events-service.ts):
// requests only, each answered, carried by src/threads/. A request with bad pod rows is answered with
// ERR_OUT_OF_RANGE, rethrown to the caller as a RangeError; anything else the thread throws ends it.
import type { SharedRegion } from '../core/region.js';
import type { FeederStats } from './index-feeder.js';
import type { ApplierStats } from './event-applier.js';
import type { KvSubscriberOptions, KvSubscriberStats } from './subscriber.js';
import { threadError, type WireError } from '../threads/outcome.js';

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

export interface KvEventsThreadData {
  shared: SharedRegion;
  assumedTtlMs: number;
  blockSize: number;
  maxMappedBlocks: number;
  /** Departed backends whose counters are kept (the most recent); older ones are dropped and counted. */
  maxRetiredBackends: number;
  /** Make the prefix index's pages resident at start (KvThreadOptions.warmIndex). */
  warmIndex: boolean;
  subscriber: KvSubscriberOptions;
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
  /** Rows cleared because the main thread saw their engine restart (restarted). */
  restartedRows: number;
  /** Index slots whose pages the warm-up made resident so far (warmIndex; 0 without it). */
  warmedSlots: number;
}

export type ToKvThread =
  /** Follow exactly these backends (the others are closed and purged); a TTL changes the assumed entries'. */
  | { type: 'backends'; backends: readonly KvBackendSpec[]; assumedTtlMs?: number }
  /** Released pod rows: stop following them and purge their entries, all in one sweep. */
  | { type: 'purge'; rows: readonly number[] }
  /** The engine at this row restarted: drop the row's entries and learn the new process's cache (replay). */
  | { type: 'restarted'; row: number; backendId: string }
  /** Drop a departed backend's counters. */
  | { type: 'forget'; backendId: string }
  | { type: 'stats' }
  /** Close every stream, drain the ring, answer with the last counters, exit. */
  | { type: 'stop' };

export interface KvEventsProtocol {
  data: KvEventsThreadData;
  call: ToKvThread;
  answers: {
    backends: void;
    /** Index keys the purge changed. */
    purge: number;
    restarted: void;
    /** Whether there were counters to drop. */
    forget: boolean;
    stats: KvThreadStats;
    stop: KvThreadStats;
  };
  note: never;
  event: never;
}

/** The code of an answer that refuses pod rows; the caller rethrows it as a RangeError. */
export const BAD_ROWS = 'ERR_OUT_OF_RANGE';

export function kvThreadError (e: WireError): Error {
  return e.code === BAD_ROWS ? new RangeError(e.message) : threadError(e);
}
