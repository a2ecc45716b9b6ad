// The admission queue (docs/architecture.md#admit): requests wait here, ordered by their
// session's priority, until the routing host releases them against real capacity. Pure: no clock (times are
// passed in), no I/O, one thread (the host's).
//
// Order. A job's key is (class, level) for fcfs / plas / atlas and (class, virtual counter) for vtc; the WASM
// heap (heap.ts) keeps equal keys first-come-first-served. The class comes from the client (x-ear-priority or
// its API key) and ranks above everything else. Levels are Autellix's discretised queues: level 0 holds
// priorities below `quantumMs`, level i ≥ 1 those in [quantum·2^(i−1), quantum·2^i), the last level the rest.
// What the priority is (the session's attained service for PLAS, its critical path for ATLAS) is the host's
// business: the queue is handed a number.
//
// Two places to wait. A job is first in the heap, not yet routed. The host pops the best one when some pod has
// room and routes it; if the pod it was given has no room (affinity to a busy host), the job is parked on that
// pod, in key order, and goes there as soon as the pod has room. Autellix's balancer keeps one queue per
// engine for the same reason: a session's turns belong where its KV is.
//
// Anti-starvation (Autellix): a job whose (session wait + its wait) / (session service) reaches β moves to
// level 0 of its class. Checked on the host's ticker over every waiting job (the queue is bounded).
//
// Bounds: at most `maxQueued` jobs wait (heap and parked together), never more than the heap's capacity; a job
// over the bound is refused (the gateway answers 429 with Retry-After). Jobs waiting longer than
// `queueTimeoutMs` are taken out by timedOut() (the gateway answers a timeout error).
import type { AdmissionHeap } from './heap.js';

export const SCHEDULERS = ['off', 'fcfs', 'plas', 'atlas', 'vtc'] as const;
export type SchedulerKind = typeof SCHEDULERS[number];

/** Client priority classes, best first; a request names one with x-ear-priority or gets one from its API key. */
export const PRIORITY_CLASSES = ['high', 'normal', 'low'] as const;
export type PriorityClass = typeof PRIORITY_CLASSES[number];
export const DEFAULT_CLASS = 1;

export interface AdmissionOptions {
  kind: SchedulerKind;
  /** Discretised priority levels (Autellix's K). */
  levels: number;
  /** Upper bound of level 0's priorities (ms of service); each next level doubles it. */
  quantumMs: number;
  /** Anti-starvation threshold on (session wait + job wait) / session service. */
  beta: number;
  /** Most jobs waiting at once. */
  maxQueued: number;
  /** Longest a job may wait (ms). */
  queueTimeoutMs: number;
}

export const ADMISSION_DEFAULTS: Readonly<Omit<AdmissionOptions, 'kind'>> = Object.freeze({
  levels: 8,
  quantumMs: 2000,
  beta: 2,
  maxQueued: 4096,
  // As long as the gateway waits for an engine's first byte (upstreamHeadersTimeoutMs): a request held here
  // instead of in the engine's own queue must not fail sooner than it would have there.
  queueTimeoutMs: 600_000
});

/** Keys of different classes never mix: a class spans more than any level or virtual counter reaches. */
const CLASS_SPAN = 2 ** 48;

export class Job<T> {
  /** The host's: the pod it was routed to while parked, and that routing's placement. */
  parkedOn = -1;
  placement: unknown = null;
  promoted = false;
  /** Sent back from a park to be routed again once (its pod's KV went to retained prefixes): never twice. */
  rerouted = false;
  constructor (
    readonly id: number,
    /** Arrival order, also the heap's tie-break order (both count pushes). */
    readonly seq: number,
    readonly payload: T,
    readonly classRank: number,
    /** The priority the key was made from (ms of service, or a virtual counter). */
    public value: number,
    public level: number,
    public key: number,
    readonly enqueuedAt: number
  ) {}
}

