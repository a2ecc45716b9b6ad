// Starts and stops the migration thread (workers/migration-thread.ts) from the main thread, tells it the
// backends and each session's last body, hands its results to the caller, and asks for its counters. The
// thread never takes the gateway down: its errors are reported to onError, and if it dies anyway, pending
// calls reject and later messages to it are dropped.
import { Worker } from 'node:worker_threads';
import { once } from 'node:events';
import type { SharedRegion } from '../core/region.js';
import type { SessionBody } from './body-cache.js';
import type { FromMigrationThread, MigrationBackend, MigrationThreadData, MigrationThreadStats, ToMigrationThread } from './thread-protocol.js';

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
  const full: MigrationThreadData = { ...data, shared };
  const worker = new Worker(URL_, { workerData: full });
  let nextId = 0;
  let failed: Error | null = null;
  const waiting = new Map<number, { resolve: (v: MigrationThreadStats) => void; reject: (e: Error) => void }>();
  worker.on('message', (m: FromMigrationThread) => {
    try {
      if (m.type === 'reply') {
        const w = waiting.get(m.id);
        waiting.delete(m.id);
        w?.resolve(m.value);
      } else if (m.type === 'moved') handlers.onMoved(m);
      else if (m.type === 'transfer') handlers.onTransfer(m);
      else if (m.type === 'error') handlers.onError(m.message);
    } catch (err) {
      handlers.onError(`handling ${m.type}: ${(err as Error).stack ?? String(err)}`);
    }
  });
  let stopping: Promise<MigrationThreadStats | null> | null = null;
  const fail = (err: Error): void => {
    // Reported unless it is the end stop() asked for.
    if (failed === null && stopping === null) handlers.onError(`the migration thread stopped: ${err.message}`);
    failed ??= err;
    for (const w of waiting.values()) w.reject(err);
    waiting.clear();
  };
  // Without this listener an uncaught error in the thread would be thrown on the main thread.
  worker.on('error', fail);
  // From here every call is answered with this error, none waits on a thread that is gone.
  worker.on('exit', () => fail(new Error('the migration thread has exited')));
  const send = (m: ToMigrationThread, transfer?: ArrayBuffer[]): void => {
    if (failed === null && stopping === null) worker.postMessage(m, transfer);
  };
  const ask = (m: ToMigrationThread & { id: number }): Promise<MigrationThreadStats> => {
    if (failed) return Promise.reject(failed);
    const reply = new Promise<MigrationThreadStats>((resolve, reject) => waiting.set(m.id, { resolve, reject }));
    worker.postMessage(m);
    return reply;
  };
  return {
    setBackends: (backends) => send({ type: 'backends', backends: [...backends] }),
    body (key, e) {
      // A fresh buffer moved to the thread: a view's whole backing store would be cloned otherwise.
      const copy = new Uint8Array(e.body.byteLength);
      copy.set(e.body);
      send({ type: 'body', key, sessionId: e.sessionId, model: e.model, path: e.path, body: copy }, [copy.buffer]);
    },
    stats: () => ask({ type: 'stats', id: nextId++ }),
    stop () {
      stopping ??= (async () => {
        if (failed !== null) {
          await worker.terminate();
          return null;
        }
        const exited = once(worker, 'exit');
        let s: MigrationThreadStats | null = null;
        try {
          s = await ask({ type: 'stop', id: nextId++ });
        } catch {
          await worker.terminate();
        }
        await exited;
        return s;
      })();
      return stopping;
    }
  };
}
