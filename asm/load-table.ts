// Load table: per pod, the gateway's counters and the engine's last scraped metrics.
//
// Layout: a 64-byte header (LOAD_H_*), then `capacity` rows of LOAD_STRIDE bytes (LOAD_F_*), row = pod id. The
// gateway half and the engine half of a row sit on separate 32-byte halves of one cache line's worth of row.
//
// Concurrency: every field has exactly one writing thread, and each stands alone (no row sequence: two writers
// share a row). Readers (any thread) read each field atomically (u32 fields with Atomics.load from JS,
// f64 fields with loadGetF64); a reader may see running/waiting from one
// scrape and KV usage from the next, which a load score tolerates.
//   main thread      — LOAD_F_IN_FLIGHT, LOAD_F_PENDING_PREFILL, LOAD_F_DECISIONS (loadAdd*, loadCountDecision)
//   the scraping thread (the gateway's main thread) — LOAD_F_RUNNING, LOAD_F_WAITING, LOAD_F_KV_USAGE, LOAD_F_LAST_SCRAPE (loadSetEngine)
//
// A row is leased to a backend (asm/pod-table.ts PODS_F_LEASE): when the backend leaves, loadResetRow puts the
// row back as loadInit left it, so the row's next backend starts from zero. It writes both halves, so it
// belongs to the thread that writes both, the main thread (also the scraping thread today; were scraping to
// move, that thread would reset its half). Call it once no request of the departed backend is left to release
// its counters: a late release would only stop at zero, but it would take from the next backend's count.
//
// At the bound: pod ids are in [0, capacity); any other id is refused (−1) and changes nothing. Counters that
// would go below zero stop at zero (a release without its acquire must not wrap to 4 billion), and at
// 2^31 − 1 above.

export const LOAD_H_CAPACITY: u32 = 0;        // u32 rows
export const LOAD_HEADER_BYTES: u32 = 64;

export const LOAD_STRIDE: u32 = 64;
export const LOAD_F_IN_FLIGHT: u32 = 0;       // u32 requests proxied and not finished   [main]
export const LOAD_F_PENDING_PREFILL: u32 = 4; // u32 prompt tokens not yet prefilled     [main]
export const LOAD_F_DECISIONS: u32 = 8;       // u64 routing decisions for this pod       [main]
export const LOAD_F_RUNNING: u32 = 32;        // u32 engine's running requests            [kv-events]
export const LOAD_F_WAITING: u32 = 36;        // u32 engine's waiting requests            [kv-events]
export const LOAD_F_KV_USAGE: u32 = 40;       // f64 engine's KV cache usage, 0..1        [kv-events]
export const LOAD_F_LAST_SCRAPE: u32 = 48;    // f64 time of the last scrape (ms), −Infinity never [kv-events]

/** Largest capacity loadBytes accepts. */
export const LOAD_MAX_CAPACITY: u32 = 1 << 20;

@inline function rowPtr (base: u32, pod: u32): usize {
  return <usize>base + LOAD_HEADER_BYTES + <usize>pod * LOAD_STRIDE;
}

@inline function inRange (base: u32, pod: u32): bool {
  return pod < load<u32>(<usize>base + LOAD_H_CAPACITY);
}

/** Bytes the table needs for `capacity` pods (0xFFFFFFFF above LOAD_MAX_CAPACITY). */
export function loadBytes (capacity: u32): u32 {
  if (capacity > LOAD_MAX_CAPACITY) return 0xFFFFFFFF;
  return LOAD_HEADER_BYTES + capacity * LOAD_STRIDE;
}

/** Lays out a zeroed table at `base` (no scrape yet: last scrape −Infinity). */
export function loadInit (base: u32, capacity: u32): void {
  memory.fill(<usize>base, 0, <usize>loadBytes(capacity));
  store<u32>(<usize>base + LOAD_H_CAPACITY, capacity);
  for (let i: u32 = 0; i < capacity; i++) store<f64>(rowPtr(base, i) + LOAD_F_LAST_SCRAPE, -Infinity);
}

