// The prefix index: 64-bit block key -> which pods hold the block, in three kinds.
//
// Layout (at the table base, which createRegion aligns to 64 bytes):
//   header, IX_HEADER_BYTES: line 0 holds what readers read (geometry, pod rows, move epoch, assumed TTL);
//   line 1 the writer's counters and cursors (size, CLOCK hand, expiry cursor, inserts/removes/evictions/
//   expirations as u64).
//   slots[IX_H_SLOTS], IX_ENTRY_BYTES each (two cache lines), a power of two with load <= 0.75:
//     +0  key u64 (0 = empty slot)      +8  seq u32 (odd while the writer changes the slot)
//     +12 flags u32 (CLOCK reference)   +16 unused u32                +20 assumed-at u32 ms   +24 pod group u32
//     +32 presence bits: IX_KINDS kinds x IX_GROUP_PODS pods (4 x u64 per kind), kind k at +32 + 32k.
//   then one loss epoch per pod row (u32, IX_H_GROUPS x IX_GROUP_PODS of them, at IX_H_LOSS_AT), bumped by the
//   writer after it clears any presence bit of the pod;
//   then one voided-at time per pod row (u32, as many, at IX_H_VOID_AT): the pod's assumed presence recorded at or
//   before it does not count (ixVoidAssumed, an engine's AllBlocksCleared; 0 = never);
//   then the used-span bits (IX_USED_SPAN_SLOTS, at IX_H_USED_AT);
//   then one loss ring per pod row (IX_H_RING u64 entries each, at IX_H_RING_AT): the (group) key of each block
//   the pod lost, the loss that moved its epoch from e at entry e mod IX_H_RING, so a reader can tell WHICH blocks
//   a pod lost since an epoch it read, not only that it lost some (ixHeldSince).
//   An empty slot is all zero (key, presence, times), so probing stops at the first key 0.
//
// Pod groups: the pod rows (IX_H_PODS, set at init, up to IX_MAX_PODS) fall into groups of IX_GROUP_PODS, and
// an entry holds the presence of one block for one group: block key k of group g is stored under
// groupKey(k, g) (k itself for group 0), its group in the entry. An entry stays 128 bytes whatever the row
// count, and a block costs one entry per group that holds it, not a presence word for every row of the fleet:
// 4,096 rows as 4,096-bit presence sets would make an entry 1.6 KB. Readers probe each group still in play
// (a walk drops a group once none of its pods matches), so a fleet of up to 256 rows works exactly as before.
//
// Concurrency: ONE writer thread (the kv-events thread) calls the mutating kernels; any thread may call
// ixLookup / ixLongestPrefix at any time, lock-free.
//   - Every slot write that readers can see (key, presence words) is an atomic store between the slot's seq
//     going odd and going even again. A reader loads seq (retries while odd), checks the key, loads the
//     presence words, reloads seq and retries the slot if it changed: no torn read.
//   - Deletion is backward-shift (Knuth's algorithm R for linear probing): later entries of the cluster move
//     back into the hole, so there are never tombstones and probe lengths depend only on the live keys, not
//     on history. A move can carry a key past a reader that is still probing (the reader sees the slot before
//     and after the move at two places it already passed / not yet reached), so the writer makes the table's
//     move epoch odd for the duration of a delete that moves anything; a reader that misses re-probes unless
//     the epoch was even and unchanged across its probe. A hit needs no epoch check: a moved entry is copied
//     before its old slot is overwritten, so a key is always somewhere.
//   - Writer-private fields (flags, times, counters, cursors) use plain stores; size uses an atomic store
//     since readers may report it. Counters are read by the host for metrics only.
//
// Time is u32 milliseconds, passed in by the caller (no clock here): ages are computed as (now - t) in
// wrapping u32 arithmetic, correct while an age is below 2^31 ms (24.8 days). The only age the kernels use is
// that of assumed presence, which the expiry sweep (called regularly, TTL far below 24 days) clears long
// before it could wrap. CLOCK uses the reference bit, not a time (+16 held a last-access time that nothing
// read; inserts wrote it on every turn's every key). u32 times keep the header of an entry in 32 bytes, so an entry fits two cache lines.
//
// Bounds:
//   - capacity (keys, that is (block, pod group) pairs): an insert of a new key into a full index first evicts one entry by CLOCK (a reference
//     bit set on every insert/touch, cleared by the hand as it passes; the first unreferenced entry is the
//     victim), counted in IX_H_EVICTIONS; size never exceeds capacity.
//   - assumed presence expires: one assumed-at time per entry (the last ASSUMED insert on that block by any
//     pod of its group: 256 per-pod times would triple the entry); ixExpireAssumed clears every pod's ASSUMED bit once
//     that time is ttl old, scanning `budget` slots per call from a cursor kept in the header. A sweep of a large
//     table takes many TTLs, so the TTL is also applied where presence is read: a walk or lookup given a time skips
//     assumed bits whose entry's time is ttl old (the time is written inside the seq window, with the bits), and an
//     ASSUMED insert first clears the expired bits of the entry it refreshes (its time is shared by the pods).
//   - a key left with no pod in any kind is deleted (remove, clearPod, expiry).
//   - load <= 0.75 (size <= capacity), so a probe always meets an empty slot; probes are bounded by slots.
//   - clearPod sweeps the whole table (a pod leaving, AllBlocksCleared): O(slots), on the writer thread. Pod
//     rows whose backends left are purged with IX_MASK_ALL once their leases have moved (asm/pod-table.ts), so
//     no record op of an old lease lands after the purge (asm/ring-apply.ts); rows released together are
//     purged by ixClearPods in one sweep for all of them (IndexFeeder.purgePods).
//   Counters are per key: size == inserts - removes - evictions - expirations.

import { POD_ROWS_MAX } from './layout';

/**
 * Loss rings: entries over all pod rows (16 MiB), each row's ring a power of two in [IX_RING_MIN, IX_RING_MAX]
 * (ixLossRing): 4,096 a row for up to 512 rows, 128 at 16,384. Shared memory is committed by the page as the
 * writer first writes it, so only rows that lose blocks cost RSS.
 */
export const IX_RING_ENTRIES: u32 = 1 << 21;
export const IX_RING_MAX: u32 = 4096;
export const IX_RING_MIN: u32 = 64;

/** Pods per group: presence bits per kind in one entry. */
export const IX_GROUP_PODS: u32 = 256;
/** Most pod rows the index takes (asm/layout.ts; 64 groups: a walk keeps its groups in play as one u64). */
export const IX_MAX_PODS: u32 = POD_ROWS_MAX;
export const IX_KINDS: u32 = 3;
/** Engine KV events, GPU (or no medium given). */
export const IX_KIND_CONFIRMED: u32 = 0;
/** Learnt from EAR's own routing decisions; expires (ixExpireAssumed). */
export const IX_KIND_ASSUMED: u32 = 1;
/** Engine KV events with a CPU (offload) medium. */
export const IX_KIND_OFFLOADED: u32 = 2;
// Kind masks: bit (1 << kind). Removal and lookups take a mask; insertion takes one kind.
export const IX_MASK_CONFIRMED: u32 = 1;
export const IX_MASK_ASSUMED: u32 = 2;
export const IX_MASK_OFFLOADED: u32 = 4;
export const IX_MASK_ALL: u32 = 7;

// Header fields (byte offsets from the table base).
export const IX_H_SLOTS: u32 = 0;        // u32 slot count (power of two)
export const IX_H_MASK: u32 = 4;         // u32 slots - 1
export const IX_H_SHIFT: u32 = 8;        // u32 64 - log2(slots): home slot = (key * golden) >> shift
export const IX_H_CAPACITY: u32 = 12;    // u32 max keys
export const IX_H_MOVE_EPOCH: u32 = 16;  // u32 odd while a delete moves entries
export const IX_H_WRITER: u32 = 20;      // u32 writer claim (host: thread id + 1), 0 = unclaimed
export const IX_H_ASSUMED_TTL: u32 = 24; // u32 the assumed TTL (ms) of the last expiry sweep, which readers apply; 0 until one ran
export const IX_H_PODS: u32 = 28;        // u32 pod rows (set at init)
export const IX_H_GROUPS: u32 = 32;      // u32 pod groups: ceil(pods / IX_GROUP_PODS)
export const IX_H_LOSS_AT: u32 = 36;     // u32 byte offset from the base of the loss epochs (after the slots)
export const IX_H_VOID_AT: u32 = 40;     // u32 byte offset from the base of the voided-at times (after the loss epochs)
export const IX_H_LAST_VOID: u32 = 44;   // u32 time of the latest ixVoidAssumed (0 = none yet)
export const IX_H_USED_AT: u32 = 48;     // u32 byte offset from the base of the used-span bits (after the voided-at times)
export const IX_H_RING_AT: u32 = 52;     // u32 byte offset from the base of the loss rings (after the used-span bits)
export const IX_H_RING: u32 = 56;        // u32 entries in each pod row's loss ring (a power of two, ixLossRing)
export const IX_H_SIZE: u32 = 64;        // u32 live keys
export const IX_H_CLOCK_HAND: u32 = 68;  // u32 next slot the CLOCK hand examines
export const IX_H_EXPIRE_CURSOR: u32 = 72; // u32 next slot the expiry sweep examines
export const IX_H_INSERTS: u32 = 80;     // u64 keys added
export const IX_H_REMOVES: u32 = 88;     // u64 keys deleted by remove / clearPod
export const IX_H_EVICTIONS: u32 = 96;   // u64 keys deleted by CLOCK at the capacity bound
export const IX_H_EXPIRATIONS: u32 = 104; // u64 keys deleted because their assumed presence expired
export const IX_HEADER_BYTES: u32 = 128;

