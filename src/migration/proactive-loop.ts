// The migration thread's loop (ear-proactive): every intervalMs it plans idle sessions' moves over the shared
// tables (ProactivePlanner), and runs each move's transfer (proactiveTransfer) through its own connections to
// the backends; a move whose transfer succeeded is handed to the main thread, which rebinds the session (the
// session table's writer). Nothing here throws out of a tick or a move: errors are counted and reported.
// Kept apart from the worker entry point so tests can drive it on any thread.
import { randomBytes } from 'node:crypto';
import { post } from '../upstream/buffered-post.js';
import { UpstreamPool, type UpstreamPoolOptions } from '../upstream/pool.js';
import { backendHeaders } from '../upstream/headers.js';
import { BodyCache, type SessionBody } from './body-cache.js';
import type { LegSignal, TransferPeer } from './connector.js';
import { legPriority } from './leg-priority.js';
import type { ProactivePlanner, PlannedMove } from './proactive-planner.js';
import { proactiveTransfer, type ProactiveTransferResult } from './proactive-transfer.js';
import type { FromMigrationThread, MigrationBackend, MigrationThreadStats } from './thread-protocol.js';
import type { KvTransfers } from './transfer.js';

export interface ProactiveLoopOptions {
  planner: ProactivePlanner;
  transfers: KvTransfers;
  bodyCacheBytes: number;
  intervalMs: number;
  upstream: Pick<UpstreamPoolOptions, 'connections' | 'headersTimeoutMs' | 'bodyTimeoutMs'>;
  /** To the main thread. */
  send: (m: FromMigrationThread) => void;
  /** ms since the epoch: the clock the main thread stamps the session table with. */
  now: () => number;
}

interface Peer {
  spec: MigrationBackend;
  pool: UpstreamPool;
  peer: TransferPeer;
}

/** Errors reported to the main thread (for its log) at most this often; all are counted. */
const ERROR_REPORT_MS = 10_000;

export class ProactiveLoop {
  readonly #o: ProactiveLoopOptions;
  readonly #bodies: BodyCache;
  readonly #peers = new Map<number, Peer>();
  readonly #moves = new Set<Promise<void>>();
  readonly #signals = new Set<LegSignal>();
  #timer: NodeJS.Timeout | null = null;
  #stopped = false;
  #lastErrorReport = -Infinity;
  readonly #c = { ticks: 0, failed: 0, noBody: 0, transferred: 0, errors: 0 };

  constructor (o: ProactiveLoopOptions) {
    this.#o = o;
    this.#bodies = new BodyCache(o.bodyCacheBytes);
  }

