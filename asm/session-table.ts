// Session table: session hash (u64, nonzero) → host pod and the session's scheduling figures.
//
// Layout: a 64-byte header, then 2 × nextPow2(capacity) slots of SESS_STRIDE bytes (load factor ≤ 1/2), open
// addressing with linear probing from a multiplicative hash of the key. Key 0 marks an empty slot. A slot holds
// the fields SESS_F_*; a reader's copy (sessGet's out area) has the same layout, SESS_RECORD_BYTES long.
// Times are f64 milliseconds on the caller's clock (wall clock or the simulator's virtual one).
//
// Concurrency: ONE writer (the main thread) calls every function here except sessGet and sessCount, which any
// thread may call. Each slot has a sequence counter (odd while the writer changes the slot); a reader copies
// the slot with atomic loads and retries when the counter moved. Deletion shifts later members of the probe
// cluster back (no tombstones, probing never degrades); the header's move epoch is odd for the whole of a
// deletion, and a reader that misses retries if the epoch moved, so a record in transit is never reported absent.
//
// Pod rows are leased (asm/pod-table.ts PODS_F_LEASE): when a backend leaves, sessUnbindPod sweeps the whole
// table (O(slots), a rare event, on the writer) and unbinds every session whose host is that row (host −1,
// not a migration), so the row's next backend inherits no session. Counted in SESS_H_UNBOUND.
//
// At the bound: inserting a new session into a full table first expires idle sessions (in-flight 0 and idle
// for at least their TTL) over a scan of at most SESS_EXPIRE_SCAN_AT_BOUND slots; if none expired it evicts one
// by CLOCK (a reference bit set on each upsert; sessions with requests in flight are passed over for two full
// sweeps, then evicted anyway). Expiries and evictions are counted in the header.

export const SESS_H_CAPACITY: u32 = 0;      // u32 most live sessions
export const SESS_H_MASK: u32 = 4;          // u32 slots − 1
export const SESS_H_COUNT: u32 = 8;         // u32 live sessions
export const SESS_H_MOVE_EPOCH: u32 = 12;   // u32 odd while a deletion moves records
export const SESS_H_CLOCK_HAND: u32 = 16;   // u32 next slot the CLOCK looks at
export const SESS_H_EXPIRE_CURSOR: u32 = 20; // u32 next slot sessExpire looks at
export const SESS_H_EXPIRED: u32 = 24;      // u64 sessions removed because idle past their TTL
export const SESS_H_EVICTED: u32 = 32;      // u64 sessions evicted to make room at the bound
export const SESS_H_INSERTED: u32 = 40;     // u64 sessions created
export const SESS_H_UNBOUND: u32 = 48;      // u64 sessions unbound because their host's row was released
export const SESS_HEADER_BYTES: u32 = 64;

export const SESS_STRIDE: u32 = 88;
export const SESS_RECORD_BYTES: u32 = 88;
export const SESS_F_SEQ: u32 = 0;            // u32 slot sequence counter (odd while written)
export const SESS_F_FLAGS: u32 = 4;          // u32 writer-private (CLOCK reference bit)
export const SESS_F_KEY: u32 = 8;            // u64 session hash, 0 = empty
export const SESS_F_HOST: u32 = 16;          // i32 host pod, −1 none
export const SESS_F_IN_FLIGHT: u32 = 20;     // u32 requests in flight
export const SESS_F_CONTEXT_TOKENS: u32 = 24; // u32 context length in tokens
export const SESS_F_MIGRATIONS: u32 = 28;    // u32 times the session moved to another pod
export const SESS_F_ATTAINED: u32 = 32;      // f64 attained service (ms)
export const SESS_F_CRITICAL_PATH: u32 = 40; // f64 critical path (ms)
export const SESS_F_WAIT: u32 = 48;          // f64 time spent waiting for admission (ms)
export const SESS_F_LAST_ACTIVITY: u32 = 56; // f64 last upsert (ms)
export const SESS_F_LAST_MIGRATION: u32 = 64; // f64 last move (ms), −Infinity never
export const SESS_F_TTL: u32 = 72;           // f64 idle time after which the session may expire (ms)
export const SESS_F_MIGRATING_FROM: u32 = 80; // i32 source pod of a migration in flight (host is its target), −1 none
export const SESS_F_RESERVED: u32 = 84;      // u32 zero (keeps the stride a multiple of 8)