// Entry fields (byte offsets from a slot).
export const IX_E_KEY: u32 = 0;
export const IX_E_SEQ: u32 = 8;
export const IX_E_FLAGS: u32 = 12;
export const IX_E_ASSUMED_AT: u32 = 20;
export const IX_E_GROUP: u32 = 24;
export const IX_E_BITS: u32 = 32;
export const IX_KIND_BYTES: u32 = 32;
export const IX_ENTRY_BYTES: u32 = 128;
/**
 * Slots a bit of the used-span bitmap covers: 32 entries, 4 KiB (a page's worth: the slots start after the header,
 * so a span may straddle two). The writer sets a span's bit when it first puts a key in it; a span whose bit is clear
 * has never held a key, and the writer's sweeps (expiry, clearPod(s)) skip it. Without this, the expiry sweep read
 * every slot within a minute of start, and a read of shared memory commits its page: an idle gateway held the whole
 * index resident (408 MB RSS at 80 s, bench/RESULTS.md "An idle gateway's index pages").
 */
export const IX_USED_SPAN_SLOTS: u32 = 32;

/**
 * ixLongestPrefix's out area, per pod group: one u32 matched-block count per pod (the groups' counts first,
 * pod p at u32 p), then, after all the counts, the walk's own 4 u64 words per group (pods still matching).
 */
export const IX_COUNTS_BYTES_PER_GROUP: u32 = IX_GROUP_PODS * 4 + 32;
/** ixLookup writes the pods present (OR over the kinds in the mask) as 4 u64 words per group, pod p at bit p. */
export const IX_PRESENCE_BYTES_PER_GROUP: u32 = 32;

// ixProbeStats output (diagnostic, writer thread or quiescent table).
export const IX_PS_OCCUPIED: u32 = 0;    // u32 slots holding a key
export const IX_PS_MAX_PROBE: u32 = 4;   // u32 longest distance of a key from its home slot
export const IX_PS_SUM_PROBE: u32 = 8;   // u64 total distance (linear probing: independent of insert order)
export const IX_PS_JUNK: u32 = 16;       // u32 slots that are not clean: key 0 with presence left, an odd seq, or a key in a span not marked used
export const IX_PS_BYTES: u32 = 24;

const FLAG_REF: u32 = 1;
const GOLDEN: u64 = 0x9E3779B97F4A7C15;
/** Mixed into a block key for pod groups above 0 (odd, so distinct groups give distinct keys). */
const GROUP_SALT: u64 = 0xD6E8FEB86659FD93;
const MIN_SLOTS: u32 = 16;
/** ixLongestPrefix touches the home slots of the next group of this many blocks at once (see touchSlots). */
const PREFETCH_BLOCKS: u32 = 32;

// @ts-ignore: decorator
@inline function slotAt (base: usize, slot: u32): usize {
  return base + IX_HEADER_BYTES + <usize>slot * IX_ENTRY_BYTES;
}

// @ts-ignore: decorator
@inline function homeOf (base: usize, key: u64): u32 {
  return <u32>((key * GOLDEN) >> <u64>load<u32>(base + IX_H_SHIFT));
}

// @ts-ignore: decorator
@inline function normKey (key: u64): u64 {
  return key == 0 ? 1 : key;
}

/** The key block `key` (normalised) is stored under for pod group `g`. */
// @ts-ignore: decorator
@inline function groupKey (key: u64, g: u32): u64 {
  return g == 0 ? key : normKey(key ^ (<u64>g * GROUP_SALT));
}

function groupsFor (pods: u32): u32 {
  return (pods + IX_GROUP_PODS - 1) / IX_GROUP_PODS;
}

/** Bytes of the used-span bitmap for `slots` (u64 words, a bit per IX_USED_SPAN_SLOTS slots). */
function usedBytes (slots: u64): u64 {
  const spans = (slots + IX_USED_SPAN_SLOTS - 1) / IX_USED_SPAN_SLOTS;
  return ((spans + 63) >> 6) << 3;
}

/** Entries in each pod row's loss ring for `pods` rows (laid out by whole groups). */
export function ixLossRing (pods: u32): u32 {
  const rows = groupsFor(pods) * IX_GROUP_PODS;
  let r = IX_RING_MAX;
  while (r > IX_RING_MIN && r * rows > IX_RING_ENTRIES) r >>= 1;
  return r;
}

function slotsFor (capacity: u32): u64 {
  let slots: u64 = MIN_SLOTS;
  while (slots * 3 < <u64>capacity * 4) slots <<= 1;
  return slots;
}

/**
 * Bytes the index needs for `capacity` keys and `pods` pod rows (0xFFFFFFFF if it cannot fit a 32-bit address
 * space, or for pods outside [1, IX_MAX_PODS]).
 */
export function ixBytes (capacity: u32, pods: u32): u32 {
  if (pods == 0 || pods > IX_MAX_PODS) return 0xFFFFFFFF;
  const slots = slotsFor(capacity);
  const rows = <u64>groupsFor(pods) * IX_GROUP_PODS;
  const bytes = <u64>IX_HEADER_BYTES + slots * IX_ENTRY_BYTES + rows * 8 + usedBytes(slots) + rows * ixLossRing(pods) * 8;
  return bytes > 0xFFFFFFFF ? 0xFFFFFFFF : <u32>bytes;
}

/** Initialises the header. The slots must already be zero (a fresh memory is; touching them would cost RSS). */
export function ixInit (base: usize, capacity: u32, pods: u32): void {
  const slots = <u32>slotsFor(capacity);
  const groups = groupsFor(pods);
  const lossAt = IX_HEADER_BYTES + slots * IX_ENTRY_BYTES;
  store<u32>(base + IX_H_PODS, pods);
  store<u32>(base + IX_H_GROUPS, groups);
  store<u32>(base + IX_H_LOSS_AT, lossAt);
  store<u32>(base + IX_H_VOID_AT, lossAt + groups * IX_GROUP_PODS * 4);
  store<u32>(base + IX_H_USED_AT, lossAt + groups * IX_GROUP_PODS * 8);
  store<u32>(base + IX_H_RING_AT, lossAt + groups * IX_GROUP_PODS * 8 + <u32>usedBytes(slots));
  store<u32>(base + IX_H_RING, ixLossRing(pods));
  atomic.store<u32>(base + IX_H_LAST_VOID, 0);
  store<u32>(base + IX_H_SLOTS, slots);
  store<u32>(base + IX_H_MASK, slots - 1);
  store<u32>(base + IX_H_SHIFT, 64 - ctz<u32>(slots));
  store<u32>(base + IX_H_CAPACITY, capacity > 0 ? capacity : 1);
  atomic.store<u32>(base + IX_H_MOVE_EPOCH, 0);
  atomic.store<u32>(base + IX_H_WRITER, 0);
  atomic.store<u32>(base + IX_H_SIZE, 0);
  store<u32>(base + IX_H_CLOCK_HAND, 0);
  store<u32>(base + IX_H_EXPIRE_CURSOR, 0);
  store<u64>(base + IX_H_INSERTS, 0);
  store<u64>(base + IX_H_REMOVES, 0);
  store<u64>(base + IX_H_EVICTIONS, 0);
  store<u64>(base + IX_H_EXPIRATIONS, 0);
  atomic.store<u32>(base + IX_H_ASSUMED_TTL, 0);
  memory.fill(base + lossAt, 0, groups * IX_GROUP_PODS * 8); // loss epochs and voided-at times
}

// ---------------------------------------------------------------------------------------------- writer side

// @ts-ignore: decorator
@inline function beginWrite (e: usize): u32 {
  const s = load<u32>(e + IX_E_SEQ) + 1;
  atomic.store<u32>(e + IX_E_SEQ, s);
  return s;
}

// @ts-ignore: decorator
@inline function endWrite (e: usize, s: u32): void {
  atomic.store<u32>(e + IX_E_SEQ, s + 1);
}

// @ts-ignore: decorator
@inline function bump64 (p: usize): void {
  store<u64>(p, load<u64>(p) + 1);
}

// Loss epochs: bumped AFTER the presence bits are cleared (seq-cst), so a reader that read a pod's epoch before
// its walk either saw the bit gone in the walk or will find the epoch moved (ixLongestPrefixFrom's hint). A loss
// of one block writes the block's (group) key into the pod's ring at the old epoch before the bump, so a reader
// that sees the bump sees the key (ixHeldSince); only this thread writes epochs and rings. A loss with no list of
// blocks (LOST_ALL: clearPod(s), a void) moves the epoch by a whole ring, so every hint older than it finds the
// ring turned (ixHeldSince: 0).
/** The key of a loss that names no block: stored keys are never 0 (normKey, groupKey). */
const LOST_ALL: u64 = 0;

