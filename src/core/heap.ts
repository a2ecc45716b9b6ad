// Typed view of the admission heap (asm/heap.ts). The heap has one writer, the main thread: every method but
// size and stats belongs to it; size and stats are safe on any thread.
import type { Region } from './region.js';

export interface HeapStats {
  capacity: number;
  limit: number;
  size: number;
  pushed: number;
  rejected: number;
}

export class AdmissionHeap {
  readonly #r: Region;
  readonly #base: number;
  readonly #capacity: number;
  readonly #sizeIx: number;
  readonly #limitIx: number;
  readonly #setLimit: (base: number, limit: number) => number;
  readonly #pushedIx: number;
  readonly #rejectedIx: number;
  readonly #push: (base: number, job: number, p: number) => number;
  readonly #pop: (base: number) => number;
  readonly #peek: (base: number) => number;
  readonly #priority: (base: number, job: number) => number;
  readonly #change: (base: number, job: number, p: number) => number;
  readonly #remove: (base: number, job: number) => number;

  constructor (region: Region) {
    this.#r = region;
    this.#base = region.base('TABLE_HEAP');
    this.#capacity = region.u32[(this.#base + region.const('HEAP_H_CAPACITY')) >>> 2];
    this.#sizeIx = (this.#base + region.const('HEAP_H_SIZE')) >>> 2;
    this.#limitIx = (this.#base + region.const('HEAP_H_LIMIT')) >>> 2;
    this.#setLimit = region.fn('heapSetLimit');
    this.#pushedIx = (this.#base + region.const('HEAP_H_PUSHED')) >>> 3;
    this.#rejectedIx = (this.#base + region.const('HEAP_H_REJECTED')) >>> 3;
    this.#push = region.fn('heapPush');
    this.#pop = region.fn('heapPopMin');
    this.#peek = region.fn('heapPeek');
    this.#priority = region.fn('heapPriority');
    this.#change = region.fn('heapChangePriority');
    this.#remove = region.fn('heapRemove');
  }

  /** Job ids are integers in [0, capacity): one per job waiting or running. */
  get capacity (): number {
    return this.#capacity;
  }

  /** Most jobs waiting at once (any thread reads; the writer sets, clamped to the capacity). */
  get limit (): number {
    return Atomics.load(this.#r.u32, this.#limitIx);
  }

  set limit (n: number) {
    if (!Number.isInteger(n) || n < 0) throw new RangeError(`heap limit must be a non-negative integer, got ${n}`);
    this.#setLimit(this.#base, Math.min(n, this.#capacity));
  }

  /**
   * Queues `job` (lower priority leaves first, equal ones in push order). False if `limit` jobs already wait:
   * the push is refused and counted. Throws for a job id out of range, a job already queued, or a NaN priority.
   */
  push (job: number, priority: number): boolean {
    const r = this.#push(this.#base, job, priority);
    if (r < 0) {
      throw new RangeError(`cannot queue job ${job} with priority ${priority}: id must be an integer in [0, ${this.#capacity}), not queued, priority not NaN`);
    }
    return r === 1;
  }

  /** Removes and returns the next job, or −1 when empty. */
  popMin (): number {
    return this.#pop(this.#base);
  }

  /** The next job without removing it, or −1 when empty. */
  peek (): number {
    return this.#peek(this.#base);
  }

  /** A queued job's priority, or undefined if it is not queued. */
  priority (job: number): number | undefined {
    const p = this.#priority(this.#base, job);
    return Number.isNaN(p) ? undefined : p;
  }

  /** Gives a queued job a new priority (its place among equals stays by arrival). False if it is not queued. */
  changePriority (job: number, priority: number): boolean {
    const r = this.#change(this.#base, job, priority);
    if (r < 0) throw new RangeError('priority must not be NaN');
    return r === 1;
  }

  /** Takes a queued job out. False if it was not queued. */
  remove (job: number): boolean {
    return this.#remove(this.#base, job) === 1;
  }

  /** Any thread. */
  get size (): number {
    return Atomics.load(this.#r.u32, this.#sizeIx);
  }

  /** Any thread. */
  stats (): HeapStats {
    return {
      capacity: this.#capacity,
      limit: this.limit,
      size: this.size,
      pushed: Number(Atomics.load(this.#r.u64, this.#pushedIx)),
      rejected: Number(Atomics.load(this.#r.u64, this.#rejectedIx))
    };
  }
}