/** Slots the expiry pass scans, before CLOCK eviction, when a full table needs room for a new session. */
export const SESS_EXPIRE_SCAN_AT_BOUND: u32 = 256;
/** Largest capacity sessBytes accepts (beyond it the table would not fit a 32-bit address space). */
export const SESS_MAX_CAPACITY: u32 = 1 << 24;

const FLAG_REF: u32 = 1;

@inline function slotCount (capacity: u32): u32 {
  let n: u32 = 1;
  while (n < capacity) n <<= 1;
  return n << 1;
}

@inline function slotPtr (base: u32, i: u32): usize {
  return <usize>base + SESS_HEADER_BYTES + <usize>i * SESS_STRIDE;
}

@inline function homeSlot (key: u64, mask: u32): u32 {
  return <u32>((key * 0x9E3779B97F4A7C15) >> 32) & mask;
}

// Writer-side sequence bumps: odd before a change, even after.
@inline function beginWrite (p: usize): void {
  atomic.store<u32>(p + SESS_F_SEQ, load<u32>(p + SESS_F_SEQ) + 1);
}
@inline function endWrite (p: usize): void {
  atomic.store<u32>(p + SESS_F_SEQ, load<u32>(p + SESS_F_SEQ) + 1);
}

/** Bytes the table needs for `capacity` sessions (0xFFFFFFFF, which no region fits, above SESS_MAX_CAPACITY). */
export function sessBytes (capacity: u32): u32 {
  if (capacity > SESS_MAX_CAPACITY) return 0xFFFFFFFF;
  return SESS_HEADER_BYTES + slotCount(max<u32>(capacity, 1)) * SESS_STRIDE;
}

/** Lays out an empty table at `base`. Called once, before any other thread reads it. */
export function sessInit (base: u32, capacity: u32): void {
  const cap = max<u32>(capacity, 1);
  memory.fill(<usize>base, 0, <usize>sessBytes(cap));
  store<u32>(<usize>base + SESS_H_CAPACITY, cap);
  atomic.store<u32>(<usize>base + SESS_H_MASK, slotCount(cap) - 1);
}

/** Live sessions (any thread). */
export function sessCount (base: u32): u32 {
  return atomic.load<u32>(<usize>base + SESS_H_COUNT);
}

// Writer-side lookup: the slot holding `key` (≥ 0), or −1 − the empty slot where it would go.
function findSlot (base: u32, key: u64): i32 {
  const mask = load<u32>(<usize>base + SESS_H_MASK);
  let i = homeSlot(key, mask);
  while (true) {
    const k = load<u64>(slotPtr(base, i) + SESS_F_KEY);
    if (k == key) return <i32>i;
    if (k == 0) return -1 - <i32>i;
    i = (i + 1) & mask;
  }
}

/**
 * Copies the record of `key` into `out` (SESS_RECORD_BYTES bytes) and returns 1, or returns 0 if absent.
 * Any thread; lock-free (retries while the writer changes the slot or moves records).
 */
export function sessGet (base: u32, key: u64, out: u32): i32 {
  if (key == 0) return 0;
  const mask = atomic.load<u32>(<usize>base + SESS_H_MASK);
  const epochPtr = <usize>base + SESS_H_MOVE_EPOCH;
  while (true) {
    const e0 = atomic.load<u32>(epochPtr);
    if (e0 & 1) continue;
    let i = homeSlot(key, mask);
    let torn = false;
    for (let n: u32 = 0; n <= mask; n++) {
      const p = slotPtr(base, i);
      const s0 = atomic.load<u32>(p + SESS_F_SEQ);
      if (s0 & 1) { torn = true; break; }
      const k = atomic.load<u64>(p + SESS_F_KEY);
      if (k == 0) break;
      if (k == key) {
        for (let w: u32 = 0; w < SESS_STRIDE; w += 8) {
          store<u64>(<usize>out + w, atomic.load<u64>(p + w));
        }
        if (atomic.load<u32>(p + SESS_F_SEQ) != s0) { torn = true; break; }
        return 1;
      }
      i = (i + 1) & mask;
    }
    if (!torn && atomic.load<u32>(epochPtr) == e0) return 0;
  }
}

/**
 * Lock-free enumeration for readers on any thread (the migration thread): copies the first live record at a
 * slot ≥ `cursor` into `out` and returns the slot after it, or returns −1 when no slot ≥ cursor holds one. A
 * scan from 0 until −1 sees every session that stayed in the table throughout; one that a deletion moved
 * back over the cursor may be missed, and one inserted during the scan may or may not be seen (a hint, as
 * every table is).
 */
