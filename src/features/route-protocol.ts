// The route pool's messages (src/features/route-pool.ts ↔ src/features/route-service.ts). piscina carries them
// and numbers them: one task, one result. A failure is the result's data ({code, message} of a EarError,
// src/threads/outcome.ts), so the main thread answers with that error's status.
import type { SharedRegion } from '../core/region.js';
import type { RemoteTokenizerOptions } from '../tokenize/remote.js';
import type { FrozenTokenizer } from '../tokenize/index.js';
import type { Outcome, WireError } from '../threads/outcome.js';
import { EarError, type ErrorCode } from '../errors/errors.js';
import type { Features } from './features.js';
import type { Endpoint } from '../dialects/dialect.js';

export interface RouteWorkerData {
  shared: SharedRegion;
  tokenizer: string;
  blockSize: number;
  /** Sessions kept per worker for incremental turns. */
  sessions: number;
  /** A session idle this long loses its state here (the gateway's session expiry). */
  sessionIdleMs: number;
  remote: Partial<RemoteTokenizerOptions>;
  /** The process's tokenizer tables (freezeTokenizer), null where the thread builds its own (character, remote). */
  frozenTokenizer: FrozenTokenizer | null;
}

export interface RouteTask {
  endpoint: Endpoint;
  body: Uint8Array;
  sessionId: string | null;
}

export type RouteResult = Outcome<Features> & {
  /** The remote tokenizer was not used for this request (counted by the pool). */
  fallback?: boolean;
  /** When this thread took the task (epoch ms, sub-ms precision), for the pool's queue-wait histogram. */
  startedAt: number;
};

/** The EarError a failed task was answered with (the service sends only EarErrors' codes). */
export function routeError (e: WireError): EarError {
  return new EarError(e.code as ErrorCode, e.message);
}
