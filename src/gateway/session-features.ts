// Per-session incremental features (issue 6 item 2): a turn whose messages extend the session's previous turn
// reuses the previous turn's tokens (IncrementalTokenizer) and the block keys of the blocks wholly inside the
// reused tokens, so it encodes and hashes only what is new. Keys are chained (key i is seeded with key i-1), so
// the kept keys plus the new blocks hashed from the last kept key equal a cold hash of the whole prompt.
//
// One instance per route worker (the pool sends a session's requests to the same worker). Bounds: the
// tokenizer's own (sessions, bytes) and at most `maxSessions` key lists of `maxKeyBytes` in all, least recently
// used evicted first; a session idle for `idleMs` (the gateway's session expiry) is dropped at the next turn of
// any session. An evicted or missing entry only costs a cold computation, never a wrong key.
import type { BlockHasher } from '../core/block-keys.js';
import { IncrementalTokenizer, type IncrementalStats } from '../tokenize/incremental.js';
import type { Tokenizer } from '../tokenize/types.js';

export interface SessionFeaturesOptions {
  maxSessions?: number;
  /** Bytes of token state (IncrementalTokenizer) over all sessions. Default 256 MiB. */
  maxTokenBytes?: number;
  /** Bytes of stored keys over all sessions (8 per block). Default 32 MiB. */
  maxKeyBytes?: number;
  /** A session idle this long is forgotten (ms). Default 30 min. */
  idleMs?: number;
  /** Clock in ms. */
  now?: () => number;
}

interface KeyState {
  seed: bigint;
  blockSize: number;
  keys: BigUint64Array;
}

export interface SessionFeaturesStats extends IncrementalStats {
  /** Blocks whose keys were taken from the previous turn, and blocks hashed. */
  reusedBlocks: number;
  hashedBlocks: number;
  keyEvictions: number;
  /** Sessions dropped for being idle longer than idleMs. */
  expired: number;
}

export interface SessionTokensAndKeys {
  tokens: Uint32Array;
  /** A copy, owned by the caller. */
  keys: BigUint64Array;
}

export class SessionFeatures {
  readonly #inc: IncrementalTokenizer;
  readonly #keys = new Map<string, KeyState>(); // insertion order = LRU order
  readonly #maxSessions: number;
  readonly #maxKeyBytes: number;
  readonly #lastSeen = new Map<string, number>(); // insertion order = time order
  readonly #idleMs: number;
  readonly #now: () => number;
  #keyBytes = 0;
  #stats = { reusedBlocks: 0, hashedBlocks: 0, keyEvictions: 0, expired: 0 };

  constructor (tokenizer: Tokenizer, opts: SessionFeaturesOptions = {}) {
    this.#maxSessions = opts.maxSessions ?? 4096;
    this.#maxKeyBytes = opts.maxKeyBytes ?? 32 * 2 ** 20;
    this.#idleMs = opts.idleMs ?? 30 * 60_000;
    this.#now = opts.now ?? (() => performance.now());
    this.#inc = new IncrementalTokenizer(tokenizer, { maxSessions: this.#maxSessions, maxBytes: opts.maxTokenBytes ?? 256 * 2 ** 20 });
  }

  /** Tokens and block keys of a rendered chat prompt (`text`, encoded without added special tokens). */
  tokensAndKeys (session: string, text: string, hasher: BlockHasher, blockSize: number, seed: bigint): SessionTokensAndKeys {
    this.#touch(session);
    const r = this.#inc.encodeText(session, text);
    const prev = this.#keys.get(session);
    if (prev !== undefined) this.#drop(session, prev);
    const count = Math.floor(r.ids.length / blockSize);
    let kept = 0;
    if (prev !== undefined && prev.seed === seed && prev.blockSize === blockSize) {
      kept = Math.min(Math.floor(r.reusedTokens / blockSize), prev.keys.length, count);
    }
    const keys = new BigUint64Array(count);
    if (kept > 0) keys.set(prev!.keys.subarray(0, kept));
    if (count > kept) {
      const from = kept === 0 ? seed : keys[kept - 1];
      keys.set(hasher.hash(r.ids.subarray(kept * blockSize, count * blockSize), blockSize, from).keys, kept);
    }
    this.#stats.reusedBlocks += kept;
    this.#stats.hashedBlocks += count - kept;
    this.#store(session, { seed, blockSize, keys });
    return { tokens: r.ids, keys: keys.slice() };
  }

  /** Records the session's use and forgets sessions idle past idleMs (and, at the bound, the least recent). */
  #touch (session: string): void {
    const now = this.#now();
    this.#lastSeen.delete(session);
    for (const [id, at] of this.#lastSeen) {
      const idle = now - at >= this.#idleMs;
      if (!idle && this.#lastSeen.size < this.#maxSessions) break;
      this.forget(id);
      if (idle) this.#stats.expired++;
    }
    this.#lastSeen.set(session, now);
  }

  #store (session: string, s: KeyState): void {
    if (s.keys.byteLength > this.#maxKeyBytes) return;
    while (this.#keys.size >= this.#maxSessions || this.#keyBytes + s.keys.byteLength > this.#maxKeyBytes) {
      const [oldest, o] = this.#keys.entries().next().value as [string, KeyState];
      this.#drop(oldest, o);
      this.#stats.keyEvictions++;
    }
    this.#keys.set(session, s);
    this.#keyBytes += s.keys.byteLength;
  }

  #drop (session: string, s: KeyState): void {
    this.#keys.delete(session);
    this.#keyBytes -= s.keys.byteLength;
  }

  /** Drops a session's state (when the session ends). */
  forget (session: string): void {
    this.#lastSeen.delete(session);
    this.#inc.forget(session);
    const s = this.#keys.get(session);
    if (s !== undefined) this.#drop(session, s);
  }

  stats (): SessionFeaturesStats {
    return { ...this.#inc.stats(), ...this.#stats };
  }
}