export class AdmissionQueue<T> {
  readonly opts: Readonly<AdmissionOptions>;
  readonly #heap: AdmissionHeap;
  readonly #jobs: Array<Job<T> | undefined>;
  readonly #free: number[] = [];
  /** Waiting jobs in arrival order (heap and parked), for timeouts and promotion. */
  readonly #waiting = new Map<number, Job<T>>();
  /** Parked jobs per pod row, in key then arrival order. */
  readonly #parked = new Map<number, Array<Job<T>>>();
  #parkedCount = 0;
  #seq = 0;
  #promotions = 0;
  #rejected = 0;
  #timedOut = 0;

  constructor (heap: AdmissionHeap, opts: AdmissionOptions) {
    if (!(opts.levels >= 1 && Number.isInteger(opts.levels))) throw new RangeError(`levels must be a positive integer, got ${opts.levels}`);
    if (!(opts.quantumMs > 0)) throw new RangeError(`quantumMs must be positive, got ${opts.quantumMs}`);
    if (!(opts.beta > 0)) throw new RangeError(`beta must be positive, got ${opts.beta}`);
    this.opts = Object.freeze({ ...opts, maxQueued: Math.min(opts.maxQueued, heap.capacity) });
    this.#heap = heap;
    heap.limit = this.opts.maxQueued;
    this.#jobs = new Array(this.opts.maxQueued);
    for (let i = this.opts.maxQueued - 1; i >= 0; i--) this.#free.push(i);
  }

  /** The level of a priority value. */
  levelOf (value: number): number {
    if (!(value >= this.opts.quantumMs)) return 0;
    return Math.min(this.opts.levels - 1, 1 + Math.floor(Math.log2(value / this.opts.quantumMs)));
  }

