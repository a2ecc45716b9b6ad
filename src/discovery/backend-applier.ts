// Hands discovered backend lists to the gateway one reload at a time, the latest winning: lists that arrive
// while a reload runs replace each other, so a burst of changes costs one more reload, not one each. A reload
// that fails (every pod row still in use while old pods drain) is tried again with the latest list: after retryMs,
// or as soon as the gateway says a pod row came free (retryNow).
import type { BackendConfig } from '../config/index.js';

export interface ApplierStats {
  reloads: number;
  failures: number;
}

export interface ApplierLog {
  warn (obj: object, msg: string): void;
}

export class BackendApplier {
  readonly stats: ApplierStats = { reloads: 0, failures: 0 };
  #pending: BackendConfig[] | null = null;
  #last: BackendConfig[] | null = null;
  #running: Promise<void> | null = null;
  #retry: NodeJS.Timeout | null = null;
  /** The list whose reload failed, while its retry waits. */
  #failed: BackendConfig[] | null = null;
  #closed = false;

  constructor (readonly reload: (backends: BackendConfig[]) => Promise<void>, readonly log: ApplierLog, readonly retryMs = 1000) {}

  push (backends: BackendConfig[]): void {
    if (this.#closed) return;
    this.#pending = backends;
    this.#failed = null;
    if (this.#retry !== null) {
      clearTimeout(this.#retry);
      this.#retry = null;
    }
    this.#running ??= this.#drain();
  }

  /**
   * A failed reload waiting for its retry is tried now (a pod row came free: the pods it could not place may
   * fit). Nothing happens when no retry waits; calls while that reload runs are no-ops, so a burst of freed rows
   * costs one reload.
   */
  retryNow (): void {
    if (this.#retry === null || this.#failed === null || this.#closed) return;
    this.push(this.#failed);
  }

  /** Resolves once nothing is pending or running (tests). */
  async idle (): Promise<void> {
    while (this.#running !== null) await this.#running;
  }

  close (): void {
    this.#closed = true;
    if (this.#retry !== null) clearTimeout(this.#retry);
  }

  async #drain (): Promise<void> {
    while (this.#pending !== null && !this.#closed) {
      const b = this.#pending;
      this.#pending = null;
      try {
        await this.reload(b);
        this.#last = b;
        this.stats.reloads++;
      } catch (err) {
        this.stats.failures++;
        this.log.warn({ err: (err as Error).message, backends: b.length }, 'applying the discovered backends failed; trying again');
        if (this.#pending === null && !this.#closed) {
          this.#failed = b;
          this.#retry = setTimeout(() => { this.#retry = null; if (this.#pending === null) this.push(b); }, this.retryMs);
          this.#retry.unref();
        }
      }
    }
    this.#running = null;
  }

  /** The list last applied in full. */
  get applied (): BackendConfig[] | null {
    return this.#last;
  }
}
