// Pod table: the numeric fields of each pod (strings such as URLs stay in JS, keyed by the same pod id).
//
// Layout: a 64-byte header (PODS_H_*), then `capacity` rows of PODS_STRIDE bytes (PODS_F_*), row = pod id.
// podsGet's out area has the row layout (PODS_RECORD_BYTES).
//
// Concurrency: ONE writer (the main thread) calls podsSet/podsSetState/podsRelease. Any thread reads: a row has
// a sequence counter (odd while written) and podsGet copies it with retry; podsState and podsLease read their
// one field atomically. Every change bumps the row's generation and the table's, so a reader can rebuild what
// it derives from the pod list (a hash ring) only when PODS_H_GENERATION moved.
//
// Leases (docs/architecture.md#pod-rows): a row is leased to one backend at a time, not owned. PODS_F_LEASE counts
// the row's releases: podsRelease bumps it (and makes the row absent) when a backend leaves for good, so the
// next backend on the row runs under a new lease. Ops that other threads send about a pod carry the lease they
// were decided under (asm/ring.ts), and the consumer drops an op whose lease is not the row's lease now: late
// ops of a departed backend never land on its successor. The lease moves only on release, never on podsSet or
// podsSetState (a backend that goes down and comes back keeps its lease); PODS_F_GENERATION, which moves on
// every change, is for rebuilding caches and must not be used for this. Zero at init; u32, wrapping after 2^32
// releases of one row (an op would have to wait that long on the ring to be taken for current).
//
// At the bound: pod ids are in [0, capacity); any other id is refused (−1) and changes nothing (podsLease
// reads 0 for it).

export const PODS_H_CAPACITY: u32 = 0;    // u32 rows
export const PODS_H_GENERATION: u32 = 4;  // u32 bumped on every change to any row
export const PODS_HEADER_BYTES: u32 = 64;

export const PODS_STRIDE: u32 = 32;
export const PODS_RECORD_BYTES: u32 = 32;
export const PODS_F_SEQ: u32 = 0;         // u32 row sequence counter (odd while written)
export const PODS_F_STATE: u32 = 4;       // u32 POD_STATE_*
export const PODS_F_ROLE: u32 = 8;        // u32 POD_ROLE_*
export const PODS_F_BLOCK_SIZE: u32 = 12; // u32 tokens per KV block
export const PODS_F_KV_BLOCKS: u32 = 16;  // u32 KV capacity in blocks
export const PODS_F_MODEL: u32 = 20;      // u32 model id (the host's model registry index)
export const PODS_F_GENERATION: u32 = 24; // u32 bumped on every change to this row
export const PODS_F_LEASE: u32 = 28;      // u32 bumped when the row is released (a new backend's ops differ)

export const POD_STATE_ABSENT: u32 = 0;
export const POD_STATE_READY: u32 = 1;
export const POD_STATE_DRAINING: u32 = 2;
export const POD_STATE_DOWN: u32 = 3;

export const POD_ROLE_BOTH: u32 = 0;
export const POD_ROLE_PREFILL: u32 = 1;
export const POD_ROLE_DECODE: u32 = 2;

/** Largest capacity podsBytes accepts. */
export const PODS_MAX_CAPACITY: u32 = 1 << 20;

@inline function rowPtr (base: u32, pod: u32): usize {
  return <usize>base + PODS_HEADER_BYTES + <usize>pod * PODS_STRIDE;
}

/** Bytes the table needs for `capacity` pods (0xFFFFFFFF above PODS_MAX_CAPACITY). */
export function podsBytes (capacity: u32): u32 {
  if (capacity > PODS_MAX_CAPACITY) return 0xFFFFFFFF;
  return PODS_HEADER_BYTES + capacity * PODS_STRIDE;
}

/** Lays out an empty table (every pod absent) at `base`. */
export function podsInit (base: u32, capacity: u32): void {
  memory.fill(<usize>base, 0, <usize>podsBytes(capacity));
  store<u32>(<usize>base + PODS_H_CAPACITY, capacity);
}

/** Table generation (any thread). */
export function podsGeneration (base: u32): u32 {
  return atomic.load<u32>(<usize>base + PODS_H_GENERATION);
}

