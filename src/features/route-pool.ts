// The route pool: worker threads that compute request features (src/features/route-service.ts) over the shared
// region. It is session-affine: one single-thread piscina pool per thread, a session's requests always go to
// the same thread (by a hash of the session id), so that thread's per-session state makes a turn cost O(new
// tokens); requests without a session go to the least busy thread. Its queue is bounded: past `maxQueue`
// waiting tasks over all threads a request is refused with 429 rather than letting latency grow without limit.
// Messages: src/features/route-protocol.ts.
import { Worker } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { SharedRegion } from '../core/region.js';
import { SESSION_IDLE_MS } from '../core/defaults.js';
import { unwrap } from '../threads/outcome.js';
import { EarError } from '../errors/errors.js';
import type { Endpoint } from '../dialects/dialect.js';
import type { Features } from './features.js';
import type { RemoteTokenizerOptions } from '../tokenize/remote.js';
import { freezeTokenizer, type FrozenTokenizer } from '../tokenize/index.js';
import { routeError, type RouteResult, type RouteTask, type RouteWorkerData } from './route-protocol.js';

const WORKER = new URL('../../workers/route-worker.js', import.meta.url).href;
// piscina loads a worker file with require() first and import() only when that throws. On Node 20.19+ require()
// of an ES module succeeds, but racing the loader it can abort the whole process (a V8 fatal in IsGraphAsync,
// seen in CI). Turning require(esm) off in the pool's threads makes piscina take the import() path every time.
// The process's own flags go with them (--cpu-prof, --inspect, --enable-source-maps) except those a worker refuses:
// V8's heap flags (--max-old-space-size, --max-semi-space-size) and other per-process ones throw
// ERR_WORKER_INVALID_EXEC_ARGV, and a gateway started with them would have no pool. They hold for every thread anyway.
const WORKER_ARGV = [...workerFlags(process.execArgv), '--no-experimental-require-module'];

/** The flags of `argv` a worker thread accepts, found by starting one that exits at once (only when there are any). */
function workerFlags (argv: readonly string[]): string[] {
  const accepts = (flags: string[]): boolean => {
    try {
      void new Worker('0', { eval: true, execArgv: flags }).terminate();
      return true;
    } catch {
      return false;
    }
  };
  if (argv.length === 0 || accepts([...argv])) return [...argv];
  return argv.filter((f) => accepts([f]));
}

export interface RoutePoolOptions {
  threads: number;
  tokenizer: string;
  blockSize: number;
  /** Waiting tasks over all threads before 429. Default 4096. */
  maxQueue?: number;
  /** Sessions whose tokens and keys each thread keeps (LRU). Default 4096. */
  sessionsPerThread?: number;
  /** A session idle this long loses its per-thread state. Default SESSION_IDLE_MS. */
  sessionIdleMs?: number;
  /** Settings of the `remote:` tokenizer. */
  remote?: Partial<RemoteTokenizerOptions>;
  /** Called with the seconds each task waited for its thread (the gateway's queue before routing). */
  onQueueWait?: (seconds: number) => void;
  /**
   * The tokenizer's tables as this process shares them (freezeTokenizer): the threads make their tokenizer of them.
   * Default: frozen here (built on this thread once); a data-plane thread passes the main thread's.
   */
  frozenTokenizer?: FrozenTokenizer | null;
  /** A thread's failure that failed no task (the gateway counts it as a fault). Default: written to stderr. */
  onThreadError?: (err: unknown) => void;
}

export interface RoutePoolStats {
  /** Requests refused because the queue was full. */
  queueFull: number;
  /** Requests whose remote tokenization failed (or was skipped by an open breaker) and used `character`. */
  tokenizerFallbacks: number;
}

export interface RoutePool {
  features (endpoint: Endpoint, body: Buffer, sessionId?: string | null): Promise<Features>;
  /**
   * Resolves once every thread has loaded (its tokenizer made and warmed), so that a gateway listens only when its
   * first request will not wait for that; rejects if a thread cannot load.
   */
  ready (): Promise<void>;
  stats (): RoutePoolStats;
  close (): Promise<void>;
}

