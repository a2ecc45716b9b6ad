// A session id → the 64-bit key of the session table: xxHash64 of its UTF-8 bytes, seeded apart from block keys.
import { BlockHasher } from './block-keys.js';
import type { Region } from './region.js';

/** Seed that keeps session keys out of the block-key space (ASCII "ear-sess"). */
const SESSION_SEED = 0x6561722d73657373n;
/** Seed that keeps user keys apart from session keys (ASCII "ear-user"). */
const USER_SEED = 0x6561722d75736572n;
/** Bytes of a user string hashed at a time (the scratch area holds a few KB). */
const USER_CHUNK = 1024;
const utf8 = new TextEncoder();

export class SessionKeys {
  readonly #hasher: BlockHasher;

  /** `area` is scratch owned by this thread, apart from any prompt's keys (ids are at most a few hundred bytes). */
  constructor (region: Region, area: { ptr: number; bytes: number }) {
    this.#hasher = new BlockHasher(region, area);
  }

  /** Never 0 (the tables' empty marker). */
  key (sessionId: string): bigint {
    const k = this.#hasher.hashText(sessionId, SESSION_SEED);
    return k === 0n ? 1n : k;
  }

  /** A user (the OpenAI `user` field or an API key's digest) → its key in the user usage table. Never 0. */
  userKey (user: string): bigint {
    // A client chooses the length of its `user`: a long one is hashed in chunks, each seeded with the last.
    const bytes = utf8.encode(user);
    let k = USER_SEED;
    for (let at = 0; at === 0 || at < bytes.length; at += USER_CHUNK) k = this.#hasher.hashBytes(bytes.subarray(at, at + USER_CHUNK), k);
    return k === 0n ? 1n : k;
  }
}
