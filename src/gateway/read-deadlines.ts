// Deadlines of client reads in progress (request bodies), checked on one timer rather than one per request: most
// bodies come in the packet of their headers and are done before any check runs. A deadline fires up to a tick
// late (a quarter of the shortest timeout registered, 10 ms to 1 s). Bounded by the connections reading a body.
import { performance } from 'node:perf_hooks';

export interface ReadDeadline {
  at: number;
  fire: () => void;
}

export class ReadDeadlines {
  readonly #pending = new Set<ReadDeadline>();
  #timer: NodeJS.Timeout | null = null;
  #tickMs = Infinity;

  constructor (readonly now: () => number = () => performance.now()) {}

  get size (): number {
    return this.#pending.size;
  }

  /** Calls `fire` once if `clear` is not called within `timeoutMs`. */
  add (timeoutMs: number, fire: () => void): ReadDeadline {
    const d: ReadDeadline = { at: this.now() + timeoutMs, fire };
    this.#pending.add(d);
    const tick = Math.max(10, Math.min(1000, Math.floor(timeoutMs / 4)));
    if (this.#timer === null || tick < this.#tickMs) {
      if (this.#timer !== null) clearInterval(this.#timer);
      this.#tickMs = tick;
      this.#timer = setInterval(() => this.#check(), tick).unref();
    }
    return d;
  }

  /** The timer stops at its next tick with nothing pending, not here: one request at a time would restart it each time. */
  clear (d: ReadDeadline): void {
    this.#pending.delete(d);
  }

  #check (): void {
    const now = this.now();
    for (const d of this.#pending) {
      if (now < d.at) continue;
      this.#pending.delete(d);
      d.fire();
    }
    if (this.#pending.size === 0) this.#stop();
  }

  #stop (): void {
    if (this.#timer !== null) clearInterval(this.#timer);
    this.#timer = null;
    this.#tickMs = Infinity;
  }
}