// @ts-ignore: decorator
@inline function lost (base: usize, pod: u32, key: u64): void {
  const ep = base + load<u32>(base + IX_H_LOSS_AT) + (<usize>pod << 2);
  const e = load<u32>(ep);
  const ring = load<u32>(base + IX_H_RING);
  if (key == LOST_ALL) {
    atomic.store<u32>(ep, e + ring);
    return;
  }
  atomic.store<u64>(base + load<u32>(base + IX_H_RING_AT) + ((<usize>pod * ring + (e & (ring - 1))) << 3), key);
  atomic.store<u32>(ep, e + 1);
}

/** Records the loss of `key` (or LOST_ALL) by every pod set in presence word `w` (pods 64w..64w+63). */
function lostBits (base: usize, w: u32, bits: u64, key: u64): void {
  while (bits != 0) {
    lost(base, (w << 6) + <u32>ctz<u64>(bits), key);
    bits &= bits - 1;
  }
}

/** Pods present in word w of entry e in any kind. */
// @ts-ignore: decorator
@inline function anyKindWord (e: usize, w: u32): u64 {
  const p = e + IX_E_BITS + (w << 3);
  return load<u64>(p) | load<u64>(p + IX_KIND_BYTES) | load<u64>(p + 2 * IX_KIND_BYTES);
}

/** The used-span bit of slot i: its word's address, and the bit. */
// @ts-ignore: decorator
@inline function usedWord (base: usize, i: u32): usize {
  return base + load<u32>(base + IX_H_USED_AT) + (<usize>(i / (IX_USED_SPAN_SLOTS * 64)) << 3);
}

// @ts-ignore: decorator
@inline function usedBit (i: u32): u64 {
  return <u64>1 << <u64>((i / IX_USED_SPAN_SLOTS) & 63);
}

/** Writer: slot i's span has held a key. */
// @ts-ignore: decorator
@inline function markUsed (base: usize, i: u32): void {
  const w = usedWord(base, i);
  store<u64>(w, load<u64>(w) | usedBit(i));
}

/** Whether slot i's span ever held a key (if not, every slot of it is empty). */
// @ts-ignore: decorator
@inline function spanUsed (base: usize, i: u32): bool {
  return (load<u64>(usedWord(base, i)) & usedBit(i)) != 0;
}

/** The first slot of the span after slot i's. */
// @ts-ignore: decorator
@inline function nextSpan (i: u32): u32 {
  return (i | (IX_USED_SPAN_SLOTS - 1)) + 1;
}

/** Writer's probe: the slot holding `key`, or -1. */
function findW (base: usize, key: u64): i32 {
  const mask = load<u32>(base + IX_H_MASK);
  let i = homeOf(base, key);
  while (true) {
    const k = load<u64>(slotAt(base, i));
    if (k == key) return <i32>i;
    if (k == 0) return -1;
    i = (i + 1) & mask;
  }
  return -1;
}

function anyPresence (e: usize): bool {
  let v: u64 = 0;
  for (let w: u32 = 0; w < IX_KINDS * 4; w++) v |= load<u64>(e + IX_E_BITS + (w << 3));
  return v != 0;
}

/** Deletes the entry at `slot` by backward shift and decrements size. */
function deleteAt (base: usize, slot: u32): void {
  const mask = load<u32>(base + IX_H_MASK);
  const epochPtr = base + IX_H_MOVE_EPOCH;
  let moving = false;
  let i = slot;
  let j = slot;
  while (true) {
    j = (j + 1) & mask;
    const ej = slotAt(base, j);
    const k = load<u64>(ej);
    if (k == 0) break;
    // The entry at j may fill the hole at i unless its home lies cyclically in (i, j].
    if (((j - homeOf(base, k)) & mask) < ((j - i) & mask)) continue;
    if (!moving) {
      atomic.store<u32>(epochPtr, load<u32>(epochPtr) + 1);
      moving = true;
    }
    const ei = slotAt(base, i);
    const s = beginWrite(ei);
    atomic.store<u64>(ei + IX_E_KEY, k);
    for (let w: u32 = 0; w < IX_KINDS * 4; w++) {
      const o = IX_E_BITS + (w << 3);
      const v = load<u64>(ej + o);
      if (load<u64>(ei + o) != v) atomic.store<u64>(ei + o, v); // most words are 0 on both sides
    }
    // Readers judge the assumed bits by this time: it moves with them, inside the write.
    atomic.store<u32>(ei + IX_E_ASSUMED_AT, load<u32>(ej + IX_E_ASSUMED_AT));
    endWrite(ei, s);
    store<u32>(ei + IX_E_FLAGS, load<u32>(ej + IX_E_FLAGS));
    store<u32>(ei + IX_E_GROUP, load<u32>(ej + IX_E_GROUP));
    i = j;
  }
  const ei = slotAt(base, i);
  const s = beginWrite(ei);
  atomic.store<u64>(ei + IX_E_KEY, 0);
  for (let w: u32 = 0; w < IX_KINDS * 4; w++) {
    const o = ei + IX_E_BITS + (w << 3);
    if (load<u64>(o) != 0) atomic.store<u64>(o, 0);
  }
  atomic.store<u32>(ei + IX_E_ASSUMED_AT, 0);
  endWrite(ei, s);
  store<u32>(ei + IX_E_FLAGS, 0);
  store<u32>(ei + IX_E_GROUP, 0);
  if (moving) atomic.store<u32>(epochPtr, load<u32>(epochPtr) + 1);
  atomic.store<u32>(base + IX_H_SIZE, load<u32>(base + IX_H_SIZE) - 1);
}

/** CLOCK: evicts the first entry from the hand whose reference bit is clear, clearing set bits on the way. */
function evictOne (base: usize): void {
  const mask = load<u32>(base + IX_H_MASK);
  let hand = load<u32>(base + IX_H_CLOCK_HAND);
  // Two turns are enough: the first clears every reference bit it passes.
  for (let n: u32 = 0; n <= 2 * mask + 2; n++) {
    const e = slotAt(base, hand);
    if (load<u64>(e) != 0) {
      const f = load<u32>(e + IX_E_FLAGS);
      if ((f & FLAG_REF) == 0) {
        const g4 = load<u32>(e + IX_E_GROUP) << 2;
        const w0 = anyKindWord(e, 0);
        const w1 = anyKindWord(e, 1);
        const w2 = anyKindWord(e, 2);
        const w3 = anyKindWord(e, 3);
        const key = load<u64>(e);
        deleteAt(base, hand);
        bump64(base + IX_H_EVICTIONS);
        lostBits(base, g4, w0, key);
        lostBits(base, g4 + 1, w1, key);
        lostBits(base, g4 + 2, w2, key);
        lostBits(base, g4 + 3, w3, key);
        break;
      }
      store<u32>(e + IX_E_FLAGS, f & ~FLAG_REF);
    }
    hand = (hand + 1) & mask;
  }
  // The hand stays on the victim's slot: whatever shifted into it has not been examined yet.
  store<u32>(base + IX_H_CLOCK_HAND, hand);
}

function insertKey (base: usize, block: u64, pod: u32, kind: u32, now: u32): i32 {
  const mask = load<u32>(base + IX_H_MASK);
  const g = pod / IX_GROUP_PODS;
  const local = pod % IX_GROUP_PODS;
  const key = groupKey(block, g);
  let i = homeOf(base, key);
  let e: usize;
  while (true) {
    e = slotAt(base, i);
    const k = load<u64>(e);
    if (k == key) break;
    if (k == 0) break;
    i = (i + 1) & mask;
  }
  const bit: u64 = <u64>1 << <u64>(local & 63);
  const assumed = kind == IX_KIND_ASSUMED;
  let added: i32 = 0;
  if (load<u64>(e) == 0) {
    if (load<u32>(base + IX_H_SIZE) >= load<u32>(base + IX_H_CAPACITY)) {
      evictOne(base);
      // The eviction may have shifted this cluster: find the first empty slot again.
      i = homeOf(base, key);
      while (load<u64>(slotAt(base, i)) != 0) i = (i + 1) & mask;
      e = slotAt(base, i);
    }
    const s = beginWrite(e);
    atomic.store<u64>(e + IX_E_BITS + kind * IX_KIND_BYTES + ((local >> 6) << 3), bit);
    // (0 in an empty slot; readers see the key with its time, never with another entry's)
    if (assumed) atomic.store<u32>(e + IX_E_ASSUMED_AT, now);
    atomic.store<u64>(e + IX_E_KEY, key);
    endWrite(e, s);
    store<u32>(e + IX_E_GROUP, g);
    markUsed(base, i);
    atomic.store<u32>(base + IX_H_SIZE, load<u32>(base + IX_H_SIZE) + 1);
    bump64(base + IX_H_INSERTS);
    added = 1;
  } else {
    if (unchanged(base, e, bit, local, kind, now)) return 0;
    // One assumed-at time serves every pod of the entry: before this insert refreshes it, the assumed bits it
    // already judged expired go (else another pod's routing would bring back a pod whose TTL ran out).
    if (assumed) dropStaleAssumed(base, e, now);
    const w = e + IX_E_BITS + kind * IX_KIND_BYTES + ((local >> 6) << 3);
    const old = load<u64>(w);
    if ((old & bit) == 0) {
      const s = beginWrite(e);
      atomic.store<u64>(w, old | bit);
      if (assumed) atomic.store<u32>(e + IX_E_ASSUMED_AT, now);
      endWrite(e, s);
    } else if (assumed) atomic.store<u32>(e + IX_E_ASSUMED_AT, now); // same bits: a reader sees either time
  }
  store<u32>(e + IX_E_FLAGS, load<u32>(e + IX_E_FLAGS) | FLAG_REF);
  return added;
}