export function sessScan (base: u32, cursor: u32, out: u32): i32 {
  const slots = atomic.load<u32>(<usize>base + SESS_H_MASK) + 1;
  for (let i = cursor; i < slots; i++) {
    const p = slotPtr(base, i);
    while (true) {
      const s0 = atomic.load<u32>(p + SESS_F_SEQ);
      if (s0 & 1) continue;
      if (atomic.load<u64>(p + SESS_F_KEY) == 0) break;
      for (let w: u32 = 0; w < SESS_STRIDE; w += 8) store<u64>(<usize>out + w, atomic.load<u64>(p + w));
      if (atomic.load<u32>(p + SESS_F_SEQ) != s0) continue;
      if (load<u64>(<usize>out + SESS_F_KEY) == 0) break;
      return <i32>(i + 1);
    }
  }
  return -1;
}

// Removes the record at slot i, shifting later members of its cluster back so probing never crosses a hole.
function removeAt (base: u32, i: u32): void {
  const mask = load<u32>(<usize>base + SESS_H_MASK);
  const epochPtr = <usize>base + SESS_H_MOVE_EPOCH;
  atomic.store<u32>(epochPtr, load<u32>(epochPtr) + 1);
  let hole = i;
  let j = (i + 1) & mask;
  while (true) {
    const pj = slotPtr(base, j);
    const kj = load<u64>(pj + SESS_F_KEY);
    if (kj == 0) break;
    const h = homeSlot(kj, mask);
    // kj may fill the hole if the hole lies on its probe path, i.e. between its home and j (cyclically).
    if (((j - h) & mask) >= ((j - hole) & mask)) {
      const ph = slotPtr(base, hole);
      beginWrite(ph);
      for (let w: u32 = 8; w < SESS_STRIDE; w += 8) atomic.store<u64>(ph + w, load<u64>(pj + w));
      atomic.store<u32>(ph + SESS_F_FLAGS, load<u32>(pj + SESS_F_FLAGS));
      endWrite(ph);
      hole = j;
    }
    j = (j + 1) & mask;
  }
  const p = slotPtr(base, hole);
  beginWrite(p);
  atomic.store<u64>(p + SESS_F_KEY, 0);
  atomic.store<u32>(p + SESS_F_FLAGS, 0);
  endWrite(p);
  atomic.store<u32>(epochPtr, load<u32>(epochPtr) + 1);
  atomic.store<u32>(<usize>base + SESS_H_COUNT, load<u32>(<usize>base + SESS_H_COUNT) - 1);
}

// f64 fields are written with 64-bit atomic stores (wasm atomics are integer-only) so readers never see a torn word.
@inline function storeF64 (p: usize, v: f64): void {
  atomic.store<u64>(p, reinterpret<u64>(v));
}

@inline function bump (p: usize): void {
  atomic.store<u64>(p, load<u64>(p) + 1);
}

@inline function isIdleExpired (p: usize, now: f64): bool {
  return load<u32>(p + SESS_F_IN_FLIGHT) == 0 &&
    now - load<f64>(p + SESS_F_LAST_ACTIVITY) >= load<f64>(p + SESS_F_TTL);
}

/**
 * Incremental expiry (writer): looks at up to `budget` slots from where the last call stopped and removes the
 * sessions that have no request in flight and have been idle for at least their TTL. Returns how many it removed.
 */
export function sessExpire (base: u32, now: f64, budget: u32): u32 {
  const mask = load<u32>(<usize>base + SESS_H_MASK);
  const cursorPtr = <usize>base + SESS_H_EXPIRE_CURSOR;
  let cur = load<u32>(cursorPtr);
  let removed: u32 = 0;
  for (let n: u32 = 0; n < budget; n++) {
    const p = slotPtr(base, cur);
    if (load<u64>(p + SESS_F_KEY) != 0 && isIdleExpired(p, now)) {
      removeAt(base, cur);   // a later record may have shifted into `cur`: look at it again
      removed++;
      bump(<usize>base + SESS_H_EXPIRED);
    } else {
      cur = (cur + 1) & mask;
    }
  }
  store<u32>(cursorPtr, cur);
  return removed;
}

