// A shared KV offload store (kv-transfer.md §3 and §6b: LMCache with a remote backend, or Mooncake store): engines
// of one model save every full block they compute under its chained block digest, and any engine loads a prompt's
// prefix back instead of prefilling it. Digests are identical across engines with the same block size, model and
// hash seed (LMCache needs PYTHONHASHSEED fixed for the same reason), so the digest is the whole key.
// Bounded to `capacity` blocks with LRU eviction: slots live in typed arrays with an intrusive doubly-linked list
// (head = least recently used), and a DigestTable maps a digest to its slot.
import type { BlockDigest } from './block-hash.js';
import { DigestTable } from './digest-table.js';

/**
 * What an engine needs from an offload tier. Both calls are synchronous (the engine core has no I/O): the
 * in-process OffloadStore answers them itself; a remote client answers from what it fetched before the request.
 */
export interface OffloadTier {
  /**
   * How many leading blocks of `digests` (from block 0, at most `maxBlocks`) the store holds at host time `now`.
   * From block 0 because LMCache matches a prompt's prefix from its first token.
   */
  lookup (digests: readonly BlockDigest[], maxBlocks: number, now: number): number;
  /** Saves blocks an engine computed; they become visible at `readyAt`, the end of the step computing them. */
  save (digests: readonly BlockDigest[], readyAt: number): void;
}

export interface OffloadStoreStats {
  capacity: number;
  size: number;
  /** Blocks newly inserted by save(). */
  stores: number;
  lookups: number;
  /** Blocks reported present by lookups. */
  hits: number;
  evictions: number;
}

const NIL = -1;

export class OffloadStore implements OffloadTier {
  readonly capacity: number;
  readonly #table: DigestTable;
  readonly #digest: Array<BlockDigest | null>;
  readonly #readyAt: Float64Array;
  readonly #prev: Int32Array;
  readonly #next: Int32Array;
  #head = NIL;
  #tail = NIL;
  #size = 0;
  stores = 0;
  lookups = 0;
  hits = 0;
  evictions = 0;

  constructor (capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`offload store capacity must be a positive integer of blocks, got ${capacity}`);
    this.capacity = capacity;
    this.#table = new DigestTable(capacity);
    this.#digest = new Array(capacity).fill(null);
    this.#readyAt = new Float64Array(capacity);
    this.#prev = new Int32Array(capacity);
    this.#next = new Int32Array(capacity);
  }

  get size (): number { return this.#size; }

  /** True if the store holds `d` (visible at `now`), without touching its recency. */
  has (d: BlockDigest, now = Infinity): boolean {
    const s = this.#table.get(d);
    return s >= 0 && this.#readyAt[s] <= now;
  }

  lookup (digests: readonly BlockDigest[], maxBlocks: number, now: number): number {
    this.lookups++;
    const n = Math.min(maxBlocks, digests.length);
    let i = 0;
    for (; i < n; i++) {
      const s = this.#table.get(digests[i]);
      if (s < 0 || this.#readyAt[s] > now) break;
      // A hit is about to be read: it becomes the most recently used.
      this.#unlink(s);
      this.#pushTail(s);
    }
    this.hits += i;
    return i;
  }

  save (digests: readonly BlockDigest[], readyAt: number): void {
    for (const d of digests) {
      let s = this.#table.get(d);
      if (s >= 0) {
        // Already stored (another engine computed it first): keep the earlier time, refresh recency.
        this.#unlink(s);
        this.#pushTail(s);
        continue;
      }
      if (this.#size < this.capacity) {
        s = this.#size++;
      } else {
        s = this.#head;
        this.#unlink(s);
        this.#table.delete(this.#digest[s]!);
        this.evictions++;
      }
      this.#table.set(d, s);
      this.#digest[s] = d;
      this.#readyAt[s] = readyAt;
      this.#pushTail(s);
      this.stores++;
    }
  }

  stats (): OffloadStoreStats {
    return { capacity: this.capacity, size: this.#size, stores: this.stores, lookups: this.lookups, hits: this.hits, evictions: this.evictions };
  }

  /** Checks the list and table agree (tests). */
  check (): void {
    let n = 0;
    for (let s = this.#head, prev = NIL; s !== NIL; prev = s, s = this.#next[s]) {
      if (this.#prev[s] !== prev) throw new Error(`LRU list broken at slot ${s}`);
      if (this.#table.get(this.#digest[s]!) !== s) throw new Error(`slot ${s}'s digest maps elsewhere`);
      if (++n > this.capacity) throw new Error('LRU list has a cycle');
    }
    if (n !== this.#size || this.#table.size !== this.#size) throw new Error(`LRU holds ${n}, table ${this.#table.size}, size ${this.#size}`);
  }

  #pushTail (s: number): void {
    this.#prev[s] = this.#tail;
    this.#next[s] = NIL;
    if (this.#tail === NIL) this.#head = s;
    else this.#next[this.#tail] = s;
    this.#tail = s;
  }

  #unlink (s: number): void {
    const p = this.#prev[s];
    const n = this.#next[s];
    if (p === NIL) this.#head = n; else this.#next[p] = n;
    if (n === NIL) this.#tail = p; else this.#prev[n] = p;
  }
}