/**
 * Whether re-recording entry e's pod bit in `kind` at `now` would change nothing a reader or CLOCK tells apart:
 * the bit and the reference bit are set and, for assumed presence, its time is younger than TTL/64 and no pod was
 * voided since it. A session's turn re-records its whole prompt, mostly such keys: reading them only keeps their
 * cache lines shared with the threads that walk them (writing each cost ~5x a read, measured on a 130 KB turn).
 * So an assumed key's time moves at most every TTL/64, and its presence may end up to TTL/64 before the TTL.
 */
// @ts-ignore: decorator
@inline function unchanged (base: usize, e: usize, bit: u64, local: u32, kind: u32, now: u32): bool {
  if ((load<u64>(e + IX_E_BITS + kind * IX_KIND_BYTES + ((local >> 6) << 3)) & bit) == 0) return false;
  if ((load<u32>(e + IX_E_FLAGS) & FLAG_REF) == 0) return false;
  if (kind != IX_KIND_ASSUMED) return true;
  const at = load<u32>(e + IX_E_ASSUMED_AT);
  const ttl = load<u32>(base + IX_H_ASSUMED_TTL);
  if (ttl == 0 || <u32>(now - at) >= (ttl >> 6)) return false;
  const last = load<u32>(base + IX_H_LAST_VOID);
  return last == 0 || <i32>(last - at) < 0;
}

/**
 * Whether assumed presence recorded at `at` has expired at `now` under `ttl` (ms; 0: no TTL known yet). Signed:
 * a reader's clock a little behind the writer's (another thread's `now`) reads as young, not as 49 days old.
 */
// @ts-ignore: decorator
@inline function assumedExpired (now: u32, at: u32, ttl: u32): bool {
  return ttl != 0 && <i32>(now - at) >= <i32>ttl;
}

/**
 * Writer, before an assumed insert refreshes entry e's one assumed-at time: clears the assumed bits that time no
 * longer vouches for, every pod's once it expired, and those of pods voided since it (the entry stays: its caller
 * adds a bit). Afterwards a pod's assumed bit in an entry younger than the pod's voided-at time was set after it.
 */
function dropStaleAssumed (base: usize, e: usize, now: u32): void {
  const at = load<u32>(e + IX_E_ASSUMED_AT);
  const a = e + IX_E_BITS + IX_KIND_ASSUMED * IX_KIND_BYTES;
  const a0 = load<u64>(a);
  const a1 = load<u64>(a + 8);
  const a2 = load<u64>(a + 16);
  const a3 = load<u64>(a + 24);
  if ((a0 | a1 | a2 | a3) == 0) return;
  const g4 = load<u32>(e + IX_E_GROUP) << 2;
  let d0 = a0;
  let d1 = a1;
  let d2 = a2;
  let d3 = a3;
  if (!assumedExpired(now, at, load<u32>(base + IX_H_ASSUMED_TTL))) {
    const last = load<u32>(base + IX_H_LAST_VOID);
    if (last == 0 || <i32>(last - at) < 0) return; // no pod voided since this time
    d0 = voidedBits(base, g4, a0, at);
    d1 = voidedBits(base, g4 + 1, a1, at);
    d2 = voidedBits(base, g4 + 2, a2, at);
    d3 = voidedBits(base, g4 + 3, a3, at);
    if ((d0 | d1 | d2 | d3) == 0) return;
  }
  const s = beginWrite(e);
  if (d0 != 0) atomic.store<u64>(a, a0 & ~d0);
  if (d1 != 0) atomic.store<u64>(a + 8, a1 & ~d1);
  if (d2 != 0) atomic.store<u64>(a + 16, a2 & ~d2);
  if (d3 != 0) atomic.store<u64>(a + 24, a3 & ~d3);
  endWrite(e, s);
  const key = load<u64>(e);
  lostBits(base, g4, d0, key);
  lostBits(base, g4 + 1, d1, key);
  lostBits(base, g4 + 2, d2, key);
  lostBits(base, g4 + 3, d3, key);
}

/**
 * The pods of presence word w (pods 64w..64w+63) set in `bits` whose assumed presence recorded at `at` is void:
 * the pod was voided (ixVoidAssumed) at or after `at`. Any thread.
 */
function voidedBits (base: usize, w: u32, bits: u64, at: u32): u64 {
  const voidAt = base + load<u32>(base + IX_H_VOID_AT) + (<usize>w << 8);
  let out: u64 = 0;
  while (bits != 0) {
    const b = <u32>ctz<u64>(bits);
    const v = atomic.load<u32>(voidAt + (<usize>b << 2));
    if (v != 0 && <i32>(v - at) >= 0) out |= <u64>1 << <u64>b;
    bits &= bits - 1;
  }
  return out;
}

/**
 * Writer. `pod` holds none of what EAR's routing assumed it holds up to `now` (an engine's AllBlocksCleared):
 * readers given a time stop counting those bits at once, with no sweep of the table, until they expire by the
 * TTL (which the expiry sweep then clears); an assumed insert of the pod after `now` counts. -1 for a bad pod.
 */
export function ixVoidAssumed (base: usize, pod: u32, now: u32): i32 {
  if (pod >= load<u32>(base + IX_H_PODS)) return -1;
  const t = now == 0 ? 1 : now; // 0 means never
  atomic.store<u32>(base + load<u32>(base + IX_H_VOID_AT) + (<usize>pod << 2), t);
  atomic.store<u32>(base + IX_H_LAST_VOID, t);
  lost(base, pod, LOST_ALL);
  return 0;
}

/**
 * Writer. Records that `pod` holds block `key` in `kind` at time `now` (ms). Returns 1 if the key is new,
 * 0 if it was there (presence, assumed time and CLOCK bit refreshed: see unchanged), -1 for a pod or kind out of range.
 */
export function ixInsert (base: usize, key: u64, pod: u32, kind: u32, now: u32): i32 {
  if (pod >= load<u32>(base + IX_H_PODS) || kind >= IX_KINDS) return -1;
  return insertKey(base, normKey(key), pod, kind, now);
}

/** Slots a 4 KB page holds: ixWarm writes one of each. */
const SLOTS_PER_PAGE: u32 = 4096 / IX_ENTRY_BYTES;

/**
 * Writer. Makes the pages of slots [from, from + pages * SLOTS_PER_PAGE) resident: an atomic OR of 0 into one
 * slot's writer-private flags per 4 KB page, which changes no value but is a write, so the kernel backs the page
 * now. The slots start as untouched zero pages; without this, the first key stored into each page costs a page
 * fault (~15 µs on a 2-core VM, about 100x the insert), every new key of a fresh index lands on a new page, and a
 * fresh gateway's writer spent 2-3 ms of a 130 KB turn on them. Returns the slot to continue from (the slot count
 * when done).
 */
export function ixWarm (base: usize, from: u32, pages: u32): u32 {
  const slots = load<u32>(base + IX_H_SLOTS);
  let i = from;
  for (let n: u32 = 0; n < pages && i < slots; n++, i += SLOTS_PER_PAGE) atomic.or<u32>(slotAt(base, i) + IX_E_FLAGS, 0);
  return min<u32>(i, slots);
}

/**
 * Loads the home slot of block `key` in `pod`'s group, both cache lines, and nothing else: a caller about to
 * insert a run of keys touches the next few first, so their misses overlap instead of coming one at a time
 * (as touchSlots does for the walks). Any thread.
 */
export function ixTouchHome (base: usize, key: u64, pod: u32): void {
  const e = slotAt(base, homeOf(base, groupKey(normKey(key), pod / IX_GROUP_PODS)));
  load<u64>(e);
  load<u64>(e, 64);
}

/** Writer. ixInsert over `n` u64 keys at `keysPtr` (a prompt's blocks for one pod). Returns the new keys, or -1. */
export function ixInsertMany (base: usize, keysPtr: usize, n: u32, pod: u32, kind: u32, now: u32): i32 {
  if (pod >= load<u32>(base + IX_H_PODS) || kind >= IX_KINDS) return -1;
  let added: i32 = 0;
  for (let i: u32 = 0; i < n; i++) {
    if (i % PREFETCH_BLOCKS == 0) for (let j = i, end = min<u32>(n, i + PREFETCH_BLOCKS); j < end; j++) ixTouchHome(base, load<u64>(keysPtr + (<usize>j << 3)), pod);
    added += insertKey(base, normKey(load<u64>(keysPtr + (<usize>i << 3))), pod, kind, now);
  }
  return added;
}

/**
 * Clears `pod` in the kinds of `kindMask` at slot e (an entry of the pod's group); deletes the key if no presence
 * is left. 0/1/2 as ixRemove.
 */
