// The kv-events thread's drain of the record ring into the prefix index, in one call. Decoding each op into a
// JavaScript object (three BigInts) cost the thread ~1.5 µs an op — 12 ms for the 8k blocks of a 130 KB prompt —
// and stole CPU from the gateway's main thread on a 2-core machine; here an op costs an index insert.
// Caller: the index's one writer, which is also the ring's one consumer (both run on the kv-events thread).
//
// Leases: an op whose lease (RING_OP_LEASE) is not its pod row's lease now (podsLease) was decided for a
// backend that has since left the row: it is dropped, not applied, and counted in RA_OUT_STALE. The row's
// lease is read when the op is applied, so the drop holds however late the op arrives; the pod table's writer
// bumps the lease before it asks for the row's purge, so every op of the old lease is either applied before
// the purge (and purged with the rest) or dropped after it.
//
// At the bound: `limit` ops per call at most (the rest stay on the ring for the next call).
import { ringPop, RING_OP_BYTES, RING_OP_OPCODE, RING_OP_POD, RING_OP_KEY, RING_OP_A, RING_OP_LEASE, RING_OPCODE_ASSUMED, RING_OPCODE_TOUCH, RING_OPCODE_FORGET_POD } from './ring';
import { ixInsert, ixClearPod, ixLookup, ixTouchHome, IX_KIND_ASSUMED, IX_MASK_ALL } from './prefix-index';
import { podsLease } from './pod-table';

// ixApplyRing's counts (u32 each, at `countsPtr`), for this call only.
export const RA_OUT_APPLIED: u32 = 0;    // ops applied
export const RA_OUT_FORGOTTEN: u32 = 4;  // of them, forgetPod ops
export const RA_OUT_STALE: u32 = 8;      // ops dropped: their lease is not their pod row's lease now
export const RA_OUT_BYTES: u32 = 16;

/** Ops whose index slots are touched together before they are applied (ixTouchHome). */
const TOUCH_AHEAD: u32 = 32;

/**
 * Pops up to `limit` ops, `batch` at a time through `opsPtr` (room for `batch` ops), and applies those whose
 * lease is their pod row's lease in the pod table at `podsBase` (the others are dropped): assumed → insert as
 * assumed at the op's time; touch → the same, for a key the index still has; forgetPod → clear the pod in
 * every kind. `lookupPtr` is scratch for touch (IX_PRESENCE_BYTES_PER_GROUP per pod group); `countsPtr`
 * receives RA_OUT_BYTES of counts. Returns how many ops it took off the ring (applied + stale).
 */
export function ixApplyRing (ixBase: usize, ringBase: u32, podsBase: u32, opsPtr: u32, batch: u32, limit: u32, lookupPtr: usize, countsPtr: usize): u32 {
  let taken: u32 = 0;
  let forgotten: u32 = 0;
  let stale: u32 = 0;
  while (taken < limit) {
    const n = ringPop(ringBase, opsPtr, min<u32>(batch, limit - taken));
    if (n == 0) break;
    for (let i: u32 = 0; i < n; i++) {
      // A turn's ops are thousands of keys spread over the whole index: touch the next window's home slots first.
      if (i % TOUCH_AHEAD == 0) {
        const end = min<u32>(n, i + TOUCH_AHEAD);
        for (let j = i; j < end; j++) {
          const o = <usize>opsPtr + <usize>j * RING_OP_BYTES;
          if (load<u32>(o + RING_OP_OPCODE) != RING_OPCODE_FORGET_POD) ixTouchHome(ixBase, load<u64>(o + RING_OP_KEY), load<u32>(o + RING_OP_POD));
        }
      }
      const op = <usize>opsPtr + <usize>i * RING_OP_BYTES;
      const opcode = load<u32>(op + RING_OP_OPCODE);
      const pod = load<u32>(op + RING_OP_POD);
      if (load<u32>(op + RING_OP_LEASE) != podsLease(podsBase, pod)) {
        stale++;
        continue;
      }
      const key = load<u64>(op + RING_OP_KEY);
      // Times travel as f64 epoch ms; the index keeps them as u32 ms, modulo 2^32 (as the JS writer's `now >>> 0`).
      const now = <u32><i64>reinterpret<f64>(load<u64>(op + RING_OP_A));
      if (opcode == RING_OPCODE_ASSUMED) {
        ixInsert(ixBase, key, pod, IX_KIND_ASSUMED, now);
      } else if (opcode == RING_OPCODE_TOUCH) {
        if (ixLookup(ixBase, key, IX_MASK_ALL, lookupPtr, 0, 0) != 0) ixInsert(ixBase, key, pod, IX_KIND_ASSUMED, now);
      } else if (opcode == RING_OPCODE_FORGET_POD) {
        ixClearPod(ixBase, pod, IX_MASK_ALL);
        forgotten++;
      }
    }
    taken += n;
  }
  store<u32>(countsPtr + RA_OUT_APPLIED, taken - stale);
  store<u32>(countsPtr + RA_OUT_FORGOTTEN, forgotten);
  store<u32>(countsPtr + RA_OUT_STALE, stale);
  return taken;
}
