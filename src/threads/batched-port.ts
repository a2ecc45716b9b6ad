// Messages to another thread sent in batches: every message one event-loop turn makes goes in one postMessage, at
// the end of the turn (setImmediate: after the turn's I/O callbacks and their microtasks). A postMessage costs a
// structured clone, a wake of the other thread's loop and a 'message' event there, whatever it carries; under load
// one turn makes many messages (the data-plane threads measured 5 a request each way: bench/RESULTS.md, "N
// data-plane threads"), so one batch pays that once. Order is kept: one queue, one port, sent as queued.
import type { MessagePort, Worker } from 'node:worker_threads';

/**
 * Items kept before a send (a message is one item, a record as many as its fields): a turn that makes more sends
 * each full batch at once (nothing is dropped or waits longer); a record posted in one call stays in one batch,
 * which may then pass the bound by the record's length. 4096 items: ~300 requests' submits (12 items each).
 */
export const BATCH_BOUND = 4096;

type Target = Pick<MessagePort | Worker, 'postMessage'>;

export class BatchedPort<T> {
  #queue: T[] = [];
  #scheduled = false;
  readonly #target: Target;
  readonly #bound: number;
  readonly #flush = (): void => {
    this.#scheduled = false;
    this.flush();
  };

  /** `bound`: messages in one batch (tests set it small). */
  constructor (target: Target, bound = BATCH_BOUND) {
    if (!Number.isInteger(bound) || bound < 1) throw new RangeError('bound must be an integer ≥ 1');
    this.#target = target;
    this.#bound = bound;
  }

  /** Queues `m` for the end of this turn (one argument: a rest parameter would allocate an array every call). */
  post (m: T): void {
    this.#queue.push(m);
    this.#queued();
  }

  /** Queues the messages of `record` for the end of this turn, all in one batch. */
  postRecord (record: readonly T[]): void {
    for (const m of record) this.#queue.push(m);
    this.#queued();
  }

  #queued (): void {
    if (this.#queue.length >= this.#bound) {
      this.flush();
      return;
    }
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#flush);
    }
  }

  /** Sends what is queued now, as one message (an array, in the order posted). */
  flush (): void {
    if (this.#queue.length === 0) return;
    const batch = this.#queue;
    this.#queue = [];
    this.#target.postMessage(batch);
  }

  /** Messages waiting for the end of the turn. */
  get queued (): number {
    return this.#queue.length;
  }
}
