// The migration thread's messages (src/migration/migration-thread.ts ↔ src/migration/migration-service.ts),
// carried by src/threads/: notes to the thread, its two requests, and its events back. MessagePort, not a ring:
// a move is seconds of transfer, so a message's microseconds do not matter (docs/architecture.md#rings-and-messages).
import type { SharedRegion } from '../core/region.js';
import type { BodyCacheStats } from './body-cache.js';
import type { TransferMode } from './cost.js';
import type { PlannerStats } from './proactive-planner.js';
import type { KvTransferSettings } from './transfers-for.js';
import type { EnginePriorityKind } from '../core/engine-priority.js';

/** A backend the thread may reach: its pod row, id, URL and the models it serves. */
export interface MigrationBackend {
  index: number;
  id: string;
  url: string;
  /** The engine's own API key (config), sent as Authorization; absent: none. */
  apiKey?: string | null;
  /** Whether its engine orders by request priority (the backend's `priority`): legs go at the most urgent value. */
  priority?: EnginePriorityKind | null;
  models: string[];
}

export interface MigrationThreadData {
  shared: SharedRegion;
  /** ear-proactive's knobs as configured (readEarProactiveKnobs reads them in the thread). */
  policyConfig: Record<string, unknown>;
  /** Planning period (ms). */
  intervalMs: number;
  /** Bound of the session-body cache (bytes). */
  bodyCacheBytes: number;
  transfers: KvTransferSettings;
  /** The thread's own connections to each backend. */
  upstream: { connections: number; headersTimeoutMs: number; bodyTimeoutMs: number };
}

export type ToMigrationThread =
  /** The reachable backends, whole, on start and on every change. */
  | { type: 'backends'; backends: MigrationBackend[] }
  /** A session's request completed: its forwarded body, the one a transfer replays. */
  | { type: 'body'; key: bigint; sessionId: string; model: string; path: string; body: Uint8Array };

export type MigrationThreadCall =
  | { type: 'stats' }
  /** Abort the transfers in flight, close the connections, answer with the last stats, exit. */
  | { type: 'stop' };

export type FromMigrationThread =
  /** A transfer ended (counted in ear_kv_transfers_total{kind="proactive"}). */
  | { type: 'transfer'; mode: TransferMode; ok: boolean; sourceSeconds: number; bytes: number; failure?: string; from: number; to: number; tokens: number }
  /** A transfer succeeded: the main thread rebinds the session (a compare-and-set) and counts moved or dropped. */
  | { type: 'moved'; key: bigint; sessionId: string; from: number; to: number }
  /** Something failed in the thread (counted there); the main thread logs it. */
  | { type: 'error'; message: string };

export interface MigrationThreadStats extends PlannerStats {
  ticks: number;
  /** Moves whose transfer failed (the session stayed on its source). */
  failed: number;
  /** Moves skipped because the session's body was not in the cache. */
  noBody: number;
  /** Moves whose transfer succeeded and were handed to the main thread. */
  transferred: number;
  /** Errors caught in the thread (a tick or a message that threw). */
  errors: number;
  bodies: BodyCacheStats;
}

export interface MigrationProtocol {
  data: MigrationThreadData;
  call: MigrationThreadCall;
  answers: { stats: MigrationThreadStats; stop: MigrationThreadStats };
  note: ToMigrationThread;
  event: FromMigrationThread;
}
