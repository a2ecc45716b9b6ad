// The kv-events thread's drain of the record ring into the prefix index, in one call. Decoding each op into a
// JavaScript object (three BigInts) cost the thread ~1.5 µs an op — 12 ms for the 8k blocks of a 130 KB prompt —
// and stole CPU from the gateway's main thread on a 2-core machine; here an op costs an index insert.
// Caller: the index's one writer, which is also the ring's one consumer (both run on the kv-events thread).
import { ringPop, RING_OP_BYTES, RING_OP_OPCODE, RING_OP_POD, RING_OP_KEY, RING_OP_A, RING_OPCODE_ASSUMED, RING_OPCODE_TOUCH, RING_OPCODE_FORGET_POD } from './ring';
import { ixInsert, ixClearPod, ixLookup, IX_KIND_ASSUMED, IX_MASK_ALL } from './prefix-index';

/**
 * Pops up to `limit` ops, `batch` at a time through `opsPtr` (room for `batch` ops), and applies them: assumed →
 * insert as assumed at the op's time; touch → the same, for a key the index still has; forgetPod → clear the pod
 * in every kind. `lookupPtr` is IX_PRESENCE_BYTES of scratch for touch. Returns (forgotten << 32) | applied.
 */
export function ixApplyRing (ixBase: usize, ringBase: u32, opsPtr: u32, batch: u32, limit: u32, lookupPtr: usize): u64 {
  let applied: u32 = 0;
  let forgotten: u32 = 0;
  while (applied < limit) {
    const n = ringPop(ringBase, opsPtr, min<u32>(batch, limit - applied));
    if (n == 0) break;
    for (let i: u32 = 0; i < n; i++) {
      const op = <usize>opsPtr + <usize>i * RING_OP_BYTES;
      const opcode = load<u32>(op + RING_OP_OPCODE);
      const pod = load<u32>(op + RING_OP_POD);
      const key = load<u64>(op + RING_OP_KEY);
      // Times travel as f64 epoch ms; the index keeps them as u32 ms, modulo 2^32 (as the JS writer's `now >>> 0`).
      const now = <u32><i64>reinterpret<f64>(load<u64>(op + RING_OP_A));
      if (opcode == RING_OPCODE_ASSUMED) {
        ixInsert(ixBase, key, pod, IX_KIND_ASSUMED, now);
      } else if (opcode == RING_OPCODE_TOUCH) {
        if (ixLookup(ixBase, key, IX_MASK_ALL, lookupPtr) != 0) ixInsert(ixBase, key, pod, IX_KIND_ASSUMED, now);
      } else if (opcode == RING_OPCODE_FORGET_POD) {
        ixClearPod(ixBase, pod, IX_MASK_ALL);
        forgotten++;
      }
    }
    applied += n;
  }
  return (<u64>forgotten << 32) | <u64>applied;
}
