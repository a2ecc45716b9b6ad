// A data-plane thread's block keys to the owner through shared memory (layout, protocol and bound:
// asm/key-ring.ts): the thread writes them (KeyRingWriter), its submit or route message names where, and the main
// thread copies them out when the message arrives (KeyRingReader).
import type { Region } from '../core/region.js';
import { copyKeys } from '../core/block-keys.js';

/** Where a request's keys are in its thread's key ring. */
export interface KeysAt {
  at: number;
  n: number;
}

interface Geometry {
  capacity: number;
  mask: number;
  /** Index in region.u32 of `written` and `freed`; index in region.u64 of the first slot and of `spilled`. */
  written: number;
  freed: number;
  slots: number;
  spilled: number;
}

function geometry (region: Region, base: number): Geometry {
  const capacity = region.u32[(base + region.const('KR_H_CAPACITY')) >>> 2];
  return {
    capacity,
    mask: capacity - 1,
    written: (base + region.const('KR_H_WRITTEN')) >>> 2,
    freed: (base + region.const('KR_H_FREED')) >>> 2,
    slots: (base + region.const('KR_HEADER_BYTES')) >>> 3,
    spilled: (base + region.const('KR_H_SPILLED')) >>> 3
  };
}

/** The data-plane thread's side: the only writer. */
export class KeyRingWriter {
  readonly base: number;
  readonly #region: Region;
  readonly #g: Geometry;
  #written = 0;

  /** Lays out a ring in [base, base + bytes) (a scratch area the thread claimed). */
  constructor (region: Region, base: number, bytes: number) {
    this.#region = region;
    this.base = base;
    region.fn<(b: number, n: number) => number>('keyRingInit')(base, bytes);
    this.#g = geometry(region, base);
  }

  /** Writes `keys`; null when they do not fit (the caller sends them in its message; counted in `spilled`). */
  put (keys: BigUint64Array): KeysAt | null {
    const n = keys.length;
    if (n === 0) return { at: this.#written, n: 0 };
    const { capacity, mask } = this.#g;
    const u32 = this.#region.u32;
    let at = this.#written;
    // Contiguous, so the reader copies one range: past the end, the rest of the lap is skipped.
    const room = capacity - (at & mask);
    if (n > room) at = (at + room) >>> 0;
    // The live keys are [freed, written): the new ones may not reach their slots a lap on (an empty ring takes any n ≤ capacity).
    const freed = Atomics.load(u32, this.#g.freed);
    if (n > capacity || (freed !== this.#written && ((at + n - freed) >>> 0) > capacity)) {
      Atomics.add(this.#region.u64, this.#g.spilled, 1n);
      return null;
    }
    this.#region.u64.set(keys, this.#g.slots + (at & mask));
    this.#written = (at + n) >>> 0;
    Atomics.store(u32, this.#g.written, this.#written);
    return { at, n };
  }

  /** Requests whose keys went by message because the ring was full. */
  get spilled (): number {
    return Number(Atomics.load(this.#region.u64, this.#g.spilled));
  }
}

/** Keys in one chunk of KeyRingReader.take's copies (16 KB): a 16 KB turn's 256–500 blocks go in chunks. */
export const TAKE_CHUNK_KEYS = 2048;

/** The main thread's side: the only reader of one thread's ring. */
export class KeyRingReader {
  readonly #region: Region;
  readonly #g: Geometry;
  /** The chunk small key sets are copied into, and how much of it is used. */
  #chunk = new BigUint64Array(0);
  #used = 0;

  constructor (region: Region, base: number) {
    this.#region = region;
    this.#g = geometry(region, base);
  }

  /**
   * A copy of the keys at `k` (their slots are free for the writer once this returns). A request's keys live as
   * long as its placement. Copied into views of a shared chunk, not each into an array of its own: a typed
   * array's own buffer costs ~3.5 µs to allocate (zeroed, counted as external memory, collected with the
   * sweep of array buffers), more than the copy itself, and it was an eighth of the owner's time on a 16 KB session turn
   * (bench/owner-ceiling.ts). A chunk stays alive while any view of it does: a placement pins at most
   * TAKE_CHUNK_KEYS × 8 bytes (16 KB), so the keys of N placements in flight hold at most N × 16 KB where they held
   * N × 4 KB at most (keys up to a quarter chunk). Keys above a quarter chunk get their own array, whose cost their
   * copy outweighs.
   */
  take (k: KeysAt): BigUint64Array {
    const start = this.#g.slots + (k.at & this.#g.mask);
    const from = this.#region.u64.subarray(start, start + k.n);
    let keys: BigUint64Array;
    if (k.n > TAKE_CHUNK_KEYS / 4) keys = copyKeys(from);
    else {
      if (this.#used + k.n > this.#chunk.length) {
        this.#chunk = new BigUint64Array(TAKE_CHUNK_KEYS);
        this.#used = 0;
      }
      keys = this.#chunk.subarray(this.#used, this.#used + k.n);
      this.#used += k.n;
      keys.set(from);
    }
    Atomics.store(this.#region.u32, this.#g.freed, (k.at + k.n) >>> 0);
    return keys;
  }
}