function removeAt (base: usize, slot: u32, pod: u32, kindMask: u32): i32 {
  const e = slotAt(base, slot);
  const off = IX_E_BITS + (((pod % IX_GROUP_PODS) >> 6) << 3);
  const bit: u64 = <u64>1 << <u64>(pod & 63);
  let hit = false;
  for (let k: u32 = 0; k < IX_KINDS; k++) {
    if ((kindMask & (1 << k)) != 0 && (load<u64>(e + off + k * IX_KIND_BYTES) & bit) != 0) hit = true;
  }
  if (!hit) return 0;
  const s = beginWrite(e);
  for (let k: u32 = 0; k < IX_KINDS; k++) {
    if ((kindMask & (1 << k)) != 0) {
      const w = e + off + k * IX_KIND_BYTES;
      atomic.store<u64>(w, load<u64>(w) & ~bit);
    }
  }
  endWrite(e, s);
  lost(base, pod, load<u64>(e));
  if (anyPresence(e)) return 1;
  deleteAt(base, slot);
  bump64(base + IX_H_REMOVES);
  return 2;
}

/**
 * Writer. Clears `pod` from block `key` in the kinds of `kindMask`. Returns 0 if the pod was not there,
 * 1 if it was cleared, 2 if that left the key with no pod and the key was deleted; -1 for a bad pod.
 */
export function ixRemove (base: usize, key: u64, pod: u32, kindMask: u32): i32 {
  if (pod >= load<u32>(base + IX_H_PODS)) return -1;
  const slot = findW(base, groupKey(normKey(key), pod / IX_GROUP_PODS));
  return slot < 0 ? 0 : removeAt(base, <u32>slot, pod, kindMask);
}

/** Writer. ixRemove over `n` u64 keys at `keysPtr`. Returns how many keys changed (1 or 2), or -1. */
export function ixRemoveMany (base: usize, keysPtr: usize, n: u32, pod: u32, kindMask: u32): i32 {
  if (pod >= load<u32>(base + IX_H_PODS)) return -1;
  const g = pod / IX_GROUP_PODS;
  let changed: i32 = 0;
  for (let i: u32 = 0; i < n; i++) {
    const slot = findW(base, groupKey(normKey(load<u64>(keysPtr + (<usize>i << 3))), g));
    if (slot >= 0 && removeAt(base, <u32>slot, pod, kindMask) > 0) changed++;
  }
  return changed;
}

/**
 * Writer. Clears `pod` from every key in the kinds of `kindMask` (pod down, AllBlocksCleared) and deletes the
 * keys left empty. A full sweep of the slots. Returns how many keys it changed, or -1 for a bad pod.
 */
export function ixClearPod (base: usize, pod: u32, kindMask: u32): i32 {
  if (pod >= load<u32>(base + IX_H_PODS)) return -1;
  const g = pod / IX_GROUP_PODS;
  const slots = load<u32>(base + IX_H_SLOTS);
  let changed: i32 = 0;
  let i: u32 = 0;
  while (i < slots) {
    if (!spanUsed(base, i)) {
      i = nextSpan(i);
      continue;
    }
    const e = slotAt(base, i);
    if (load<u64>(e) != 0 && load<u32>(e + IX_E_GROUP) == g) {
      const r = removeAt(base, i, pod, kindMask);
      if (r > 0) changed++;
      // A deletion shifts later entries into slot i: look at it again. Entries only ever move into slots at
      // or after the hole (or, across the wrap, into slots already swept), so none is skipped.
      if (r == 2) continue;
    }
    i++;
  }
  lost(base, pod, LOST_ALL);
  return changed;
}

/**
 * Writer. ixClearPod for a set of pods in ONE sweep: clears every pod whose bit is set in the bitset at
 * `podsPtr` (IX_PRESENCE_BYTES_PER_GROUP per group: 4 u64 words each, pod p at bit p) from every key in the
 * kinds of `kindMask`, and deletes the keys left empty. Rows released together cost one scan of the slots, not
 * one each. Returns how many keys it changed (a key counts once however many of the pods it loses).
 */
export function ixClearPods (base: usize, podsPtr: usize, kindMask: u32): i32 {
  const groups = load<u32>(base + IX_H_GROUPS);
  const words = groups << 2;
  let any: u64 = 0;
  for (let w: u32 = 0; w < words; w++) any |= load<u64>(podsPtr + (<usize>w << 3));
  kindMask &= IX_MASK_ALL;
  if (any == 0 || kindMask == 0) return 0;
  const slots = load<u32>(base + IX_H_SLOTS);
  // One group (up to 256 rows): its four words stay in registers for the whole sweep.
  const one = groups == 1;
  const o0 = load<u64>(podsPtr);
  const o1 = load<u64>(podsPtr, 8);
  const o2 = load<u64>(podsPtr, 16);
  const o3 = load<u64>(podsPtr, 24);
  let changed: i32 = 0;
  let i: u32 = 0;
  while (i < slots) {
    if (!spanUsed(base, i)) {
      i = nextSpan(i);
      continue;
    }
    const e = slotAt(base, i);
    if (load<u64>(e) != 0) {
      let r: i32;
      if (one) r = clearBits(base, i, e, kindMask, o0, o1, o2, o3);
      else {
        // The entry's group's words of the bitset (L1: the bitset is at most 2 KiB).
        const mp = podsPtr + (<usize>load<u32>(e + IX_E_GROUP) << 5);
        r = clearBits(base, i, e, kindMask, load<u64>(mp), load<u64>(mp, 8), load<u64>(mp, 16), load<u64>(mp, 24));
      }
      changed += r > 0 ? 1 : 0;
      // Slot i now holds what shifted back into it (or nothing): look at it again. As in ixClearPod, an entry
      // not yet swept only ever moves into a slot at or after the hole; one moved across the wrap was swept
      // already and is looked at again with no bit left to clear, so it is not counted twice.
      if (r == 2) continue;
    }
    i++;
  }
  for (let w: u32 = 0; w < words; w++) lostBits(base, w, load<u64>(podsPtr + (<usize>w << 3)), LOST_ALL);
  return changed;
}

/**
 * ixClearPods on the entry at slot i (address e): clears the bits of m0..m3 in the kinds of `kindMask`. Returns 0
 * if none was set, 1 if cleared, 2 if that left the entry empty and it was deleted.
 */
// @ts-ignore: decorator
@inline function clearBits (base: usize, i: u32, e: usize, kindMask: u32, m0: u64, m1: u64, m2: u64, m3: u64): i32 {
  let hit: u64 = 0;
  for (let k: u32 = 0; k < IX_KINDS; k++) {
    if ((kindMask & (1 << k)) == 0) continue;
    const p = e + IX_E_BITS + k * IX_KIND_BYTES;
    hit |= (load<u64>(p) & m0) | (load<u64>(p, 8) & m1) | (load<u64>(p, 16) & m2) | (load<u64>(p, 24) & m3);
  }
  if (hit == 0) return 0;
  const s = beginWrite(e);
  for (let k: u32 = 0; k < IX_KINDS; k++) {
    if ((kindMask & (1 << k)) == 0) continue;
    const p = e + IX_E_BITS + k * IX_KIND_BYTES;
    // Only the words that change: most of an entry's words are 0, and a store dirties the line.
    let v = load<u64>(p);
    if ((v & m0) != 0) atomic.store<u64>(p, v & ~m0);
    v = load<u64>(p, 8);
    if ((v & m1) != 0) atomic.store<u64>(p + 8, v & ~m1);
    v = load<u64>(p, 16);
    if ((v & m2) != 0) atomic.store<u64>(p + 16, v & ~m2);
    v = load<u64>(p, 24);
    if ((v & m3) != 0) atomic.store<u64>(p + 24, v & ~m3);
  }
  endWrite(e, s);
  if (anyPresence(e)) return 1;
  deleteAt(base, i);
  bump64(base + IX_H_REMOVES);
  return 2;
}

/**
 * Writer, incremental. Advances the header's cursor over `budget` slots (`slots` is one full sweep); an
 * entry whose assumed-at time is at least `ttl` ms before `now` loses its ASSUMED presence (every pod), and is
 * deleted if nothing else is left. Returns how many entries lost their assumed presence.
 */
export function ixExpireAssumed (base: usize, now: u32, ttl: u32, budget: u32): i32 {
  const mask = load<u32>(base + IX_H_MASK);
  atomic.store<u32>(base + IX_H_ASSUMED_TTL, ttl);
  let cur = load<u32>(base + IX_H_EXPIRE_CURSOR);
  let expired: i32 = 0;
  let n: u32 = 0;
  while (n < budget) {
    if (!spanUsed(base, cur)) {
      // Never held a key: one step of the budget for the span, none of its slots read.
      cur = nextSpan(cur) & mask;
      n++;
      continue;
    }
    const e = slotAt(base, cur);
    if (load<u64>(e) != 0 && now - load<u32>(e + IX_E_ASSUMED_AT) >= ttl) {
      const a = e + IX_E_BITS + IX_KIND_ASSUMED * IX_KIND_BYTES;
      const a0 = load<u64>(a);
      const a1 = load<u64>(a + 8);
      const a2 = load<u64>(a + 16);
      const a3 = load<u64>(a + 24);
      if ((a0 | a1 | a2 | a3) != 0) {
        const g4 = load<u32>(e + IX_E_GROUP) << 2;
        const s = beginWrite(e);
        for (let w: u32 = 0; w < 4; w++) atomic.store<u64>(a + (w << 3), 0);
        endWrite(e, s);
        const key = load<u64>(e);
        lostBits(base, g4, a0, key);
        lostBits(base, g4 + 1, a1, key);
        lostBits(base, g4 + 2, a2, key);
        lostBits(base, g4 + 3, a3, key);
        expired++;
        if (!anyPresence(e)) {
          deleteAt(base, cur);
          bump64(base + IX_H_EXPIRATIONS);
          continue; // what shifted into this slot is examined next (each deletion is progress: size drops)
        }
      }
    }
    cur = (cur + 1) & mask;
    n++;
  }
  store<u32>(base + IX_H_EXPIRE_CURSOR, cur);
  return expired;
}