  #key (classRank: number, level: number, value: number): number {
    return classRank * CLASS_SPAN + (this.opts.kind === 'vtc' ? Math.min(value, CLASS_SPAN - 1) : level);
  }

  /** Jobs waiting (heap and parked). */
  get size (): number {
    return this.#waiting.size;
  }

  get parkedCount (): number {
    return this.#parkedCount;
  }

  /** Queues a job; null when `maxQueued` jobs already wait (counted). */
  push (payload: T, classRank: number, value: number, now: number): Job<T> | null {
    const id = this.#free.pop();
    if (id === undefined) {
      this.#rejected++;
      return null;
    }
    const level = this.levelOf(value);
    const job = new Job(id, this.#seq++, payload, classRank, value, level, this.#key(classRank, level, value), now);
    this.#heap.push(id, job.key);
    this.#jobs[id] = job;
    this.#waiting.set(id, job);
    return job;
  }

  /** The heap's best job (not parked ones), or null. */
  peek (): Job<T> | null {
    const id = this.#heap.peek();
    return id < 0 ? null : this.#jobs[id]!;
  }

  /** Takes the heap's best job out of the heap; it still waits until released, parked or removed. */
  pop (): Job<T> | null {
    const id = this.#heap.popMin();
    return id < 0 ? null : this.#jobs[id]!;
  }

  /** Parks a popped job on `pod` (routed there, no room yet). */
  park (job: Job<T>, pod: number, placement: unknown): void {
    job.parkedOn = pod;
    job.placement = placement;
    let list = this.#parked.get(pod);
    if (list === undefined) this.#parked.set(pod, (list = []));
    insertSorted(list, job);
    this.#parkedCount++;
  }

  /** The best job parked on `pod`, or null. */
  parkedHead (pod: number): Job<T> | null {
    return this.#parked.get(pod)?.[0] ?? null;
  }

  /** Pods with parked jobs. */
  parkedPods (): IterableIterator<number> {
    return this.#parked.keys();
  }

  /** Jobs parked on `pod` go back to the heap to be routed again (the pod left). Returns how many. */
  unparkAll (pod: number): number {
    const list = this.#parked.get(pod);
    if (list === undefined) return 0;
    this.#parked.delete(pod);
    for (const job of list) {
      job.parkedOn = -1;
      job.placement = null;
      this.#parkedCount--;
      this.#heap.push(job.id, job.key);
    }
    return list.length;
  }

  /** A parked job routed again: parked on `pod` with its new placement. */
  repark (job: Job<T>, pod: number, placement: unknown): void {
    const list = this.#parked.get(job.parkedOn);
    if (list === undefined) return;
    list.splice(list.indexOf(job), 1);
    if (list.length === 0) this.#parked.delete(job.parkedOn);
    this.#parkedCount--;
    this.park(job, pod, placement);
  }

  /** The job leaves the queue (released, timed out, client gone). Its id is free again. False if it had left. */
  remove (job: Job<T>): boolean {
    if (this.#jobs[job.id] !== job) return false;
    if (job.parkedOn >= 0) {
      const list = this.#parked.get(job.parkedOn)!;
      list.splice(list.indexOf(job), 1);
      if (list.length === 0) this.#parked.delete(job.parkedOn);
      this.#parkedCount--;
      job.parkedOn = -1;
    } else {
      this.#heap.remove(job.id); // false when popped and being released: nothing to do
    }
    this.#jobs[job.id] = undefined;
    this.#waiting.delete(job.id);
    this.#free.push(job.id);
    return true;
  }

  /** Gives a waiting job a new priority value (vtc counters move); its arrival order among equals stays. */
  reprioritize (job: Job<T>, value: number): void {
    if (job.promoted || this.#jobs[job.id] !== job) return;
    job.value = value;
    job.level = this.levelOf(value);
    this.#rekey(job, this.#key(job.classRank, job.level, value));
  }

  #rekey (job: Job<T>, key: number): void {
    if (key === job.key) return;
    job.key = key;
    if (job.parkedOn >= 0) {
      const list = this.#parked.get(job.parkedOn)!;
      list.splice(list.indexOf(job), 1);
      insertSorted(list, job);
    } else {
      this.#heap.changePriority(job.id, key);
    }
  }

  /**
   * Anti-starvation: every waiting job not yet at level 0 whose `ratio(job, now)` reaches β moves to level 0 of
   * its class (the best key it may have). Returns how many moved.
   */
  promoteStarved (now: number, ratio: (job: Job<T>, now: number) => number): number {
    let n = 0;
    for (const job of this.#waiting.values()) {
      if (job.promoted || job.key === job.classRank * CLASS_SPAN) continue;
      if (ratio(job, now) < this.opts.beta) continue;
      job.promoted = true;
      job.level = 0;
      this.#rekey(job, job.classRank * CLASS_SPAN);
      n++;
    }
    this.#promotions += n;
    return n;
  }

  /** Removes and returns the jobs that have waited `queueTimeoutMs` or longer (oldest first). */
  timedOut (now: number): Array<Job<T>> {
    const out: Array<Job<T>> = [];
    for (const job of this.#waiting.values()) {
      if (now - job.enqueuedAt < this.opts.queueTimeoutMs) break; // arrival order: the rest are younger
      out.push(job);
    }
    for (const job of out) this.remove(job);
    this.#timedOut += out.length;
    return out;
  }

  /** Every waiting job, oldest first (shutdown answers them all). */
  all (): Array<Job<T>> {
    return [...this.#waiting.values()];
  }

  /** The oldest waiting job's wait (ms), 0 when none wait. */
  oldestWait (now: number): number {
    for (const job of this.#waiting.values()) return now - job.enqueuedAt;
    return 0;
  }

  /** Waiting jobs per level (heap and parked). */
  depthByLevel (): number[] {
    const out = new Array<number>(this.opts.levels).fill(0);
    for (const job of this.#waiting.values()) out[job.level]++;
    return out;
  }

  stats (): { waiting: number; parked: number; promotions: number; rejected: number; timedOut: number; limit: number } {
    return { waiting: this.#waiting.size, parked: this.#parkedCount, promotions: this.#promotions, rejected: this.#rejected, timedOut: this.#timedOut, limit: this.opts.maxQueued };
  }
}

function insertSorted<T> (list: Array<Job<T>>, job: Job<T>): void {
  let i = list.length;
  while (i > 0 && (list[i - 1].key > job.key || (list[i - 1].key === job.key && list[i - 1].seq > job.seq))) i--;
  list.splice(i, 0, job);
}

/** Whether job a leaves before job b (lower key, then earlier arrival). */
export function before<T> (a: Job<T>, b: Job<T>): boolean {
  return a.key < b.key || (a.key === b.key && a.seq < b.seq);
}