/**
 * Main thread (the writer of both halves): puts a released row back as loadInit left it, every counter and
 * metric zero, last scrape −Infinity. Each field is stored atomically, so a reader sees each field old or
 * new. Returns 1, or −1 for a bad pod.
 */
export function loadResetRow (base: u32, pod: u32): i32 {
  if (!inRange(base, pod)) return -1;
  const p = rowPtr(base, pod);
  atomic.store<u32>(p + LOAD_F_IN_FLIGHT, 0);
  atomic.store<u32>(p + LOAD_F_PENDING_PREFILL, 0);
  atomic.store<u64>(p + LOAD_F_DECISIONS, 0);
  atomic.store<u32>(p + LOAD_F_RUNNING, 0);
  atomic.store<u32>(p + LOAD_F_WAITING, 0);
  atomic.store<u64>(p + LOAD_F_KV_USAGE, 0);
  atomic.store<u64>(p + LOAD_F_LAST_SCRAPE, reinterpret<u64>(-Infinity));
  return 1;
}

// A counter plus delta, stopping at 0 and at 2^31 − 1 (so it reads the same as u32 and i32).
@inline function addClamped (p: usize, delta: i32): i32 {
  const next = min<i64>(max<i64>(<i64>load<u32>(p) + <i64>delta, 0), 0x7FFFFFFF);
  atomic.store<u32>(p, <u32>next);
  return <i32>next;
}

/** Main thread: in-flight += delta. Returns the new value, or −1 for a bad pod. */
export function loadAddInFlight (base: u32, pod: u32, delta: i32): i32 {
  if (!inRange(base, pod)) return -1;
  return addClamped(rowPtr(base, pod) + LOAD_F_IN_FLIGHT, delta);
}

/** Main thread: pending prefill tokens += delta. Returns the new value, or −1 for a bad pod. */
export function loadAddPendingPrefill (base: u32, pod: u32, delta: i32): i32 {
  if (!inRange(base, pod)) return -1;
  return addClamped(rowPtr(base, pod) + LOAD_F_PENDING_PREFILL, delta);
}

/** Main thread: counts one routing decision for the pod. Returns 1, or −1 for a bad pod. */
export function loadCountDecision (base: u32, pod: u32): i32 {
  if (!inRange(base, pod)) return -1;
  const p = rowPtr(base, pod) + LOAD_F_DECISIONS;
  atomic.store<u64>(p, load<u64>(p) + 1);
  return 1;
}

/** The scraping thread: the engine's metrics from one scrape at `time`. Returns 1, or −1 for a bad pod. */
export function loadSetEngine (base: u32, pod: u32, running: u32, waiting: u32, kvUsage: f64, time: f64): i32 {
  if (!inRange(base, pod)) return -1;
  const p = rowPtr(base, pod);
  atomic.store<u32>(p + LOAD_F_RUNNING, running);
  atomic.store<u32>(p + LOAD_F_WAITING, waiting);
  atomic.store<u64>(p + LOAD_F_KV_USAGE, reinterpret<u64>(kvUsage));
  atomic.store<u64>(p + LOAD_F_LAST_SCRAPE, reinterpret<u64>(time));
  return 1;
}

/** Any thread: one f64 field (LOAD_F_KV_USAGE, _LAST_SCRAPE), or the decision count as f64; NaN for a bad pod or field. */
export function loadGetF64 (base: u32, pod: u32, field: u32): f64 {
  if (!inRange(base, pod)) return NaN;
  const p = rowPtr(base, pod) + field;
  if (field == LOAD_F_DECISIONS) return <f64>atomic.load<u64>(p);
  if (field != LOAD_F_KV_USAGE && field != LOAD_F_LAST_SCRAPE) return NaN;
  return reinterpret<f64>(atomic.load<u64>(p));
}