/** Diagnostic (writer thread, or a quiescent table): occupancy, probe lengths and clean-slot check. */
export function ixProbeStats (base: usize, outPtr: usize): void {
  const slots = load<u32>(base + IX_H_SLOTS);
  const mask = load<u32>(base + IX_H_MASK);
  let occupied: u32 = 0;
  let maxProbe: u32 = 0;
  let sum: u64 = 0;
  let junk: u32 = 0;
  for (let i: u32 = 0; i < slots; i++) {
    const e = slotAt(base, i);
    const k = load<u64>(e);
    if ((load<u32>(e + IX_E_SEQ) & 1) != 0) junk++;
    if (k == 0) {
      if (anyPresence(e)) junk++;
      continue;
    }
    // A key in a span the sweeps skip.
    if (!spanUsed(base, i)) junk++;
    occupied++;
    const d = (i - homeOf(base, k)) & mask;
    if (d > maxProbe) maxProbe = d;
    sum += d;
  }
  store<u32>(outPtr + IX_PS_OCCUPIED, occupied);
  store<u32>(outPtr + IX_PS_MAX_PROBE, maxProbe);
  store<u64>(outPtr + IX_PS_SUM_PROBE, sum);
  store<u32>(outPtr + IX_PS_JUNK, junk);
}

// ---------------------------------------------------------------------------------------------- reader side

/**
 * Opens a consistent read of `key`: returns (seq << 32 | slot) with an even seq read before the key matched,
 * or -1 once the key is known absent. The caller reads the presence words, then checks the seq is unchanged
 * (else it calls again). A miss stands only if the move epoch was even and unchanged across the probe.
 */
// @ts-ignore: decorator
@inline function openRead (base: usize, key: u64): i64 {
  const mask = load<u32>(base + IX_H_MASK);
  const epochPtr = base + IX_H_MOVE_EPOCH;
  while (true) {
    const e1 = atomic.load<u32>(epochPtr);
    let i = homeOf(base, key);
    for (let n: u32 = 0; n <= mask; n++) {
      const e = slotAt(base, i);
      const s = atomic.load<u32>(e + IX_E_SEQ);
      const k = atomic.load<u64>(e + IX_E_KEY);
      if (k == key) {
        if ((s & 1) == 0) return (<i64>s << 32) | <i64>i;
        break; // being written: probe again
      }
      if (k == 0) {
        if ((e1 & 1) == 0 && atomic.load<u32>(epochPtr) == e1) return -1;
        break; // entries moved during the probe: probe again
      }
      i = (i + 1) & mask;
    }
  }
  return -1;
}

/** Presence word w (pods 64w..64w+63) OR'd over the kinds in the mask. */
// @ts-ignore: decorator
@inline function presence (e: usize, w: u32, kindMask: u32): u64 {
  const p = e + IX_E_BITS + (w << 3);
  let v: u64 = 0;
  if ((kindMask & IX_MASK_CONFIRMED) != 0) v |= atomic.load<u64>(p);
  if ((kindMask & IX_MASK_ASSUMED) != 0) v |= atomic.load<u64>(p + IX_KIND_BYTES);
  if ((kindMask & IX_MASK_OFFLOADED) != 0) v |= atomic.load<u64>(p + 2 * IX_KIND_BYTES);
  return v;
}

/**
 * A reader's TTL for assumed presence: the writer's (IX_H_ASSUMED_TTL) when the walk reads assumed bits and its
 * caller gave a time (`checkTtl`), else 0 (none checked).
 */
// @ts-ignore: decorator
@inline function readerTtl (base: usize, kindMask: u32, checkTtl: u32): u32 {
  return checkTtl != 0 && (kindMask & IX_MASK_ASSUMED) != 0 ? atomic.load<u32>(base + IX_H_ASSUMED_TTL) : 0;
}

/**
 * The kinds of `kindMask` entry e counts for at `now`: without ASSUMED once its assumed-at time is `ttl` old,
 * whether or not the writer's expiry sweep has reached the entry yet (it sweeps a slice per tick). Read inside
 * the entry's seq window: the writer moves the time with the bits.
 */
// @ts-ignore: decorator
@inline function liveKinds (e: usize, kindMask: u32, now: u32, ttl: u32): u32 {
  return ttl != 0 && assumedExpired(now, atomic.load<u32>(e + IX_E_ASSUMED_AT), ttl) ? kindMask & ~IX_MASK_ASSUMED : kindMask;
}

/**
 * Whether a reader given a time must check voided pods (ixVoidAssumed) entry by entry: only while the latest void
 * is younger than the TTL (older voids cover only bits the TTL has expired). Almost always false: one load a walk.
 */
// @ts-ignore: decorator
@inline function voidsRecent (base: usize, kindMask: u32, now: u32, checkTtl: u32, ttl: u32): bool {
  if (checkTtl == 0 || (kindMask & IX_MASK_ASSUMED) == 0) return false;
  const last = atomic.load<u32>(base + IX_H_LAST_VOID);
  return last != 0 && (ttl == 0 || <i32>(now - last) < <i32>ttl);
}

/** Presence word w of entry e (group g4 >> 2) in the kinds of `km`, its assumed bits less the voided pods'. */
// @ts-ignore: decorator
@inline function unvoided (base: usize, e: usize, g4: u32, w: u32, km: u32, at: u32): u64 {
  const a = atomic.load<u64>(e + IX_E_BITS + IX_KIND_BYTES + (w << 3));
  return presence(e, w, km & ~IX_MASK_ASSUMED) | (a & ~voidedBits(base, g4 + w, a, at));
}

/**
 * Reader. Writes the pods holding `key` in any kind of `kindMask` to `outPtr` (IX_PRESENCE_BYTES_PER_GROUP per
 * pod group: 4 u64 words each, pod p at bit p). Returns 1 if the key is in the index for some group (even with
 * no pod in those kinds), 0 if not. With `checkTtl`, assumed presence older than the writer's TTL at `now` is
 * not counted (liveKinds).
 */
export function ixLookup (base: usize, key: u64, kindMask: u32, outPtr: usize, now: u32, checkTtl: u32): u32 {
  const block = normKey(key);
  const groups = load<u32>(base + IX_H_GROUPS);
  const ttl = readerTtl(base, kindMask, checkTtl);
  const vo = voidsRecent(base, kindMask, now, checkTtl, ttl);
  let found: u32 = 0;
  for (let g: u32 = 0; g < groups; g++) {
    const k = groupKey(block, g);
    const out = outPtr + (<usize>g << 5);
    let hit = false;
    while (true) {
      const t = openRead(base, k);
      if (t < 0) break;
      const e = slotAt(base, <u32>t);
      const km = liveKinds(e, kindMask, now, ttl);
      let p0: u64, p1: u64, p2: u64, p3: u64;
      if (vo && (km & IX_MASK_ASSUMED) != 0) {
        const at = atomic.load<u32>(e + IX_E_ASSUMED_AT);
        p0 = unvoided(base, e, g << 2, 0, km, at);
        p1 = unvoided(base, e, g << 2, 1, km, at);
        p2 = unvoided(base, e, g << 2, 2, km, at);
        p3 = unvoided(base, e, g << 2, 3, km, at);
      } else {
        p0 = presence(e, 0, km);
        p1 = presence(e, 1, km);
        p2 = presence(e, 2, km);
        p3 = presence(e, 3, km);
      }
      if (atomic.load<u32>(e + IX_E_SEQ) != <u32>(t >> 32)) continue;
      store<u64>(out, p0);
      store<u64>(out + 8, p1);
      store<u64>(out + 16, p2);
      store<u64>(out + 24, p3);
      hit = true;
      break;
    }
    if (hit) found = 1;
    else memory.fill(out, 0, IX_PRESENCE_BYTES_PER_GROUP);
  }
  return found;
}

/**
 * ixHeldSince's hash of a key: not the index's own (homeOf). CLOCK evicts the keys of a run of slots, whose home
 * slots, the top bits of key * GOLDEN, are nearly one: hashed that way, a ring's keys made one cluster of the set,
 * and a probe for a prompt's block walked it (200 µs for 8k blocks and 107 losses, against 9 µs for random keys).
 * The splitmix64 finaliser spreads them.
 */
// @ts-ignore: decorator
@inline function setHash (key: u64): u64 {
  let h = (key ^ (key >> 30)) * 0xBF58476D1CE4E5B9;
  h = (h ^ (h >> 27)) * 0x94D049BB133111EB;
  return h ^ (h >> 31);
}