// CLOCK eviction of one session: clears reference bits as the hand passes; passes over sessions with requests
// in flight for two sweeps, then takes whatever the hand points at.
function evictOne (base: u32): void {
  const mask = load<u32>(<usize>base + SESS_H_MASK);
  const slots = mask + 1;
  const handPtr = <usize>base + SESS_H_CLOCK_HAND;
  let hand = load<u32>(handPtr);
  for (let n: u32 = 0; ; n++) {
    const p = slotPtr(base, hand);
    if (load<u64>(p + SESS_F_KEY) != 0) {
      const flags = load<u32>(p + SESS_F_FLAGS);
      const forced = n >= 2 * slots;
      if (!forced && (flags & FLAG_REF)) {
        atomic.store<u32>(p + SESS_F_FLAGS, flags & ~FLAG_REF);
      } else if (forced || load<u32>(p + SESS_F_IN_FLIGHT) == 0) {
        removeAt(base, hand);
        bump(<usize>base + SESS_H_EVICTED);
        store<u32>(handPtr, hand);
        return;
      }
    }
    hand = (hand + 1) & mask;
  }
}

/**
 * Creates the session (host −1, figures 0, last migration −Infinity) or, if present, marks it active: last
 * activity = now, TTL = ttl. Returns 1 if created, 0 if it existed, −1 for key 0. Writer only.
 */
export function sessUpsert (base: u32, key: u64, now: f64, ttl: f64): i32 {
  if (key == 0) return -1;
  let f = findSlot(base, key);
  if (f >= 0) {
    const p = slotPtr(base, <u32>f);
    beginWrite(p);
    storeF64(p + SESS_F_LAST_ACTIVITY, now);
    storeF64(p + SESS_F_TTL, ttl);
    atomic.store<u32>(p + SESS_F_FLAGS, load<u32>(p + SESS_F_FLAGS) | FLAG_REF);
    endWrite(p);
    return 0;
  }
  if (load<u32>(<usize>base + SESS_H_COUNT) >= load<u32>(<usize>base + SESS_H_CAPACITY)) {
    if (sessExpire(base, now, SESS_EXPIRE_SCAN_AT_BOUND) == 0) evictOne(base);
    f = findSlot(base, key);   // records may have moved
  }
  const p = slotPtr(base, <u32>(-1 - f));
  beginWrite(p);
  atomic.store<u32>(p + SESS_F_FLAGS, FLAG_REF);
  atomic.store<i32>(p + SESS_F_HOST, -1);
  atomic.store<u32>(p + SESS_F_IN_FLIGHT, 0);
  atomic.store<u32>(p + SESS_F_CONTEXT_TOKENS, 0);
  atomic.store<u32>(p + SESS_F_MIGRATIONS, 0);
  atomic.store<i32>(p + SESS_F_MIGRATING_FROM, -1);
  atomic.store<u32>(p + SESS_F_RESERVED, 0);
  storeF64(p + SESS_F_ATTAINED, 0);
  storeF64(p + SESS_F_CRITICAL_PATH, 0);
  storeF64(p + SESS_F_WAIT, 0);
  storeF64(p + SESS_F_LAST_ACTIVITY, now);
  storeF64(p + SESS_F_LAST_MIGRATION, -Infinity);
  storeF64(p + SESS_F_TTL, ttl);
  atomic.store<u64>(p + SESS_F_KEY, key);
  endWrite(p);
  atomic.store<u32>(<usize>base + SESS_H_COUNT, load<u32>(<usize>base + SESS_H_COUNT) + 1);
  bump(<usize>base + SESS_H_INSERTED);
  return 1;
}

/**
 * Overwrites every field from SESS_F_HOST on with those of the record at `src` (same layout as sessGet's
 * out). Returns 1, or 0 if the session is absent. Writer only: read with sessGet, change, put back.
 */
export function sessPut (base: u32, key: u64, src: u32): i32 {
  if (key == 0) return 0;
  const f = findSlot(base, key);
  if (f < 0) return 0;
  const p = slotPtr(base, <u32>f);
  beginWrite(p);
  for (let w: u32 = SESS_F_HOST; w < SESS_STRIDE; w += 8) atomic.store<u64>(p + w, load<u64>(<usize>src + w));
  endWrite(p);
  return 1;
}

/**
 * Sets one 32-bit field (SESS_F_HOST, _IN_FLIGHT, _CONTEXT_TOKENS, _MIGRATIONS, _MIGRATING_FROM). Returns 1,
 * 0 if the session is absent, −1 for another field. Writer only.
 */
