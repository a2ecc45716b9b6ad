// A session id → the 64-bit key of the session table: xxHash64 of its UTF-8 bytes, seeded apart from block keys.
import type { Region } from './region.js';

/** Seed that keeps session keys out of the block-key space (ASCII "ear-sess"). */
const SESSION_SEED = 0x6561722d73657373n;
const utf8 = new TextEncoder();

export class SessionKeys {
  readonly #r: Region;
  readonly #ptr: number;
  readonly #bytes: number;
  readonly #xxh64: (ptr: number, len: number, seed: bigint) => bigint;

  /** `area` is scratch owned by this thread (a slice of one is enough: ids are at most a few hundred bytes). */
  constructor (region: Region, area: { ptr: number; bytes: number }) {
    this.#r = region;
    this.#ptr = area.ptr;
    this.#bytes = area.bytes;
    this.#xxh64 = region.fn('xxh64');
  }

  /** Never 0 (the tables' empty marker). */
  key (sessionId: string): bigint {
    const b = utf8.encode(sessionId);
    if (b.length > this.#bytes) throw new RangeError(`session id of ${b.length} bytes exceeds the ${this.#bytes}-byte area`);
    this.#r.u8.set(b, this.#ptr);
    const k = BigInt.asUintN(64, this.#xxh64(this.#ptr, b.length, SESSION_SEED));
    return k === 0n ? 1n : k;
  }
}