// Writer: runs a change inside the row's sequence and bumps both generations.
@inline function beginRow (p: usize): void {
  atomic.store<u32>(p + PODS_F_SEQ, load<u32>(p + PODS_F_SEQ) + 1);
}
@inline function endRow (base: u32, p: usize): void {
  atomic.store<u32>(p + PODS_F_GENERATION, load<u32>(p + PODS_F_GENERATION) + 1);
  atomic.store<u32>(p + PODS_F_SEQ, load<u32>(p + PODS_F_SEQ) + 1);
  const g = <usize>base + PODS_H_GENERATION;
  atomic.store<u32>(g, load<u32>(g) + 1);
}

/** Sets every field of a pod. Returns 1, or −1 for an id out of range or an unknown state or role. Writer only. */
export function podsSet (base: u32, pod: u32, state: u32, role: u32, blockSize: u32, kvBlocks: u32, model: u32): i32 {
  if (pod >= load<u32>(<usize>base + PODS_H_CAPACITY) || state > POD_STATE_DOWN || role > POD_ROLE_DECODE) return -1;
  const p = rowPtr(base, pod);
  beginRow(p);
  atomic.store<u32>(p + PODS_F_STATE, state);
  atomic.store<u32>(p + PODS_F_ROLE, role);
  atomic.store<u32>(p + PODS_F_BLOCK_SIZE, blockSize);
  atomic.store<u32>(p + PODS_F_KV_BLOCKS, kvBlocks);
  atomic.store<u32>(p + PODS_F_MODEL, model);
  endRow(base, p);
  return 1;
}

/** Sets a pod's state (POD_STATE_ABSENT removes it). Returns 1, or −1 for a bad id or state. Writer only. */
export function podsSetState (base: u32, pod: u32, state: u32): i32 {
  if (pod >= load<u32>(<usize>base + PODS_H_CAPACITY) || state > POD_STATE_DOWN) return -1;
  const p = rowPtr(base, pod);
  beginRow(p);
  atomic.store<u32>(p + PODS_F_STATE, state);
  endRow(base, p);
  return 1;
}

/**
 * Releases a row for good (its backend left): the row becomes absent with every field zero, and its lease
 * moves on, so ops stamped with the old lease are dropped from now on. Returns 1, or −1 for an id out of
 * range. Writer only. Call it before the row's entries are purged from the other tables: an op that slips in
 * before the purge is purged with the rest, and none can follow it.
 */
export function podsRelease (base: u32, pod: u32): i32 {
  if (pod >= load<u32>(<usize>base + PODS_H_CAPACITY)) return -1;
  const p = rowPtr(base, pod);
  beginRow(p);
  atomic.store<u32>(p + PODS_F_STATE, POD_STATE_ABSENT);
  atomic.store<u32>(p + PODS_F_ROLE, 0);
  atomic.store<u32>(p + PODS_F_BLOCK_SIZE, 0);
  atomic.store<u32>(p + PODS_F_KV_BLOCKS, 0);
  atomic.store<u32>(p + PODS_F_MODEL, 0);
  atomic.store<u32>(p + PODS_F_LEASE, load<u32>(p + PODS_F_LEASE) + 1);
  endRow(base, p);
  return 1;
}

/** A row's lease now (any thread), or 0 for an id out of range. */
export function podsLease (base: u32, pod: u32): u32 {
  if (pod >= load<u32>(<usize>base + PODS_H_CAPACITY)) return 0;
  return atomic.load<u32>(rowPtr(base, pod) + PODS_F_LEASE);
}

/** A pod's state (any thread), or POD_STATE_ABSENT for an id out of range. */
export function podsState (base: u32, pod: u32): u32 {
  if (pod >= load<u32>(<usize>base + PODS_H_CAPACITY)) return POD_STATE_ABSENT;
  return atomic.load<u32>(rowPtr(base, pod) + PODS_F_STATE);
}

/**
 * Copies a pod's row into `out` (PODS_RECORD_BYTES) without tearing. Returns 1 if the pod is present, 0 if
 * absent (the row is still copied), −1 for an id out of range. Any thread.
 */
export function podsGet (base: u32, pod: u32, out: u32): i32 {
  if (pod >= load<u32>(<usize>base + PODS_H_CAPACITY)) return -1;
  const p = rowPtr(base, pod);
  while (true) {
    const s0 = atomic.load<u32>(p + PODS_F_SEQ);
    if (s0 & 1) continue;
    for (let w: u32 = 0; w < PODS_STRIDE; w += 8) store<u64>(<usize>out + w, atomic.load<u64>(p + w));
    if (atomic.load<u32>(p + PODS_F_SEQ) == s0) return load<u32>(<usize>out + PODS_F_STATE) != POD_STATE_ABSENT ? 1 : 0;
  }
}
