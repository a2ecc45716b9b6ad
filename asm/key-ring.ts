// Key ring: a data-plane thread's block keys on their way to the owner (httpThreads ≥ 2;
// src/gateway/key-ring.ts). A request's decision needs its prompt's block keys on the main thread; sent inside
// a postMessage they are an ArrayBuffer to clone on both sides (measured: several µs each way whatever the
// count, and a backing store for the GC to sweep), so the thread writes them here and its message carries only
// (position, count). One writer (the data-plane thread that claimed the area), one reader (the main thread).
//
// Layout (in one scratch area the thread claims, asm/layout.ts): a header (KR_H_*; the writer's and the
// reader's counters on cache lines of their own), then `capacity` (a power of two) u64 slots.
//
// Positions are free-running u32 counts of slots. The writer puts a request's keys at `written` (contiguous: when
// they would run past the end it skips to the start, and the skipped slots count as written), then advances
// `written`; its message names the first position and the count. The reader copies them out when the message
// arrives and stores `freed` = that position + count: messages arrive in the order they were sent (one port),
// so `freed` only grows, and a message whose keys are never read (it threw first) is freed by the next one.
// The writer sees slots free again through an atomic load of `freed`; the message handoff publishes the keys.
//
// Room: the live keys are [freed, written); new keys at p..p+n fit while p + n − freed ≤ capacity, or always
// (n ≤ capacity) when nothing is live.
// At the bound: keys that do not fit (the reader behind by a whole ring, or more keys than the ring holds) are
// not written; the writer adds 1 to KR_H_SPILLED and sends them in the message as before. Nothing is dropped.

export const KR_H_CAPACITY: u32 = 0;   // u32 slots, a power of two
export const KR_H_SPILLED: u32 = 8;    // u64 requests whose keys went by message (writer)
export const KR_H_WRITTEN: u32 = 64;   // u32 next position to write (writer)
export const KR_H_FREED: u32 = 128;    // u32 positions before this are read (reader)
export const KR_HEADER_BYTES: u32 = 192;
export const KR_SLOT_BYTES: u32 = 8;

/** Slots of a key ring laid out in `bytes`: the largest power of two that fits after the header (0 if none). */
export function keyRingCapacity (bytes: u32): u32 {
  if (bytes < KR_HEADER_BYTES + KR_SLOT_BYTES) return 0;
  const slots = (bytes - KR_HEADER_BYTES) / KR_SLOT_BYTES;
  return (<u32>1) << (31 - clz<u32>(slots));
}

/** Lays out an empty key ring at `base` (the writer, once, before its first message names it). */
export function keyRingInit (base: u32, bytes: u32): u32 {
  const capacity = keyRingCapacity(bytes);
  store<u32>(base + KR_H_CAPACITY, capacity);
  atomic.store<u64>(base + KR_H_SPILLED, 0);
  atomic.store<u32>(base + KR_H_WRITTEN, 0);
  atomic.store<u32>(base + KR_H_FREED, 0);
  return capacity;
}
