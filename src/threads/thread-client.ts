// The parent's side of a thread (node:worker_threads) that speaks a Protocol: requests answered under an id,
// notes, and the thread's events. A thread that fails (an uncaught error, or it exits) rejects every request
// waiting on it and every later one, and later notes are dropped: nothing waits on a thread that is gone.
// No timeouts: a request is answered, or the thread's end rejects it.
import { Worker, type TransferListItem } from 'node:worker_threads';
import { threadError, type WireError } from './outcome.js';
import type { Answer, FromThread, Protocol, ToThread } from './protocol.js';

export interface ThreadClientOptions<P extends Protocol> {
  /** Names the thread in errors: `the ${name} has exited`. */
  name: string;
  onEvent?: (e: P['event']) => void;
  /** The thread failed before stop() was called (reported once). */
  onFailure?: (err: Error) => void;
  /** Rebuilds the error a request was answered with; default a ThreadError with its code. */
  toError?: (e: WireError) => Error;
}

interface Waiter {
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

export class ThreadClient<P extends Protocol> {
  readonly #worker: Worker;
  readonly #opts: ThreadClientOptions<P>;
  readonly #waiting = new Map<number, Waiter>();
  readonly #exited: Promise<void>;
  #nextId = 0;
  #failed: Error | null = null;
  #stopping: Promise<unknown> | null = null;

  constructor (url: URL, data: P['data'], opts: ThreadClientOptions<P>) {
    this.#opts = opts;
    const toError = opts.toError ?? threadError;
    this.#worker = new Worker(url, { workerData: data });
    this.#worker.on('message', (m: FromThread<P>) => {
      if ('event' in m) {
        opts.onEvent?.(m.event);
        return;
      }
      const w = this.#waiting.get(m.id);
      this.#waiting.delete(m.id);
      if (m.ok) w?.resolve(m.value);
      else w?.reject(toError(m.error));
    });
    // Without this listener an uncaught error in the thread would be thrown on the main thread.
    this.#worker.on('error', (err) => this.#fail(err));
    this.#exited = new Promise((resolve) => this.#worker.once('exit', () => {
      this.#fail(new Error(`the ${opts.name} has exited`));
      resolve();
    }));
  }

  /** Sends a request; resolves with the thread's answer, rejects with the error it answered or its end. */
  call<C extends P['call']> (c: C): Promise<Answer<P, C['type']>> {
    if (this.#failed !== null) return Promise.reject(this.#failed);
    const id = this.#nextId++;
    const answer = new Promise<Answer<P, C['type']>>((resolve, reject) => this.#waiting.set(id, { resolve: resolve as (v: unknown) => void, reject }));
    this.#worker.postMessage({ id, call: c } satisfies ToThread<P>);
    return answer;
  }

  /** Sends a note (dropped once the thread failed or is stopping); `transfer` moves those buffers to it. */
  note (n: P['note'], transfer?: readonly TransferListItem[]): void {
    if (this.#failed === null && this.#stopping === null) this.#worker.postMessage({ note: n } satisfies ToThread<P>, transfer);
  }

  /**
   * Sends the request that ends the thread (it answers, then closes its port) and waits for the thread to exit;
   * once, later calls get the same promise. If the thread had failed or fails meanwhile, it is terminated and
   * this rejects.
   */
  stop<C extends P['call']> (c: C): Promise<Answer<P, C['type']>> {
    this.#stopping ??= (async () => {
      try {
        const answer = await this.call(c);
        await this.#exited;
        return answer;
      } catch (err) {
        await this.#worker.terminate();
        throw err;
      }
    })();
    return this.#stopping as Promise<Answer<P, C['type']>>;
  }

  #fail (err: Error): void {
    if (this.#failed === null && this.#stopping === null) this.#opts.onFailure?.(err);
    this.#failed ??= err;
    for (const w of this.#waiting.values()) w.reject(err);
    this.#waiting.clear();
  }
}
