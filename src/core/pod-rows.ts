// Pod rows: which backend occupies which row of the shared tables (pod, load, prefix index, sessions), for the
// routing host (docs/architecture.md#pod-rows). A row is leased, not owned: a backend acquires the lowest free
// row, and when it leaves, the row goes through "releasing" while its requests finish and its entries are
// purged, and is free again only once the purge is confirmed. Pure bookkeeping (no I/O, no clock, no tables
// written), so the gateway and the discrete-event driver both use it; the lease number itself lives in the pod
// table (asm/pod-table.ts PODS_F_LEASE), read through `leases`.
//
// A backend's life on a row, and what the host calls, in this order:
//   1. row = rows.acquire(id)                    the lowest free row
//      pods.set(row, …)                          the pod table's row (state ready): the host routes to it
//      ops about it: ring.push*(…, rows.lease(row)), the lease its decisions were made under
//   2. rows.retire(row)                          leaving: the host routes nothing new to it
//      sessions.unbindPod(row)                   its sessions are unbound now, so that a turn arriving while the
//                                                row drains is routed as a new session, not counted a migration
//      (the host waits for the requests in flight on the row, or gives up on them after a grace period)
//   3. pods.release(row)                         its lease moves on: from here every op of the old lease is dropped
//      load.resetRow(row)                        its counters back to zero (nothing of it in flight any more)
//      await kvThread.purgePod(row)              gateway: the kv-events thread stops following its KV events
//        or feeder.purgePod(row)                 in-process (after dropping its EventApplier): every index entry
//                                                of the row in every kind is purged, after the ring is drained;
//                                                rows released together share one sweep (purgePods: the
//                                                gateway's KvThreadChain batches them)
//   4. rows.release(row)                         the purge is confirmed: the row is free for the next acquire
// release() checks that the lease moved since acquire (step 3 was not skipped).
//
// At the bound: at most `leases.capacity` rows are leased or releasing at once; acquire then throws
// PodRowsFullError (code EAR_ERR_POD_ROWS_FULL), naming the rows still releasing, and changes nothing.

import { EarError } from '../errors/errors.js';

/** Where the rows' leases are read (PodTable has this shape). */
export interface LeaseSource {
  /** Rows in [0, capacity). */
  readonly capacity: number;
  /** The row's lease now. */
  lease (row: number): number;
}

export type RowState = 'free' | 'leased' | 'releasing';

/** Every row is leased or releasing: a backend cannot join until a release completes. */
export class PodRowsFullError extends EarError {
  constructor (message: string) {
    super('EAR_ERR_POD_ROWS_FULL', message);
    this.name = 'PodRowsFullError';
  }
}

const FREE = 0;
const LEASED = 1;
const RELEASING = 2;
const STATES: readonly RowState[] = ['free', 'leased', 'releasing'];

export class PodRows {
  readonly #leases: LeaseSource;
  readonly #state: Uint8Array;
  /** The occupant's lease, read at acquire: what its ops carry. */
  readonly #leaseAt: Uint32Array;
  readonly #occupant: Array<string | undefined>;
  /** Backend id → its leased row (not a releasing one: the same id may join again while that purge runs). */
  readonly #rowOf = new Map<string, number>();
  #used = 0;
  #releasing = 0;
  /** Rows acquired and released since start (for the host's metrics). */
  acquired = 0;
  released = 0;

  constructor (leases: LeaseSource) {
    const n = leases.capacity;
    if (!Number.isInteger(n) || n < 1) throw new RangeError(`pod rows need a capacity of at least 1, got ${n}`);
    this.#leases = leases;
    this.#state = new Uint8Array(n);
    this.#leaseAt = new Uint32Array(n);
    this.#occupant = new Array<string | undefined>(n);
  }

  get capacity (): number {
    return this.#state.length;
  }

  /** Rows leased or releasing. */
  get used (): number {
    return this.#used;
  }

  /** Rows releasing (retired, purge not yet confirmed). */
  get releasing (): number {
    return this.#releasing;
  }

  #check (row: number): void {
    if (!Number.isInteger(row) || row < 0 || row >= this.#state.length) {
      throw new RangeError(`pod row ${row} is outside [0, ${this.#state.length})`);
    }
  }

  /**
   * Leases the lowest free row to backend `id` and returns it. Throws PodRowsFullError when every row is
   * leased or releasing, and an Error if `id` already holds a leased row (see rowOf).
   */
  acquire (id: string): number {
    const held = this.#rowOf.get(id);
    if (held !== undefined) throw new Error(`backend ${id} already holds pod row ${held}`);
    if (this.#used >= this.#state.length) {
      throw new PodRowsFullError(`all ${this.#state.length} pod rows are in use (${this.#releasing} releasing): ` +
        'a backend can join once a row\'s release completes (or raise the pod table\'s capacity)');
    }
    const row = this.#state.indexOf(FREE);
    this.#state[row] = LEASED;
    this.#leaseAt[row] = this.#leases.lease(row);
    this.#occupant[row] = id;
    this.#rowOf.set(id, row);
    this.#used++;
    this.acquired++;
    return row;
  }

  /** The backend is leaving: the row stays its own (requests finish on it) but takes no new work. */
  retire (row: number): void {
    this.#check(row);
    if (this.#state[row] !== LEASED) throw new Error(`pod row ${row} is ${STATES[this.#state[row]]}, not leased`);
    this.#state[row] = RELEASING;
    this.#rowOf.delete(this.#occupant[row]!);
    this.#releasing++;
  }

  /**
   * The row's purge is confirmed: it is free for the next acquire. Only a releasing row, and only once its
   * lease has moved (the pod table's release, which must come before the purge).
   */
  release (row: number): void {
    this.#check(row);
    if (this.#state[row] !== RELEASING) throw new Error(`pod row ${row} is ${STATES[this.#state[row]]}, not releasing (retire it first)`);
    if (this.#leases.lease(row) === this.#leaseAt[row]) {
      throw new Error(`pod row ${row} still has lease ${this.#leaseAt[row]}: release it in the pod table before its purge`);
    }
    this.#state[row] = FREE;
    this.#occupant[row] = undefined;
    this.#used--;
    this.#releasing--;
    this.released++;
  }

  /**
   * The lease of the row's occupant (what its ops are stamped with): read at acquire, kept while the row
   * releases (late ops then carry the old lease, and are dropped). A free row: its lease now.
   */
  lease (row: number): number {
    this.#check(row);
    return this.#state[row] === FREE ? this.#leases.lease(row) : this.#leaseAt[row];
  }

  /** The backend id on a leased or releasing row, or undefined for a free one. */
  occupant (row: number): string | undefined {
    this.#check(row);
    return this.#occupant[row];
  }

  /** The row leased to backend `id` (not one it is leaving), or undefined. */
  rowOf (id: string): number | undefined {
    return this.#rowOf.get(id);
  }

  state (row: number): RowState {
    this.#check(row);
    return STATES[this.#state[row]];
  }
}
