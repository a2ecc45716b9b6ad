// Hands discovered backend lists to the gateway one reload at a time, the latest winning: lists that arrive
// while a reload runs replace each other, so a burst of changes costs one more reload, not one each. A reload
// that fails is tried again with the latest list after retryMs. (Pods that find every pod row in use do not fail
// a reload: they wait for a row in the fleet, src/fleet/fleet.ts.)
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
  #closed = false;

  constructor (readonly reload: (backends: BackendConfig[]) => Promise<void>, readonly log: ApplierLog, readonly retryMs = 1000) {}

  push (backends: BackendConfig[]): void {
    if (this.#closed) return;
    this.#pending = backends;
    if (this.#retry !== null) {
      clearTimeout(this.#retry);
      this.#retry = null;
    }
    this.#running ??= this.#drain();
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
