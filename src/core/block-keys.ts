// Block keys for a prompt, computed by the WASM kernels in this thread's scratch area
// (docs/architecture.md#block-keys). The keys stay in shared memory: a KeySpan (pointer + count) goes straight to
// PrefixIndex.longestPrefix / insertMany without a copy.
import type { Region } from './region.js';

/** u64 keys in shared memory: `count` keys from byte offset `ptr` (8-aligned). */
export interface KeySpan {
  readonly ptr: number;
  readonly count: number;
}

/** The keys of one prompt; valid until the next call on the BlockHasher that produced them. */
export interface BlockKeys extends KeySpan {
  /** A view of the keys in shared memory (no copy). */
  readonly keys: BigUint64Array;
}

/**
 * Separates model, LoRA adapter and cache_salt in the root seed's input. 0xFF never occurs in UTF-8, so no
 * name can contain it and ('a', 'bc') never hashes like ('ab', 'c').
 */
export const ROOT_SEPARATOR = 0xff;

/**
 * A copy of `keys` in memory of its own. Not `keys.slice()`: V8 copies a BigUint64Array's slice element by element
 * (8,200 keys, a 130 KB prompt's: 50 µs, against 8 µs for an allocation and a set).
 */
export function copyKeys (keys: BigUint64Array): BigUint64Array<ArrayBuffer> {
  const out = new BigUint64Array(keys.length);
  out.set(keys);
  return out;
}

const utf8 = new TextEncoder();

/** Models whose root seed a hasher remembers (model names are few; a bound for a client that sends many). */
const SEEDS_KEPT = 64;

/** Hashes token arrays into one scratch area. One per thread; not reentrant. */
export class BlockHasher {
  readonly #region: Region;
  readonly #ptr: number;
  readonly #bytes: number;
  readonly #xxh64: (ptr: number, len: number, seed: bigint) => bigint;
  readonly #hashBlocks: (tokensPtr: number, nTokens: number, blockSize: number, seed: bigint, outPtr: number) => number;
  /** Root seeds of models without adapter or salt, at most SEEDS_KEPT (then forgotten all at once). */
  readonly #seeds = new Map<string, bigint>();

  /** `area` defaults to a newly claimed scratch area (Region.claimScratch); pass a slice of one to share it. */
  constructor (region: Region, area: { ptr: number; bytes: number } = region.claimScratch()) {
    if (area.ptr % 8 !== 0) throw new RangeError('scratch area must be 8-byte aligned');
    this.#region = region;
    this.#ptr = area.ptr;
    this.#bytes = area.bytes;
    this.#xxh64 = region.fn('xxh64');
    this.#hashBlocks = region.fn('hashBlocks');
  }

  /**
   * Key of block -1: XXH64(seed 0) of UTF-8(model) 0xFF UTF-8(lora) 0xFF UTF-8(cacheSalt). An absent adapter
   * or salt is the empty string (no adapter and an empty adapter name are the same cache).
   */
  rootSeed (model: string, lora: string | null = null, cacheSalt: string | null = null): bigint {
    // Most requests name one of a few models: their seed is remembered (three encodes and a kernel call each).
    if (lora === null && cacheSalt === null) {
      const known = this.#seeds.get(model);
      if (known !== undefined) return known;
      const seed = this.#rootSeed(model, null, null);
      if (this.#seeds.size >= SEEDS_KEPT) this.#seeds.clear();
      this.#seeds.set(model, seed);
      return seed;
    }
    return this.#rootSeed(model, lora, cacheSalt);
  }

  #rootSeed (model: string, lora: string | null, cacheSalt: string | null): bigint {
    const parts = [utf8.encode(model), utf8.encode(lora ?? ''), utf8.encode(cacheSalt ?? '')];
    const bytes = new Uint8Array(parts[0].length + parts[1].length + parts[2].length + 2);
    let p = 0;
    for (let i = 0; i < 3; i++) {
      bytes.set(parts[i], p);
      p += parts[i].length;
      if (i < 2) bytes[p++] = ROOT_SEPARATOR;
    }
    return this.hashBytes(bytes, 0n);
  }

  /**
   * XXH64 of UTF-8(`text`) with `seed`: hashBytes(utf8.encode(text), seed), encoded straight into the scratch area
   * (no array a call: a session id is hashed for every request). Text that does not fit throws as hashBytes does.
   */
  hashText (text: string, seed: bigint): bigint {
    this.#text ??= new Uint8Array(this.#region.memory.buffer, this.#ptr, this.#bytes);
    const { read, written } = utf8.encodeInto(text, this.#text);
    if (read !== text.length) return this.hashBytes(utf8.encode(text), seed);
    return BigInt.asUintN(64, this.#xxh64(this.#ptr, written, seed));
  }

  /** The scratch area as bytes, for hashText (made once: the region's memory never grows). */
  #text: Uint8Array | undefined;

  /** XXH64 of `bytes` with `seed`, computed in this hasher's scratch area. */
  hashBytes (bytes: Uint8Array, seed: bigint): bigint {
    if (bytes.length > this.#bytes) throw new RangeError(`${bytes.length} bytes do not fit the ${this.#bytes}-byte scratch area`);
    this.#region.u8.set(bytes, this.#ptr);
    return BigInt.asUintN(64, this.#xxh64(this.#ptr, bytes.length, seed));
  }

  /**
   * Keys of every full block of `tokens` (u32 ids), chained from `seed` (a root seed, or the key of the block
   * before the first one). Prompts longer than the scratch area are hashed in chunks of whole blocks; only the
   * keys must fit (8 bytes per block, plus room for one block of tokens), else RangeError.
   */
  hash (tokens: Uint32Array | readonly number[], blockSize: number, seed: bigint): BlockKeys {
    if (!Number.isInteger(blockSize) || blockSize < 1) throw new RangeError(`block size must be a positive integer, got ${blockSize}`);
    const count = Math.floor(tokens.length / blockSize);
    const keyBytes = Math.ceil((count * 8) / 64) * 64;
    const chunk = Math.floor((this.#bytes - keyBytes) / 4 / blockSize) * blockSize;
    if (count > 0 && chunk < blockSize) {
      throw new RangeError(`${count} blocks do not fit the ${this.#bytes}-byte scratch area (raise scratchBytes)`);
    }
    const u32 = this.#region.u32;
    const tokPtr = this.#ptr + keyBytes;
    let prev = BigInt.asUintN(64, seed);
    for (let done = 0; done < count * blockSize; done += chunk) {
      const n = Math.min(chunk, count * blockSize - done);
      copyTokens(u32, tokPtr >>> 2, tokens, done, n);
      const wrote = this.#hashBlocks(tokPtr, n, blockSize, prev, this.#ptr + (done / blockSize) * 8);
      prev = this.#region.u64[(this.#ptr >>> 3) + done / blockSize + wrote - 1];
    }
    return { ptr: this.#ptr, count, keys: new BigUint64Array(this.#region.memory.buffer, this.#ptr, count) };
  }
}

function copyTokens (u32: Uint32Array, at: number, tokens: Uint32Array | readonly number[], from: number, n: number): void {
  if (tokens instanceof Uint32Array) {
    u32.set(tokens.subarray(from, from + n), at);
    return;
  }
  for (let i = 0; i < n; i++) {
    const t = tokens[from + i];
    if (!(Number.isInteger(t) && t >= 0 && t <= 0xffffffff)) throw new RangeError(`token ${from + i} is not a u32 id: ${t}`);
    u32[at + i] = t;
  }
}
