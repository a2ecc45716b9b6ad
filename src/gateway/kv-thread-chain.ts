// What the main thread asks of the kv-events thread, in order on one chain: backend lists to follow, and purges
// of released pod rows. Purges are batched: rows released while the chain is busy wait in one open batch, which
// goes as ONE message (one sweep of the prefix index for all of them) when the chain gets to it; each row's
// promise settles when its batch is done. A rolling update that frees rows by the dozen pays one sweep per
// batch, not one per row.
//
// Ordering: after a row's purge, no backend list that still lists the row may reach the thread (it would follow
// the departed backend's stream again and write its events into a row about to be reused). A row released
// while a batch is open joins it unless a list queued after that batch lists the row; then it opens a new
// batch behind that list. A list computed once the backend retired never lists it, so in practice every row
// joins the open batch. The thread's purge itself stops following a row it still follows.
//
// An engine restart (a new process start time on its /metrics) goes on the same chain: the thread drops the
// row's entries, so the note must not pass a purge of that row (the row could be leased again by then). A row
// waiting for its purge gets no note (the purge drops more); one noted after the open batch opens a new batch.
//
// Bound: each row is queued at most once at a time (a releasing row is not released again before its purge is
// confirmed, src/core/pod-rows.ts), so at most `rows` purges wait: the pod table's capacity.
import type { KvBackendSpec, KvEventsThread } from '../kvevents/kv-events-thread.js';

/** The kv-events thread as the chain drives it. */
export type KvChainTarget = Pick<KvEventsThread, 'setBackends' | 'purgePods' | 'engineRestarted'>;

export interface PurgeChainStats {
  /** Rows purged. */
  purgedRows: number;
  /** Messages (sweeps) they took. */
  batches: number;
  /** Rows in the largest batch so far. */
  largestBatch: number;
  /** Engine restarts noted to the thread. */
  restartNotes: number;
}

interface Batch {
  rows: number[];
  waiters: Array<{ resolve: () => void; reject: (err: unknown) => void }>;
}

export class KvThreadChain {
  readonly stats: PurgeChainStats = { purgedRows: 0, batches: 0, largestBatch: 0, restartNotes: 0 };
  readonly #target: KvChainTarget;
  readonly #rows: number;
  #tail: Promise<void> = Promise.resolve();
  /** The last batch queued that has not been sent: rows released now may join it. */
  #open: Batch | null = null;
  /** Rows listed by backend lists queued after the open batch: they may not join it. */
  readonly #listedAfterOpen = new Set<number>();
  /** Rows queued and not yet purged. */
  readonly #queued = new Set<number>();

  /** `rows`: the pod table's capacity (rows are in [0, rows)). */
  constructor (target: KvChainTarget, rows: number) {
    if (!Number.isInteger(rows) || rows < 1) throw new RangeError(`the purge chain needs a row count of at least 1, got ${rows}`);
    this.#target = target;
    this.#rows = rows;
  }

  /** Rows waiting for their purge (queued or being purged). */
  get pending (): number {
    return this.#queued.size;
  }

  /** Queues a backend list (errors are the thread's to count: the next list is sent all the same). */
  setBackends (backends: readonly KvBackendSpec[], assumedTtlMs?: number): void {
    this.#tail = this.#tail.then(() => this.#target.setBackends(backends, assumedTtlMs)).catch(() => {});
    if (this.#open !== null) for (const b of backends) this.#listedAfterOpen.add(b.index);
  }

  /**
   * Queues the note that the engine at `row` (backend `backendId`) restarted. Skipped for a row waiting for its
   * purge; errors are the thread's to count (a bad row is the caller's bug: rejected at once, nothing queued).
   */
  engineRestarted (row: number, backendId: string): void {
    if (!Number.isInteger(row) || row < 0 || row >= this.#rows) throw new RangeError(`pod row must be an integer in [0, ${this.#rows}), got ${row}`);
    if (this.#queued.has(row)) return;
    this.stats.restartNotes++;
    this.#tail = this.#tail.then(() => this.#target.engineRestarted(row, backendId)).catch(() => {});
    if (this.#open !== null) this.#listedAfterOpen.add(row);
  }

  /**
   * Queues the purge of a released row (PodTable.release moved its lease already); resolves once the thread
   * has purged it. Rejects a row out of range or already queued (a caller's bug) at once, queuing nothing.
   */
  purge (row: number): Promise<void> {
    if (!Number.isInteger(row) || row < 0 || row >= this.#rows) return Promise.reject(new RangeError(`pod row must be an integer in [0, ${this.#rows}), got ${row}`));
    if (this.#queued.has(row)) return Promise.reject(new Error(`pod row ${row} is already waiting for its purge`));
    let b = this.#open;
    if (b === null || this.#listedAfterOpen.has(row)) {
      const batch: Batch = b = { rows: [], waiters: [] };
      this.#open = batch;
      this.#listedAfterOpen.clear();
      this.#tail = this.#tail.then(() => this.#send(batch));
    }
    this.#queued.add(row);
    b.rows.push(row);
    return new Promise((resolve, reject) => b.waiters.push({ resolve, reject }));
  }

  /** Resolves once everything queued so far has been done (tests, reload, close). */
  idle (): Promise<void> {
    return this.#tail;
  }

  async #send (b: Batch): Promise<void> {
    // From here on the batch is closed: rows released later go in the next one.
    if (this.#open === b) {
      this.#open = null;
      this.#listedAfterOpen.clear();
    }
    try {
      await this.#target.purgePods(b.rows);
      this.stats.purgedRows += b.rows.length;
      this.stats.batches++;
      this.stats.largestBatch = Math.max(this.stats.largestBatch, b.rows.length);
      for (const w of b.waiters) w.resolve();
    } catch (err) {
      for (const w of b.waiters) w.reject(err);
    } finally {
      for (const r of b.rows) this.#queued.delete(r);
    }
  }
}
