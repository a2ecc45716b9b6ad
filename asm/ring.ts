// Record ring: a bounded multi-producer single-consumer queue of fixed-size ops. Producers are the route-pool
// workers and the main thread; the consumer is the kv-events thread, the prefix index's only writer, which
// applies the ops ("record these block keys as ASSUMED on pod P at time T", "touch", "forget pod P").
//
// Layout: a header (RING_H_*; tail and head on cache lines of their own), then `capacity` (a power of two)
// cells of RING_CELL_STRIDE bytes: a u32 sequence number, then the op (RING_OP_BYTES: opcode u32, pod u32,
// key u64, arguments a and b u64, the pod's lease u32, 4 bytes reserved, zero). An op passed in or out
// (ringPush's src, ringPop's out) has the op layout.
//
// Leases: every op carries the lease of its pod's row (asm/pod-table.ts PODS_F_LEASE) under which it was
// decided. The ring only carries it; the consumer (asm/ring-apply.ts) compares it with the row's lease when it
// applies the op and drops the op if they differ, so an op about a backend that has left (its row released,
// perhaps leased again) never lands on the row's next backend, however late it arrives.
//
// Concurrency (after Vyukov's bounded queue): positions are free-running u32 counters. Cell i starts with
// sequence i. A producer reads the tail and the head, computes the free cells [tail, head + capacity), claims
// k of them by CAS on the tail, writes each op and publishes it by storing sequence pos + 1. The consumer takes
// cells in order while their sequence is pos + 1, marks each free for the next lap (pos + capacity), then
// stores the head. A producer stalled between claim and publish holds back the consumer at that cell, never
// corrupts it. Ops of one producer keep their order. The op itself (lease included: it is one more word of
// the op) is written and read with plain stores and loads: the sequence store (atomic, seq-cst) publishes it
// to the consumer's atomic load of that sequence, and the consumer's head store hands the cell back the same
// way, so no access to an op races.
//
// Waking the consumer: it waits on the tail word (Atomics.waitAsync, from the host) and says so in
// RING_H_SLEEPING before it does; a producer notifies the tail only while that word is 1. Both sides use
// sequentially consistent accesses (the producer's CAS on the tail, then its load of the word; the consumer's
// store of the word, then the wait's comparison of the tail), so either the producer sees the word set and
// notifies, or the word was set after the producer's claim and the wait finds the tail moved and returns at once.
// The word sits on the head's cache line, which producers read on every claim anyway.
//
// At the bound: a push that finds no free cell drops its op and adds 1 to RING_H_DROPPED (a bulk push keeps
// the first ops that fit and counts the rest). Nothing blocks. Ops dropped for a stale lease are counted by
// the consumer (ixApplyRing's RA_OUT_STALE), not here.

export const RING_H_CAPACITY: u32 = 0;  // u32 cells, a power of two
export const RING_H_MASK: u32 = 4;      // u32 capacity − 1
export const RING_H_DROPPED: u32 = 8;   // u64 ops dropped because the ring was full (producers, atomic add)
export const RING_H_POPPED: u32 = 16;   // u64 ops delivered to the consumer
export const RING_H_TAIL: u32 = 64;     // u32 next position to claim (producers, CAS)
export const RING_H_HEAD: u32 = 128;    // u32 next position to consume (consumer)
export const RING_H_SLEEPING: u32 = 132; // u32 1 while the consumer waits on the tail for a push (consumer); 0 otherwise
export const RING_HEADER_BYTES: u32 = 192;

export const RING_CELL_STRIDE: u32 = 48;
export const RING_CELL_SEQ: u32 = 0;    // u32
export const RING_CELL_OP: u32 = 8;     // the op, RING_OP_BYTES long

export const RING_OP_BYTES: u32 = 40;
export const RING_OP_OPCODE: u32 = 0;   // u32 RING_OPCODE_*
export const RING_OP_POD: u32 = 4;      // u32 pod id
export const RING_OP_KEY: u32 = 8;      // u64 block key
export const RING_OP_A: u32 = 16;       // u64 first argument (see the opcode)
export const RING_OP_B: u32 = 24;       // u64 second argument (see the opcode)
export const RING_OP_LEASE: u32 = 32;   // u32 the pod row's lease the op was decided under (asm/pod-table.ts)
export const RING_OP_RESERVED: u32 = 36; // u32 zero

/** Record `key` as assumed present on `pod`: a = time (f64 ms, as its bits), b = the block's position in its chain. */
export const RING_OPCODE_ASSUMED: u32 = 1;
/** Mark `key` on `pod` as used: a = time (f64 ms, as its bits). */
export const RING_OPCODE_TOUCH: u32 = 2;
/** Forget `pod` in every kind, assumed, confirmed and offloaded (it went down or away); key, a and b unused. */
export const RING_OPCODE_FORGET_POD: u32 = 3;

/** Largest capacity ringBytes accepts. */
export const RING_MAX_CAPACITY: u32 = 1 << 26;

@inline function cellPtr (base: u32, pos: u32): usize {
  return <usize>base + RING_HEADER_BYTES + <usize>(pos & load<u32>(<usize>base + RING_H_MASK)) * RING_CELL_STRIDE;
}

@inline function roundCapacity (capacity: u32): u32 {
  let n: u32 = 1;
  while (n < capacity) n <<= 1;
  return n;
}

