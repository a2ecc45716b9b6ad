// Admission heap: a binary min-heap of waiting jobs keyed by (priority f64, arrival sequence u64), so jobs of
// equal priority leave in the order they were pushed (FIFO). Job ids are dense in [0, capacity); a position map
// per id makes changePriority and remove O(log n).
//
// Layout: a 64-byte header (HEAP_H_*), then `capacity` entries of HEAP_ENTRY_STRIDE bytes (HEAP_E_*: priority,
// sequence, job id) in heap order, then the position map: `capacity` i32 (−1 = the job is not queued).
//
// Concurrency: ONE writer (the main thread) calls everything; size and the counters are stored atomically so
// other threads may read them for metrics (heapSize, or the header words directly).
//
// At the bound: the capacity bounds job ids (waiting and running jobs hold one each); the limit (≤ capacity,
// HEAP_H_LIMIT, set with heapSetLimit, the capacity by default) bounds waiting jobs. A push while `limit` jobs
// wait changes nothing, returns 0 and counts a rejection (HEAP_H_REJECTED).
// A changePriority keeps the job's arrival sequence, so promotion among equals still respects arrival order.

export const HEAP_H_CAPACITY: u32 = 0;   // u32 jobs the heap holds (= job id bound)
export const HEAP_H_SIZE: u32 = 4;       // u32 jobs queued
export const HEAP_H_NEXT_SEQ: u32 = 8;   // u64 next arrival sequence
export const HEAP_H_REJECTED: u32 = 16;  // u64 pushes refused because the heap was full
export const HEAP_H_PUSHED: u32 = 24;    // u64 pushes accepted
export const HEAP_H_LIMIT: u32 = 32;     // u32 most jobs waiting at once (≤ capacity)
export const HEAP_HEADER_BYTES: u32 = 64;

export const HEAP_ENTRY_STRIDE: u32 = 24;
export const HEAP_E_PRIORITY: u32 = 0;   // f64
export const HEAP_E_SEQ: u32 = 8;        // u64
export const HEAP_E_JOB: u32 = 16;       // u32

/** Largest capacity heapBytes accepts. */
export const HEAP_MAX_CAPACITY: u32 = 1 << 26;

@inline function entryPtr (base: u32, i: u32): usize {
  return <usize>base + HEAP_HEADER_BYTES + <usize>i * HEAP_ENTRY_STRIDE;
}

@inline function posPtr (base: u32, job: u32): usize {
  const cap = load<u32>(<usize>base + HEAP_H_CAPACITY);
  return <usize>base + HEAP_HEADER_BYTES + <usize>cap * HEAP_ENTRY_STRIDE + (<usize>job << 2);
}

@inline function before (pa: f64, sa: u64, pb: f64, sb: u64): bool {
  return pa < pb || (pa == pb && sa < sb);
}

@inline function put (base: u32, i: u32, prio: f64, seq: u64, job: u32): void {
  const e = entryPtr(base, i);
  store<f64>(e + HEAP_E_PRIORITY, prio);
  store<u64>(e + HEAP_E_SEQ, seq);
  store<u32>(e + HEAP_E_JOB, job);
  store<i32>(posPtr(base, job), <i32>i);
}

@inline function setSize (base: u32, n: u32): void {
  atomic.store<u32>(<usize>base + HEAP_H_SIZE, n);
}

@inline function bump (p: usize): void {
  atomic.store<u64>(p, load<u64>(p) + 1);
}

// Moves the hole at i up until (prio, seq) fits, then places the job there.
function siftUp (base: u32, i: u32, prio: f64, seq: u64, job: u32): void {
  while (i > 0) {
    const parent = (i - 1) >> 1;
    const e = entryPtr(base, parent);
    const pp = load<f64>(e + HEAP_E_PRIORITY);
    const ps = load<u64>(e + HEAP_E_SEQ);
    if (!before(prio, seq, pp, ps)) break;
    put(base, i, pp, ps, load<u32>(e + HEAP_E_JOB));
    i = parent;
  }
  put(base, i, prio, seq, job);
}

// Moves the hole at i down until (prio, seq) fits among the first n entries, then places the job there.
function siftDown (base: u32, i: u32, n: u32, prio: f64, seq: u64, job: u32): void {
  while (true) {
    let c: u32 = 2 * i + 1;
    if (c >= n) break;
    let e = entryPtr(base, c);
    let cp = load<f64>(e + HEAP_E_PRIORITY);
    let cs = load<u64>(e + HEAP_E_SEQ);
    if (c + 1 < n) {
      const e2 = entryPtr(base, c + 1);
      const p2 = load<f64>(e2 + HEAP_E_PRIORITY);
      const s2 = load<u64>(e2 + HEAP_E_SEQ);
      if (before(p2, s2, cp, cs)) { c++; e = e2; cp = p2; cs = s2; }
    }
    if (!before(cp, cs, prio, seq)) break;
    put(base, i, cp, cs, load<u32>(e + HEAP_E_JOB));
    i = c;
  }
  put(base, i, prio, seq, job);
}

/** Bytes the heap needs for `capacity` jobs (0xFFFFFFFF, which no region fits, above HEAP_MAX_CAPACITY). */
export function heapBytes (capacity: u32): u32 {
  if (capacity > HEAP_MAX_CAPACITY) return 0xFFFFFFFF;
  return HEAP_HEADER_BYTES + capacity * (HEAP_ENTRY_STRIDE + 4);
}