/**
 * Reader. Of the first `count` blocks of the prompt at `keysPtr`, which `pod` held when its loss epoch read `epoch`,
 * how many it still holds for sure: `count` if it lost none of them since (losses of other blocks do not matter),
 * else the position of the first of them it lost (it may hold that block again: counted lost all the same), or 0
 * once the pod lost more blocks since than its ring keeps (IX_H_RING - 1) or than half of `setSlots`, or lost
 * them with no list (clearPod, a void). A session's next turn starts its walk there (ixLongestPrefixFrom) instead of at block 0 whenever its
 * pod lost anything, which on an index at its capacity is at nearly every turn: CLOCK evicts a key with each insert.
 *
 * Cost: the keys lost since into a hash set of up to `setSlots` u64 slots (a power of two) at `setPtr`, at most
 * half full, then one probe of it per prompt block, in cache: a few µs per thousand blocks, where a walk reads the
 * index per block.
 */
export function ixHeldSince (base: usize, keysPtr: usize, count: u32, pod: u32, epoch: u32, setPtr: usize, setSlots: u32): u32 {
  if (pod >= load<u32>(base + IX_H_PODS)) return 0;
  const ep = base + load<u32>(base + IX_H_LOSS_AT) + (<usize>pod << 2);
  const ring = load<u32>(base + IX_H_RING);
  const since = atomic.load<u32>(ep) - epoch;
  if (since == 0) return count;
  if (since >= ring || since > setSlots / 2) return 0;
  // A set of at least twice as many slots as keys, open addressing; keys are never 0 (normKey, groupKey).
  let bits: u32 = 1;
  while ((<u32>1 << bits) < since * 2) bits++;
  const setMask: u32 = (<u32>1 << bits) - 1;
  const shift = <u64>(64 - bits);
  memory.fill(setPtr, 0, <usize>(setMask + 1) << 3);
  const rows = base + load<u32>(base + IX_H_RING_AT) + ((<usize>pod * ring) << 3);
  for (let j: u32 = 0; j < since; j++) {
    const key = atomic.load<u64>(rows + (<usize>((epoch + j) & (ring - 1)) << 3));
    let i = <u32>(setHash(key) >> shift);
    while (true) {
      const k = load<u64>(setPtr + (<usize>i << 3));
      if (k == 0) {
        store<u64>(setPtr + (<usize>i << 3), key);
        break;
      }
      if (k == key) break;
      i = (i + 1) & setMask;
    }
  }
  // The writer writes the entry of epoch e before it publishes e + 1 (both seq-cst): the entries read above are
  // intact unless it has since come round to one of them, which it does only once the epoch reads epoch + ring.
  if (atomic.load<u32>(ep) - epoch >= ring) return 0;
  const g = pod / IX_GROUP_PODS;
  for (let b: u32 = 0; b < count; b++) {
    const key = groupKey(normKey(load<u64>(keysPtr + (<usize>b << 3))), g);
    let i = <u32>(setHash(key) >> shift);
    while (true) {
      const k = load<u64>(setPtr + (<usize>i << 3));
      if (k == 0) break;
      if (k == key) return b;
      i = (i + 1) & setMask;
    }
  }
  return count;
}

/**
 * Loads both lines of the home slots of blocks [from, to) in each group of `live`, values unused. WASM has no
 * prefetch: a load the CPU must wait for stalls retirement, so loads spread one per block keep only the few
 * that fit the reorder window in flight. Issued back to back, a group's misses (and TLB walks) overlap: on a
 * cold cache a long walk costs about one miss per group instead of one per few blocks.
 */
// @ts-ignore: decorator
@inline function touchSlots (base: usize, keysPtr: usize, from: u32, to: u32, live: u64): void {
  for (let j = from; j < to; j++) {
    const block = normKey(load<u64>(keysPtr + (<usize>j << 3)));
    for (let rest = live; rest != 0; rest &= rest - 1) {
      const e = slotAt(base, homeOf(base, groupKey(block, <u32>ctz<u64>(rest))));
      load<u64>(e);
      load<u64>(e, 64);
    }
  }
}

/** touchSlots for an index of one group: the keys' own home slots. */
// @ts-ignore: decorator
@inline function touchHomeSlots (base: usize, keysPtr: usize, from: u32, to: u32): void {
  for (let j = from; j < to; j++) {
    const e = slotAt(base, homeOf(base, load<u64>(keysPtr + (<usize>j << 3))));
    load<u64>(e);
    load<u64>(e, 64);
  }
}

// @ts-ignore: decorator
@inline function record (outPtr: usize, w: u32, bits: u64, value: u32): void {
  while (bits != 0) {
    store<u32>(outPtr + ((((<usize>w) << 6) + <usize>ctz<u64>(bits)) << 2), value);
    bits &= bits - 1;
  }
}

/**
 * Reader. Walks the `n` chained block keys at `keysPtr` from block 0 and writes, per pod, how many leading
 * blocks it holds in any kind of `kindMask` (IX_COUNTS_BYTES_PER_GROUP per group at `outPtr`: u32 per pod,
 * pod p at u32 p); stops at the first block no remaining pod holds. Returns the deepest match (blocks).
 */
export function ixLongestPrefix (base: usize, keysPtr: usize, n: u32, kindMask: u32, outPtr: usize): u32 {
  return ixLongestPrefixFrom(base, keysPtr, n, kindMask, outPtr, 0xFFFFFFFF, 0, 0, 0, 0xFFFFFFFF, 0);
}

/**
 * Reader. ixLongestPrefix given that pod `hintPod` holds the first `hintFrom` blocks (in a kind of
 * `kindMask`): while no other pod is still matching, blocks below `hintFrom` are not looked up. The result is
 * ixLongestPrefix's whenever the hint is true. A session's turn knows it from its previous turn's walk: that pod
 * held that many blocks then, and it still does if its loss epoch (at IX_H_LOSS_AT, read before that walk) has
 * not moved since, as insertions only add, or up to the first of them it lost since (ixHeldSince). Then a turn
 * looks up its new blocks, not its whole prompt. A hintPod at or above the pod rows means no hint.
 *
 * Each block is looked up in every group still in play (`live`): all of them at block 0, then only those with a
 * pod still matching, so past a fleet's shared prefix a walk costs one probe per block as with one group.
 *
 * With `checkTtl`, assumed presence older than the writer's TTL at `now` (ms, the writer's clock) does not count
 * (liveKinds): the expiry sweep takes a slice per tick, and an index of 2^20 keys is swept once in ~51 s, ten
 * times the 5 s TTL of precise mode. (A hinted pod's blocks below `hintFrom` are not looked up, so not checked.)
 *
 * A second hint, `hint2Pod` holding the first `hint2From` blocks, is for a session that moved: its old host holds
 * its prefix too until those blocks expire or are evicted, so with one hint both pods match every block and the walk
 * looks every block up. With both, blocks are skipped while only vouched pods match, up to the nearest of their
 * `from`s among those still matching. Taken on an index of one group (up to 256 rows, the default); past that, only
 * the first hint is.
 */