/** Bytes the ring needs for `capacity` ops, rounded up to a power of two (0xFFFFFFFF above RING_MAX_CAPACITY). */
export function ringBytes (capacity: u32): u32 {
  if (capacity > RING_MAX_CAPACITY) return 0xFFFFFFFF;
  return RING_HEADER_BYTES + roundCapacity(capacity) * RING_CELL_STRIDE;
}

/** Lays out an empty ring at `base`. */
export function ringInit (base: u32, capacity: u32): void {
  const cap = roundCapacity(capacity);
  memory.fill(<usize>base, 0, <usize>ringBytes(cap));
  store<u32>(<usize>base + RING_H_CAPACITY, cap);
  store<u32>(<usize>base + RING_H_MASK, cap - 1);
  for (let i: u32 = 0; i < cap; i++) atomic.store<u32>(cellPtr(base, i) + RING_CELL_SEQ, i);
}

// Claims up to n consecutive cells; returns the first position in the low 32 bits and the count in the high.
@inline function claim (base: u32, n: u32): u64 {
  const cap = load<u32>(<usize>base + RING_H_CAPACITY);
  const tailPtr = <usize>base + RING_H_TAIL;
  const headPtr = <usize>base + RING_H_HEAD;
  while (true) {
    const pos = atomic.load<u32>(tailPtr);
    const head = atomic.load<u32>(headPtr);
    const used = pos - head;
    if (<i32>used < 0) continue;   // the tail moved on between the two loads: read again
    const k = min<u32>(n, cap - min<u32>(used, cap));
    if (k == 0) return 0;
    if (atomic.cmpxchg<u32>(tailPtr, pos, pos + k) == pos) return (<u64>k << 32) | pos;
  }
}

@inline function publish (cell: usize, pos: u32): void {
  atomic.store<u32>(cell + RING_CELL_SEQ, pos + 1);
}

@inline function countDropped (base: u32, n: u32): void {
  if (n > 0) atomic.add<u64>(<usize>base + RING_H_DROPPED, <u64>n);
}

/** Pushes the op at `src` (RING_OP_BYTES). Returns 1, or 0 if the ring was full (the op is dropped and counted). */
export function ringPush (base: u32, src: u32): i32 {
  const c = claim(base, 1);
  if (c == 0) {
    countDropped(base, 1);
    return 0;
  }
  const pos = <u32>c;
  const cell = cellPtr(base, pos);
  for (let w: u32 = 0; w < RING_OP_BYTES; w += 8) store<u64>(cell + RING_CELL_OP + w, load<u64>(<usize>src + w));
  publish(cell, pos);
  return 1;
}

/**
 * Pushes n ops that share opcode, pod, time and lease: one per key of `keys` (n u64), with a = time's bits and
 * b = firstPosition + i. Keeps the first ops that fit, drops and counts the rest; returns how many it pushed.
 */
export function ringPushKeys (base: u32, opcode: u32, pod: u32, keys: u32, n: u32, time: f64, firstPosition: u32, lease: u32): u32 {
  if (n == 0) return 0;
  const c = claim(base, n);
  const k = <u32>(c >> 32);
  countDropped(base, n - k);
  const pos = <u32>c;
  const a = reinterpret<u64>(time);
  for (let i: u32 = 0; i < k; i++) {
    const cell = cellPtr(base, pos + i);
    const op = cell + RING_CELL_OP;
    store<u32>(op + RING_OP_OPCODE, opcode);
    store<u32>(op + RING_OP_POD, pod);
    store<u64>(op + RING_OP_KEY, load<u64>(<usize>keys + (<usize>i << 3)));
    store<u64>(op + RING_OP_A, a);
    store<u64>(op + RING_OP_B, <u64>(firstPosition + i));
    store<u64>(op + RING_OP_LEASE, <u64>lease); // the lease and the reserved word
    publish(cell, pos + i);
  }
  return k;
}

/**
 * Consumer only: moves up to `max` published ops, in order, to `out` (RING_OP_BYTES each) and returns how many.
 * Stops early at a cell a producer has claimed but not yet published.
 */
export function ringPop (base: u32, out: u32, max: u32): u32 {
  const cap = load<u32>(<usize>base + RING_H_CAPACITY);
  const headPtr = <usize>base + RING_H_HEAD;
  let head = load<u32>(headPtr);
  let i: u32 = 0;
  while (i < max) {
    const cell = cellPtr(base, head);
    if (atomic.load<u32>(cell + RING_CELL_SEQ) != head + 1) break;
    const dst = <usize>out + <usize>i * RING_OP_BYTES;
    for (let w: u32 = 0; w < RING_OP_BYTES; w += 8) store<u64>(dst + w, load<u64>(cell + RING_CELL_OP + w));
    atomic.store<u32>(cell + RING_CELL_SEQ, head + cap);
    head++;
    i++;
  }
  if (i > 0) {
    atomic.store<u32>(headPtr, head);
    atomic.store<u64>(<usize>base + RING_H_POPPED, load<u64>(<usize>base + RING_H_POPPED) + i);
  }
  return i;
}

/** Ops claimed and not yet consumed (any thread; a snapshot). */
export function ringSize (base: u32): u32 {
  const head = atomic.load<u32>(<usize>base + RING_H_HEAD);
  const tail = atomic.load<u32>(<usize>base + RING_H_TAIL);
  return tail - head;
}