  /** Follows exactly these backends: connections to ones gone or changed are closed. */
  setBackends (list: readonly MigrationBackend[]): void {
    const wanted = new Map(list.map((b) => [b.index, b]));
    for (const [index, p] of this.#peers) {
      const w = wanted.get(index);
      if (w !== undefined && w.id === p.spec.id && w.url === p.spec.url && (w.apiKey ?? null) === (p.spec.apiKey ?? null) && (w.priority ?? null) === (p.spec.priority ?? null)) {
        p.spec = w; // the models may have changed
        continue;
      }
      this.#peers.delete(index);
      void p.pool.close().catch(() => {});
    }
    for (const b of wanted.values()) {
      if (this.#peers.has(b.index) || this.#stopped) continue;
      try {
        const pool = new UpstreamPool(b.url, { ...this.#o.upstream, headers: backendHeaders(b.apiKey ?? null) });
        const peer: TransferPeer = { id: b.id, host: new URL(b.url).hostname, priority: b.priority ?? null, post: (path, body, rid, signal) => post(pool, path, body, rid, signal) };
        this.#peers.set(b.index, { spec: b, pool, peer });
      } catch (err) {
        this.error(`backend ${b.id}: ${(err as Error).message}`);
      }
    }
    this.#o.planner.setBackends(new Map([...this.#peers].map(([i, p]) => [i, { id: p.spec.id, models: new Set(p.spec.models) }])));
  }

  /** A session's latest forwarded body. */
  body (key: bigint, e: SessionBody): void {
    this.#bodies.set(key, e);
  }

  start (): void {
    if (this.#stopped || this.#timer !== null) return;
    this.#timer = setTimeout(() => this.#tick(), this.#o.intervalMs);
  }

  #tick (): void {
    this.#timer = null;
    if (this.#stopped) return;
    this.tick();
    this.#timer = setTimeout(() => this.#tick(), this.#o.intervalMs);
  }

  /** One planning round: starts the moves it plans (they run on after it returns). */
  tick (): void {
    this.#c.ticks++;
    let moves: PlannedMove[];
    try {
      moves = this.#o.planner.plan(this.#o.now(), (key) => this.#bodies.peek(key)?.model);
    } catch (err) {
      this.error(`planning: ${(err as Error).stack ?? String(err)}`);
      return;
    }
    for (const m of moves) {
      const p = this.#move(m).catch((err: unknown) => this.error(`move: ${(err as Error).stack ?? String(err)}`));
      this.#moves.add(p);
      void p.finally(() => this.#moves.delete(p));
    }
  }

  /** Resolves when every move started so far has ended (tests). */
  async settled (): Promise<void> {
    while (this.#moves.size > 0) await Promise.all([...this.#moves]);
  }

  async #move (m: PlannedMove): Promise<void> {
    const { planner } = this.#o;
    const e = this.#bodies.get(m.sessionKey);
    const src = this.#peers.get(m.from);
    const dst = this.#peers.get(m.to);
    if (e === undefined) {
      this.#c.noBody++;
      planner.end(m);
      return;
    }
    const signal: LegSignal = { aborted: false, onAbort: null };
    this.#signals.add(signal);
    let r: ProactiveTransferResult;
    try {
      if (src === undefined || dst === undefined) {
        r = { mode: 'none', ok: false, sourceSeconds: 0, bytes: 0, failure: 'a backend of the move left' };
      } else {
        r = await proactiveTransfer(this.#o.transfers, {
          path: e.path, body: e.body, src: src.peer, dst: dst.peer, contextTokens: m.contextTokens,
          sourceBacklog: { pending: m.sourceBacklog, running: m.sourceRunning, waiting: m.sourceWaiting, priority: legPriority(src.peer, e.path) !== null },
          requestId: `ear-proactive-${randomBytes(8).toString('hex')}`, signal
        });
      }
    } catch (err) {
      r = { mode: 'none', ok: false, sourceSeconds: 0, bytes: 0, failure: (err as Error).message };
      this.#c.errors++;
    } finally {
      this.#signals.delete(signal);
      planner.end(m);
    }
    if (r.mode !== 'none') this.#o.send({ type: 'transfer', mode: r.mode, ok: r.ok, sourceSeconds: r.sourceSeconds, bytes: r.bytes, failure: r.failure, from: m.from, to: m.to, tokens: m.contextTokens });
    if (!r.ok) {
      this.#c.failed++;
      return;
    }
    this.#c.transferred++;
    this.#o.send({ type: 'moved', key: m.sessionKey, sessionId: e.sessionId, from: m.from, to: m.to });
  }

  /** Counts an error and reports it to the main thread (at most one report per ERROR_REPORT_MS). */
  error (message: string): void {
    this.#c.errors++;
    const t = this.#o.now();
    if (t - this.#lastErrorReport < ERROR_REPORT_MS) return;
    this.#lastErrorReport = t;
    this.#o.send({ type: 'error', message });
  }

  stats (): MigrationThreadStats {
    return { ...this.#o.planner.stats(), ...this.#c, bodies: this.#bodies.stats() };
  }

  /** Stops planning, aborts the transfers in flight, waits for them, closes the connections. */
  async stop (): Promise<MigrationThreadStats> {
    this.#stopped = true;
    if (this.#timer !== null) clearTimeout(this.#timer);
    this.#timer = null;
    for (const s of this.#signals) {
      s.aborted = true;
      s.onAbort?.();
    }
    await this.settled();
    await Promise.all([...this.#peers.values()].map((p) => p.pool.close().catch(() => {})));
    this.#peers.clear();
    return this.stats();
  }
}