/** FNV-1a of the session id: a stable thread for a session. */
export function sessionShard (sessionId: string, shards: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < sessionId.length; i++) {
    h ^= sessionId.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) % shards;
}

const READY_PROBE = new TextEncoder().encode('{"model":"ready","prompt":[]}');

export function createRoutePool (shared: SharedRegion, opts: RoutePoolOptions): RoutePool {
  const maxQueue = opts.maxQueue ?? 4096;
  const workerData: RouteWorkerData = {
    shared, tokenizer: opts.tokenizer, blockSize: opts.blockSize, sessions: opts.sessionsPerThread ?? 4096,
    sessionIdleMs: opts.sessionIdleMs ?? SESSION_IDLE_MS, remote: opts.remote ?? {},
    frozenTokenizer: opts.frozenTokenizer !== undefined ? opts.frozenTokenizer : freezeTokenizer(opts.tokenizer)
  };
  const shards = Array.from({ length: opts.threads }, () => ({
    // No maxQueue of piscina's own: the bound is counted here, where the refusal is made (piscina's error for it
    // is a bare Error told apart only by its message).
    pool: new Piscina({ filename: WORKER, minThreads: 1, maxThreads: 1, idleTimeout: Infinity, workerData, execArgv: WORKER_ARGV }),
    inFlight: 0
  }));
  // A thread's failure with no task to fail (say, as it loads again) is emitted here; unheard, it would end the process.
  const onThreadError = opts.onThreadError ?? ((err: unknown) => { console.error('a route thread failed', err); });
  for (const s of shards) s.pool.on('error', onThreadError);
  let inFlight = 0;
  const stats: RoutePoolStats = { queueFull: 0, tokenizerFallbacks: 0 };

  function pick (sessionId: string | null): (typeof shards)[number] {
    if (sessionId !== null) return shards[sessionShard(sessionId, shards.length)];
    let best = shards[0];
    for (const s of shards) if (s.inFlight < best.inFlight) best = s;
    return best;
  }

  return {
    async features (endpoint, body, sessionId = null) {
      // One running task per thread; the rest wait, and at most maxQueue of them.
      if (inFlight - shards.length >= maxQueue) {
        stats.queueFull++;
        throw new EarError('EAR_ERR_QUEUE_FULL', 'the gateway is overloaded: try again');
      }
      const shard = pick(sessionId);
      let r: RouteResult;
      inFlight++;
      shard.inFlight++;
      const queuedAt = performance.timeOrigin + performance.now();
      try {
        r = await shard.pool.run({ endpoint, body, sessionId } satisfies RouteTask);
      } finally {
        inFlight--;
        shard.inFlight--;
      }
      // Both clocks are the epoch in ms; a thread's timeOrigin can differ from ours by a few µs, hence the floor.
      opts.onQueueWait?.(Math.max(0, r.startedAt - queuedAt) / 1000);
      if (r.fallback) stats.tokenizerFallbacks++;
      return unwrap(r, routeError);
    },
    async ready () {
      // An empty prompt, refused (a 400 as a value) before any tokenizer runs, not even a remote one: the answer
      // only says the thread has loaded. A thread that fails to load rejects the probe, or (when it failed before the
      // probe was its task) emits an error, after which Piscina may leave the probe waiting for ever.
      await Promise.all(shards.map((s) => new Promise<void>((resolve, reject) => {
        s.pool.once('error', reject);
        s.pool.run({ endpoint: 'completions', body: READY_PROBE, sessionId: null } satisfies RouteTask)
          .then(() => resolve(), reject)
          .finally(() => s.pool.off('error', reject));
      })));
    },
    stats: () => ({ ...stats }),
    close: async () => { await Promise.all(shards.map((s) => s.pool.destroy())); }
  };
}
