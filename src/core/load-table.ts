// Typed view of the load table (asm/load-table.ts). Each field has one writing thread:
//   gateway counters — addInFlight, addPendingPrefill, countDecision: the main thread
//   engine metrics   — setEngine: the thread that scrapes the engines' /metrics (the gateway's main thread,
//                      whose scrapes are async I/O; an earlier design had the kv-events thread do it)
//   a released row   — resetRow: the main thread, writer of both halves
// Every read (get, inFlight, pendingPrefill) is safe on any thread.
import type { Region } from './region.js';

export interface PodLoad {
  inFlight: number;
  pendingPrefill: number;
  decisions: number;
  running: number;
  waiting: number;
  /** 0..1 */
  kvUsage: number;
  /** ms; −Infinity before the first scrape. */
  lastScrape: number;
}

export interface EngineMetrics {
  running: number;
  waiting: number;
  kvUsage: number;
  time: number;
}

export class LoadTable {
  readonly #r: Region;
  readonly #base: number;
  readonly #rows: number;
  readonly #capacity: number;
  readonly #stride: number;
  readonly #f: Record<'inFlight' | 'pendingPrefill' | 'decisions' | 'running' | 'waiting' | 'kvUsage' | 'lastScrape', number>;
  readonly #addInFlight: (base: number, pod: number, d: number) => number;
  readonly #addPending: (base: number, pod: number, d: number) => number;
  readonly #countDecision: (base: number, pod: number) => number;
  readonly #setEngine: (base: number, pod: number, running: number, waiting: number, kv: number, time: number) => number;
  readonly #getF64: (base: number, pod: number, field: number) => number;
  readonly #resetRow: (base: number, pod: number) => number;

  constructor (region: Region) {
    this.#r = region;
    this.#base = region.base('TABLE_LOAD');
    this.#capacity = region.u32[(this.#base + region.const('LOAD_H_CAPACITY')) >>> 2];
    this.#stride = region.const('LOAD_STRIDE');
    this.#rows = this.#base + region.const('LOAD_HEADER_BYTES');
    this.#f = {
      inFlight: region.const('LOAD_F_IN_FLIGHT'),
      pendingPrefill: region.const('LOAD_F_PENDING_PREFILL'),
      decisions: region.const('LOAD_F_DECISIONS'),
      running: region.const('LOAD_F_RUNNING'),
      waiting: region.const('LOAD_F_WAITING'),
      kvUsage: region.const('LOAD_F_KV_USAGE'),
      lastScrape: region.const('LOAD_F_LAST_SCRAPE')
    };
    this.#addInFlight = region.fn('loadAddInFlight');
    this.#addPending = region.fn('loadAddPendingPrefill');
    this.#countDecision = region.fn('loadCountDecision');
    this.#setEngine = region.fn('loadSetEngine');
    this.#getF64 = region.fn('loadGetF64');
    this.#resetRow = region.fn('loadResetRow');
  }

  get capacity (): number {
    return this.#capacity;
  }

  #row (pod: number): number {
    if (!Number.isInteger(pod) || pod < 0 || pod >= this.#capacity) {
      throw new RangeError(`pod id ${pod} is outside [0, ${this.#capacity})`);
    }
    return this.#rows + pod * this.#stride;
  }

  #u32 (pod: number, field: number): number {
    return Atomics.load(this.#r.u32, (this.#row(pod) + field) >>> 2);
  }

  /** Main thread: in-flight += delta (stops at 0); returns the new value. */
  addInFlight (pod: number, delta: number): number {
    this.#row(pod);
    return this.#addInFlight(this.#base, pod, delta);
  }

  /** Main thread: pending prefill tokens += delta (stops at 0); returns the new value. */
  addPendingPrefill (pod: number, delta: number): number {
    this.#row(pod);
    return this.#addPending(this.#base, pod, delta);
  }

  /** Main thread: counts one routing decision for the pod. */
  countDecision (pod: number): void {
    this.#row(pod);
    this.#countDecision(this.#base, pod);
  }

  /** The scraping thread: the engine's metrics from one scrape. */
  setEngine (pod: number, m: EngineMetrics): void {
    this.#row(pod);
    if (!(m.kvUsage >= 0 && m.kvUsage <= 1)) throw new RangeError(`kvUsage must be in [0, 1], got ${m.kvUsage}`);
    this.#setEngine(this.#base, pod, m.running, m.waiting, m.kvUsage, m.time);
  }

  /**
   * Main thread: a released row's step (src/core/pod-rows.ts): every counter and engine metric back to zero,
   * last scrape −Infinity, so the row's next backend starts clean. Call it once the departed backend has no
   * request left in flight: a late release would take from its successor's count.
   */
  resetRow (pod: number): void {
    this.#row(pod);
    this.#resetRow(this.#base, pod);
  }

  /** Any thread. */
  inFlight (pod: number): number {
    return this.#u32(pod, this.#f.inFlight);
  }

  /** Any thread. */
  pendingPrefill (pod: number): number {
    return this.#u32(pod, this.#f.pendingPrefill);
  }

  /** Any thread: the engine's running requests at the last scrape. */
  running (pod: number): number {
    return this.#u32(pod, this.#f.running);
  }

  /** Any thread: the engine's waiting requests at the last scrape. */
  waiting (pod: number): number {
    return this.#u32(pod, this.#f.waiting);
  }

  /** Any thread: the engine's KV usage (0..1) at the last scrape. */
  kvUsage (pod: number): number {
    this.#row(pod);
    return this.#getF64(this.#base, pod, this.#f.kvUsage);
  }

  /** Any thread: routing decisions counted for the pod. */
  decisions (pod: number): number {
    this.#row(pod);
    return this.#getF64(this.#base, pod, this.#f.decisions);
  }

  /** Any thread: every field (each read atomically on its own). */
  get (pod: number): PodLoad {
    const f = this.#f;
    return {
      inFlight: this.#u32(pod, f.inFlight),
      pendingPrefill: this.#u32(pod, f.pendingPrefill),
      decisions: this.#getF64(this.#base, pod, f.decisions),
      running: this.#u32(pod, f.running),
      waiting: this.#u32(pod, f.waiting),
      kvUsage: this.#getF64(this.#base, pod, f.kvUsage),
      lastScrape: this.#getF64(this.#base, pod, f.lastScrape)
    };
  }
}