export function ixLongestPrefixFrom (base: usize, keysPtr: usize, n: u32, kindMask: u32, outPtr: usize, hintPod: u32, hintFrom: u32, now: u32, checkTtl: u32, hint2Pod: u32, hint2From: u32): u32 {
  const groups = load<u32>(base + IX_H_GROUPS);
  const ttl = readerTtl(base, kindMask, checkTtl);
  const vo = voidsRecent(base, kindMask, now, checkTtl, ttl);
  if (groups == 1) return longestPrefixOneGroup(base, keysPtr, n, kindMask, outPtr, hintPod, hintFrom, now, ttl, vo, hint2Pod, hint2From);
  const countsBytes = <usize>groups * IX_GROUP_PODS * 4;
  memory.fill(outPtr, 0, countsBytes);
  // Pods still matching, 4 u64 words per group, after the counts.
  const alive = outPtr + countsBytes;
  memory.fill(alive, 0xFF, <usize>groups << 5);
  let live: u64 = groups >= 64 ? ~(<u64>0) : (<u64>1 << <u64>groups) - 1;
  // The hinted pod's group, word and bit (no bit when there is no hint).
  const from = hintPod < load<u32>(base + IX_H_PODS) ? min(hintFrom, n) : 0;
  const hg = hintPod / IX_GROUP_PODS;
  const hw = (hintPod % IX_GROUP_PODS) >> 6;
  const hb: u64 = from > 0 ? <u64>1 << <u64>(hintPod & 63) : 0;
  const hgBit: u64 = from > 0 ? <u64>1 << <u64>hg : 0;
  let depth: u32 = 0;
  touchSlots(base, keysPtr, 0, min(n, PREFETCH_BLOCKS), live);
  let pf: u32 = 0; // next group boundary: the group after it is touched when the walk reaches it
  let i: u32 = 0;
  while (i < n) {
    if (i < from && live == hgBit) {
      // Only the hinted pod's group is in play: is the hinted pod the only one left in it?
      const a = alive + (<usize>hg << 5);
      let others: u64 = 0;
      for (let w: u32 = 0; w < 4; w++) others |= load<u64>(a + (<usize>w << 3)) & ~(w == hw ? hb : 0);
      if (others == 0) {
        // Only the hinted pod is still matching, and it holds every block below `from`.
        i = from;
        depth = from;
        if (i >= n) break;
        touchSlots(base, keysPtr, i, min(n, i + PREFETCH_BLOCKS), live);
        pf = i;
      }
    }
    if (i == pf) {
      if (i + PREFETCH_BLOCKS < n) touchSlots(base, keysPtr, i + PREFETCH_BLOCKS, min(n, i + 2 * PREFETCH_BLOCKS), live);
      pf += PREFETCH_BLOCKS;
    }
    const block = normKey(load<u64>(keysPtr + (<usize>i << 3)));
    for (let rest = live; rest != 0; rest &= rest - 1) {
      const g = <u32>ctz<u64>(rest);
      const key = groupKey(block, g);
      let p0: u64 = 0;
      let p1: u64 = 0;
      let p2: u64 = 0;
      let p3: u64 = 0;
      while (true) {
        const t = openRead(base, key);
        if (t < 0) break;
        const e = slotAt(base, <u32>t);
        const km = liveKinds(e, kindMask, now, ttl);
        if (vo && (km & IX_MASK_ASSUMED) != 0) {
          const at = atomic.load<u32>(e + IX_E_ASSUMED_AT);
          p0 = unvoided(base, e, g << 2, 0, km, at);
          p1 = unvoided(base, e, g << 2, 1, km, at);
          p2 = unvoided(base, e, g << 2, 2, km, at);
          p3 = unvoided(base, e, g << 2, 3, km, at);
        } else {
          p0 = presence(e, 0, km);
          p1 = presence(e, 1, km);
          p2 = presence(e, 2, km);
          p3 = presence(e, 3, km);
        }
        if (atomic.load<u32>(e + IX_E_SEQ) == <u32>(t >> 32)) break;
      }
      if (i < from && g == hg) {
        if (hw == 0) p0 |= hb;
        else if (hw == 1) p1 |= hb;
        else if (hw == 2) p2 |= hb;
        else p3 |= hb;
      }
      const a = alive + (<usize>g << 5);
      const a0 = load<u64>(a);
      const a1 = load<u64>(a, 8);
      const a2 = load<u64>(a, 16);
      const a3 = load<u64>(a, 24);
      // Pods that held blocks 0..i-1 but not block i matched exactly i blocks (out is 0 for those absent at 0).
      if (i > 0) {
        const w = g << 2;
        record(outPtr, w, a0 & ~p0, i);
        record(outPtr, w + 1, a1 & ~p1, i);
        record(outPtr, w + 2, a2 & ~p2, i);
        record(outPtr, w + 3, a3 & ~p3, i);
      }
      store<u64>(a, a0 & p0);
      store<u64>(a, a1 & p1, 8);
      store<u64>(a, a2 & p2, 16);
      store<u64>(a, a3 & p3, 24);
      if (((a0 & p0) | (a1 & p1) | (a2 & p2) | (a3 & p3)) == 0) live &= ~(<u64>1 << <u64>g);
    }
    if (live == 0) return depth;
    depth = i + 1;
    i++;
  }
  for (let rest = live; rest != 0; rest &= rest - 1) {
    const g = <u32>ctz<u64>(rest);
    const a = alive + (<usize>g << 5);
    for (let w: u32 = 0; w < 4; w++) record(outPtr, (g << 2) + w, load<u64>(a + (<usize>w << 3)), depth);
  }
  return depth;
}

/**
 * ixLongestPrefixFrom for an index of one pod group (up to 256 rows, the default), its words in locals and its
 * prefetch on the keys' own home slots: the generic walk, which keeps them in the out area one group after
 * another, made a one-group walk a fifth slower than before pod groups (an in-process A/B, bench/RESULTS.md issue
 * 24); this one is as fast. Same results; the property tests run both (256 and 600 rows).
 */
/** Word `w` of a one-group presence mask with `pod`'s bit, when it is vouched for (`from` > 0); else 0. */
// @ts-ignore: decorator
@inline function podBit (pod: u32, w: u32, from: u32): u64 {
  return from > 0 && (pod >> 6) == w ? <u64>1 << <u64>(pod & 63) : 0;
}

function longestPrefixOneGroup (base: usize, keysPtr: usize, n: u32, kindMask: u32, outPtr: usize, hintPod: u32, hintFrom: u32, now: u32, ttl: u32, vo: bool, hint2Pod: u32, hint2From: u32): u32 {
  memory.fill(outPtr, 0, IX_GROUP_PODS * 4);
  let a0: u64 = ~0;
  let a1: u64 = ~0;
  let a2: u64 = ~0;
  let a3: u64 = ~0;
  // The hinted pods' bits, word by word (none for a hint not given).
  const pods = load<u32>(base + IX_H_PODS);
  const from = hintPod < pods ? min(hintFrom, n) : 0;
  const from2 = hint2Pod < pods && hint2Pod != hintPod ? min(hint2From, n) : 0;
  const h0 = podBit(hintPod, 0, from);
  const h1 = podBit(hintPod, 1, from);
  const h2 = podBit(hintPod, 2, from);
  const h3 = podBit(hintPod, 3, from);
  const g0 = podBit(hint2Pod, 0, from2);
  const g1 = podBit(hint2Pod, 1, from2);
  const g2 = podBit(hint2Pod, 2, from2);
  const g3 = podBit(hint2Pod, 3, from2);
  const fromMax = max(from, from2);
  let depth: u32 = 0;
  touchHomeSlots(base, keysPtr, 0, min(n, PREFETCH_BLOCKS));
  let pf: u32 = 0; // next group boundary: the group after it is touched when the walk reaches it
  let i: u32 = 0;
  while (i < n) {
    // Only while a hint vouches for block i (a whole walk's blocks skip this): the pods vouched for there.
    if (i < fromMax) {
      const f = i < from;
      const f2 = i < from2;
      const v0 = (f ? h0 : 0) | (f2 ? g0 : 0);
      const v1 = (f ? h1 : 0) | (f2 ? g1 : 0);
      const v2 = (f ? h2 : 0) | (f2 ? g2 : 0);
      const v3 = (f ? h3 : 0) | (f2 ? g3 : 0);
      if (((a0 & ~v0) | (a1 & ~v1) | (a2 & ~v2) | (a3 & ~v3)) == 0) {
        // Only vouched pods are still matching, and each holds every block below its own `from`: on to the nearest.
        let to = fromMax;
        if (f && ((a0 & h0) | (a1 & h1) | (a2 & h2) | (a3 & h3)) != 0) to = min(to, from);
        if (f2 && ((a0 & g0) | (a1 & g1) | (a2 & g2) | (a3 & g3)) != 0) to = min(to, from2);
        i = to;
        depth = to;
        if (i >= n) break;
        // No prefetch from here: what is left is a turn's few new blocks, mostly absent, and touching the home
        // slot of an absent key can be a page fault (a page nothing wrote yet), ~30 µs on a loaded VM.
        pf = n;
      }
    }
    if (i == pf) {
      if (i + PREFETCH_BLOCKS < n) touchHomeSlots(base, keysPtr, i + PREFETCH_BLOCKS, min(n, i + 2 * PREFETCH_BLOCKS));
      pf += PREFETCH_BLOCKS;
    }
    const key = normKey(load<u64>(keysPtr + (<usize>i << 3)));
    let p0: u64 = 0;
    let p1: u64 = 0;
    let p2: u64 = 0;
    let p3: u64 = 0;
    while (true) {
      const t = openRead(base, key);
      if (t < 0) break;
      const e = slotAt(base, <u32>t);
      const km = liveKinds(e, kindMask, now, ttl);
      if (vo && (km & IX_MASK_ASSUMED) != 0) {
        const at = atomic.load<u32>(e + IX_E_ASSUMED_AT);
        p0 = unvoided(base, e, 0, 0, km, at);
        p1 = unvoided(base, e, 0, 1, km, at);
        p2 = unvoided(base, e, 0, 2, km, at);
        p3 = unvoided(base, e, 0, 3, km, at);
      } else {
        p0 = presence(e, 0, km);
        p1 = presence(e, 1, km);
        p2 = presence(e, 2, km);
        p3 = presence(e, 3, km);
      }
      if (atomic.load<u32>(e + IX_E_SEQ) == <u32>(t >> 32)) break;
    }
    if (i < from) {
      p0 |= h0;
      p1 |= h1;
      p2 |= h2;
      p3 |= h3;
    }
    if (i < from2) {
      p0 |= g0;
      p1 |= g1;
      p2 |= g2;
      p3 |= g3;
    }
    // Pods that held blocks 0..i-1 but not block i matched exactly i blocks (out is 0 for those absent at 0).
    if (i > 0) {
      record(outPtr, 0, a0 & ~p0, i);
      record(outPtr, 1, a1 & ~p1, i);
      record(outPtr, 2, a2 & ~p2, i);
      record(outPtr, 3, a3 & ~p3, i);
    }
    a0 &= p0;
    a1 &= p1;
    a2 &= p2;
    a3 &= p3;
    if ((a0 | a1 | a2 | a3) == 0) return depth;
    depth = i + 1;
    i++;
  }
  record(outPtr, 0, a0, depth);
  record(outPtr, 1, a1, depth);
  record(outPtr, 2, a2, depth);
  record(outPtr, 3, a3, depth);
  return depth;
}