/** Lays out an empty heap at `base`. */
export function heapInit (base: u32, capacity: u32): void {
  memory.fill(<usize>base, 0, <usize>heapBytes(capacity));
  store<u32>(<usize>base + HEAP_H_CAPACITY, capacity);
  atomic.store<u32>(<usize>base + HEAP_H_LIMIT, capacity);
  memory.fill(posPtr(base, 0), 0xFF, <usize>capacity << 2);
}

/**
 * Sets how many jobs may wait at once (clamped to the capacity) and returns the limit applied. Jobs already
 * queued beyond a lowered limit stay; only new pushes are refused.
 */
export function heapSetLimit (base: u32, limit: u32): u32 {
  const l = min<u32>(limit, load<u32>(<usize>base + HEAP_H_CAPACITY));
  atomic.store<u32>(<usize>base + HEAP_H_LIMIT, l);
  return l;
}

/** Jobs queued (any thread). */
export function heapSize (base: u32): u32 {
  return atomic.load<u32>(<usize>base + HEAP_H_SIZE);
}

/**
 * Queues `job` with `priority` (lower leaves first; equal priorities leave in push order). Returns 1, 0 if
 * `limit` jobs already wait (counted in HEAP_H_REJECTED), −1 if the job id is out of range, already queued, or the priority
 * is NaN.
 */
export function heapPush (base: u32, job: u32, priority: f64): i32 {
  const cap = load<u32>(<usize>base + HEAP_H_CAPACITY);
  if (job >= cap || priority != priority || load<i32>(posPtr(base, job)) >= 0) return -1;
  const n = load<u32>(<usize>base + HEAP_H_SIZE);
  if (n >= load<u32>(<usize>base + HEAP_H_LIMIT)) {
    bump(<usize>base + HEAP_H_REJECTED);
    return 0;
  }
  const seqPtr = <usize>base + HEAP_H_NEXT_SEQ;
  const seq = load<u64>(seqPtr);
  store<u64>(seqPtr, seq + 1);
  siftUp(base, n, priority, seq, job);
  setSize(base, n + 1);
  bump(<usize>base + HEAP_H_PUSHED);
  return 1;
}

/** The job that would leave next, or −1 when empty. */
export function heapPeek (base: u32): i32 {
  if (load<u32>(<usize>base + HEAP_H_SIZE) == 0) return -1;
  return <i32>load<u32>(entryPtr(base, 0) + HEAP_E_JOB);
}

/** The priority of a queued job, or NaN if it is not queued. */
export function heapPriority (base: u32, job: u32): f64 {
  if (job >= load<u32>(<usize>base + HEAP_H_CAPACITY)) return NaN;
  const i = load<i32>(posPtr(base, job));
  return i < 0 ? NaN : load<f64>(entryPtr(base, <u32>i) + HEAP_E_PRIORITY);
}

// Takes the entry at i out of the heap.
function removeAt (base: u32, i: u32): void {
  const n = load<u32>(<usize>base + HEAP_H_SIZE) - 1;
  const e = entryPtr(base, i);
  const prio = load<f64>(e + HEAP_E_PRIORITY);
  const seq = load<u64>(e + HEAP_E_SEQ);
  store<i32>(posPtr(base, load<u32>(e + HEAP_E_JOB)), -1);
  setSize(base, n);
  if (i == n) return;
  const last = entryPtr(base, n);
  const lp = load<f64>(last + HEAP_E_PRIORITY);
  const ls = load<u64>(last + HEAP_E_SEQ);
  const lj = load<u32>(last + HEAP_E_JOB);
  if (before(lp, ls, prio, seq)) siftUp(base, i, lp, ls, lj);
  else siftDown(base, i, n, lp, ls, lj);
}

/** Removes and returns the job with the lowest (priority, arrival), or −1 when empty. */
export function heapPopMin (base: u32): i32 {
  if (load<u32>(<usize>base + HEAP_H_SIZE) == 0) return -1;
  const job = load<u32>(entryPtr(base, 0) + HEAP_E_JOB);
  removeAt(base, 0);
  return <i32>job;
}

/** Gives a queued job a new priority, keeping its arrival sequence. Returns 1, 0 if not queued, −1 for NaN. */
export function heapChangePriority (base: u32, job: u32, priority: f64): i32 {
  if (priority != priority) return -1;
  if (job >= load<u32>(<usize>base + HEAP_H_CAPACITY)) return 0;
  const i = load<i32>(posPtr(base, job));
  if (i < 0) return 0;
  const e = entryPtr(base, <u32>i);
  const old = load<f64>(e + HEAP_E_PRIORITY);
  const seq = load<u64>(e + HEAP_E_SEQ);
  if (priority < old) siftUp(base, <u32>i, priority, seq, job);
  else siftDown(base, <u32>i, load<u32>(<usize>base + HEAP_H_SIZE), priority, seq, job);
  return 1;
}

/** Takes a queued job out (e.g. its client went away). Returns 1, or 0 if it was not queued. */
export function heapRemove (base: u32, job: u32): i32 {
  if (job >= load<u32>(<usize>base + HEAP_H_CAPACITY)) return 0;
  const i = load<i32>(posPtr(base, job));
  if (i < 0) return 0;
  removeAt(base, <u32>i);
  return 1;
}
