// A session id → the 64-bit key of the session table: xxHash64 of its UTF-8 bytes, seeded apart from block keys.
import { BlockHasher } from './block-keys.js';
import type { Region } from './region.js';

/** Seed that keeps session keys out of the block-key space (ASCII "ear-sess"). */
const SESSION_SEED = 0x6561722d73657373n;
const utf8 = new TextEncoder();

export class SessionKeys {
  readonly #hasher: BlockHasher;

  /** `area` is scratch owned by this thread, apart from any prompt's keys (ids are at most a few hundred bytes). */
  constructor (region: Region, area: { ptr: number; bytes: number }) {
    this.#hasher = new BlockHasher(region, area);
  }

  /** Never 0 (the tables' empty marker). */
  key (sessionId: string): bigint {
    const k = this.#hasher.hashBytes(utf8.encode(sessionId), SESSION_SEED);
    return k === 0n ? 1n : k;
  }
}