export function sessSetI32 (base: u32, key: u64, field: u32, value: i32): i32 {
  if (field != SESS_F_HOST && field != SESS_F_IN_FLIGHT && field != SESS_F_CONTEXT_TOKENS && field != SESS_F_MIGRATIONS &&
    field != SESS_F_MIGRATING_FROM) return -1;
  if (key == 0) return 0;
  const f = findSlot(base, key);
  if (f < 0) return 0;
  const p = slotPtr(base, <u32>f);
  beginWrite(p);
  atomic.store<i32>(p + field, value);
  endWrite(p);
  return 1;
}

/**
 * Sets one f64 field (SESS_F_ATTAINED … SESS_F_TTL), or adds to it when `add`. Returns 1, 0 if the session is
 * absent, −1 for another field. Writer only.
 */
export function sessSetF64 (base: u32, key: u64, field: u32, value: f64, add: bool): i32 {
  if (field < SESS_F_ATTAINED || field > SESS_F_TTL || (field & 7) != 0) return -1;
  if (key == 0) return 0;
  const f = findSlot(base, key);
  if (f < 0) return 0;
  const p = slotPtr(base, <u32>f);
  beginWrite(p);
  storeF64(p + field, add ? load<f64>(p + field) + value : value);
  endWrite(p);
  return 1;
}

/**
 * Binds the session to `pod`. If it had another host (≥ 0) this is a migration: the migration count goes up and
 * last migration = now. Returns 1, or 0 if the session is absent. Writer only.
 */
export function sessSetHost (base: u32, key: u64, pod: i32, now: f64): i32 {
  if (key == 0) return 0;
  const f = findSlot(base, key);
  if (f < 0) return 0;
  const p = slotPtr(base, <u32>f);
  const prev = load<i32>(p + SESS_F_HOST);
  beginWrite(p);
  atomic.store<i32>(p + SESS_F_HOST, pod);
  if (prev >= 0 && prev != pod) {
    atomic.store<u32>(p + SESS_F_MIGRATIONS, load<u32>(p + SESS_F_MIGRATIONS) + 1);
    storeF64(p + SESS_F_LAST_MIGRATION, now);
  }
  endWrite(p);
  return 1;
}

/**
 * Adds `delta` to the in-flight count (clamped at 0) and sets last activity = now. Returns the new count, or −1
 * if the session is absent. Writer only.
 */
export function sessAddInFlight (base: u32, key: u64, delta: i32, now: f64): i32 {
  if (key == 0) return -1;
  const f = findSlot(base, key);
  if (f < 0) return -1;
  const p = slotPtr(base, <u32>f);
  const next = max<i64>(<i64>load<u32>(p + SESS_F_IN_FLIGHT) + delta, 0);
  beginWrite(p);
  atomic.store<u32>(p + SESS_F_IN_FLIGHT, <u32>next);
  storeF64(p + SESS_F_LAST_ACTIVITY, now);
  endWrite(p);
  return <i32>next;
}

/** Removes the session. Returns 1, or 0 if it was absent. Writer only. */
export function sessRemove (base: u32, key: u64): i32 {
  if (key == 0) return 0;
  const f = findSlot(base, key);
  if (f < 0) return 0;
  removeAt(base, <u32>f);
  return 1;
}

/**
 * Unbinds every session hosted on `pod` (its row is being released): host = −1, which is not a migration (the
 * count and last migration stay), every other field kept. A full sweep of the slots; no record moves, so
 * readers see each session bound or unbound, never absent. Returns how many it unbound (0 for pod < 0).
 * Writer only.
 */
export function sessUnbindPod (base: u32, pod: i32): u32 {
  if (pod < 0) return 0;
  const slots = load<u32>(<usize>base + SESS_H_MASK) + 1;
  let n: u32 = 0;
  for (let i: u32 = 0; i < slots; i++) {
    const p = slotPtr(base, i);
    if (load<u64>(p + SESS_F_KEY) == 0) continue;
    // A migration from the released row has no source left to read from.
    if (load<i32>(p + SESS_F_MIGRATING_FROM) == pod) {
      beginWrite(p);
      atomic.store<i32>(p + SESS_F_MIGRATING_FROM, -1);
      endWrite(p);
    }
    if (load<i32>(p + SESS_F_HOST) != pod) continue;
    beginWrite(p);
    atomic.store<i32>(p + SESS_F_HOST, -1);
    atomic.store<i32>(p + SESS_F_MIGRATING_FROM, -1);
    endWrite(p);
    n++;
  }
  if (n > 0) atomic.store<u64>(<usize>base + SESS_H_UNBOUND, load<u64>(<usize>base + SESS_H_UNBOUND) + n);
  return n;
}
