// Starts and stops the migration thread (workers/migration-thread.ts) from the main thread, tells it the
// backends and each session's last body, hands its results to the caller, and asks for its counters. The
// thread never takes the gateway down: its errors are reported to onError, and if it dies anyway, pending
// calls reject and later messages to it are dropped (src/threads/thread-client.ts).
import type { SharedRegion } from '../core/region.js';
import { ThreadClient } from '../threads/thread-client.js';
import type { SessionBody } from './body-cache.js';
import type { FromMigrationThread, MigrationBackend, MigrationProtocol, MigrationThreadData, MigrationThreadStats } from './thread-protocol.js';

const URL_ = new URL('../../workers/migration-thread.js', import.meta.url);

export interface MigrationThreadHandlers {
  /** A transfer succeeded: rebind the session if it is still idle on `from`. */
  onMoved (m: Extract<FromMigrationThread, { type: 'moved' }>): void;
  /** A transfer ended, any outcome. */
  onTransfer (m: Extract<FromMigrationThread, { type: 'transfer' }>): void;
  /** An error in the thread (already counted there), or the thread's death. */
  onError (message: string): void;
}

export interface MigrationThread {
  setBackends (backends: readonly MigrationBackend[]): void;
  /** A session's request completed with this forwarded body (copied: the caller's buffer is not kept). */
  body (key: bigint, e: SessionBody): void;
  stats (): Promise<MigrationThreadStats>;
  /** Aborts the transfers in flight and ends the thread; resolves with its last counters (null if it had died). */
  stop (): Promise<MigrationThreadStats | null>;
}

export function startMigrationThread (data: Omit<MigrationThreadData, 'shared'>, shared: SharedRegion, handlers: MigrationThreadHandlers): MigrationThread {
  const thread = new ThreadClient<MigrationProtocol>(URL_, { ...data, shared }, {
    name: 'migration thread',
    onEvent (m) {
      try {
        if (m.type === 'moved') handlers.onMoved(m);
        else if (m.type === 'transfer') handlers.onTransfer(m);
        else if (m.type === 'error') handlers.onError(m.message);
      } catch (err) {
        handlers.onError(`handling ${m.type}: ${(err as Error).stack ?? String(err)}`);
      }
    },
    // Not the end stop() asked for.
    onFailure: (err) => handlers.onError(`the migration thread stopped: ${err.message}`)
  });
  return {
    setBackends: (backends) => thread.note({ type: 'backends', backends: [...backends] }),
    body (key, e) {
      // A fresh buffer moved to the thread: a view's whole backing store would be cloned otherwise.
      const copy = new Uint8Array(e.body.byteLength);
      copy.set(e.body);
      thread.note({ type: 'body', key, sessionId: e.sessionId, model: e.model, path: e.path, body: copy }, [copy.buffer]);
    },
    stats: () => thread.call({ type: 'stats' }),
    // The thread had died, or died meanwhile: it is terminated, and there are no last counters.
    stop: () => thread.stop({ type: 'stop' }).catch(() => null)
  };
}
