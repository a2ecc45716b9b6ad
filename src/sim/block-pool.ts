// Paged KV blocks with vLLM v1 prefix caching (vllm/v1/core/block_pool.py, specs/vllm-wire.md §1.5):
// - a block is shared through its reference count; at count 0 it sits in the free queue but keeps its hash,
//   so a later request can still hit it;
// - allocation takes the least recently freed block from the queue head, and if that block is cached its hash is
//   dropped (→ BlockRemoved);
// - only full blocks are cached, under the chained digest of their tokens. One digest names at most one block
//   (vLLM may keep duplicates; a duplicate here simply stays uncached and is published by nobody).
// State lives in typed arrays indexed by block id; the free queue is an intrusive doubly-linked list.
import type { KvEvent } from '../kvevents/types.js';
import type { BlockDigest } from './block-hash.js';
import { DigestTable } from './digest-table.js';

const NIL = -1;

export class BlockPool {
  readonly numBlocks: number;
  readonly refCount: Int32Array;
  readonly #prev: Int32Array;
  readonly #next: Int32Array;
  #head = NIL;
  #tail = NIL;
  #numFree = 0;
  readonly #digest: Array<BlockDigest | null>;
  readonly #cached: DigestTable;
  /** Events since the last takeEvents(), in emission order. */
  #events: Array<KvEvent<Uint8Array>> = [];
  /** Counters since start. */
  evictions = 0;

  constructor (numBlocks: number) {
    if (!Number.isInteger(numBlocks) || numBlocks < 1) throw new RangeError(`numBlocks must be a positive integer, got ${numBlocks}`);
    this.numBlocks = numBlocks;
    this.refCount = new Int32Array(numBlocks);
    this.#prev = new Int32Array(numBlocks);
    this.#next = new Int32Array(numBlocks);
    this.#digest = new Array(numBlocks).fill(null);
    this.#cached = new DigestTable(numBlocks);
    for (let b = 0; b < numBlocks; b++) this.#pushTail(b);
  }

  get numFree (): number { return this.#numFree; }
  get numUsed (): number { return this.numBlocks - this.#numFree; }
  get numCached (): number { return this.#cached.size; }

  /** The block cached under `d`, or -1. */
  lookup (d: BlockDigest): number {
    return this.#cached.get(d);
  }

  digestOf (block: number): BlockDigest | null { return this.#digest[block]; }

  /** Takes a reference on a (cached) block, pulling it out of the free queue if nobody held it. */
  touch (block: number): void {
    if (this.refCount[block]++ === 0) this.#unlink(block);
  }

  /** Appends `n` fresh blocks to `out` (each with one reference), evicting cached ones as needed; false if too few. */
  allocate (n: number, out: number[]): boolean {
    if (n > this.#numFree) return false;
    for (let i = 0; i < n; i++) {
      const b = this.#head;
      this.#unlink(b);
      this.#evict(b);
      this.refCount[b] = 1;
      out.push(b);
    }
    return true;
  }

  /**
   * Drops one reference on each block. Callers pass a request's blocks tail first (as vLLM does), so its last
   * blocks, the least likely to be shared, are evicted first.
   */
  free (blocks: ArrayLike<number>, count = blocks.length): void {
    for (let i = 0; i < count; i++) {
      const b = blocks[i];
      const r = --this.refCount[b];
      if (r === 0) this.#pushTail(b);
      else if (r < 0) throw new Error(`block ${b} freed twice`);
    }
  }

  /** Registers a full block under its digest; false if the digest already names another block. */
  cache (block: number, d: BlockDigest): boolean {
    if (this.#digest[block] !== null) return false;
    if (!this.#cached.set(d, block)) return false;
    this.#digest[block] = d;
    return true;
  }

  emit (e: KvEvent<Uint8Array>): void { this.#events.push(e); }

  takeEvents (): Array<KvEvent<Uint8Array>> {
    const e = this.#events;
    this.#events = [];
    return e;
  }

  /** vLLM's reset_prefix_cache: only when no block is in use; drops every hash (→ AllBlocksCleared). */
  reset (): boolean {
    if (this.#numFree !== this.numBlocks) return false;
    this.#cached.clear();
    this.#digest.fill(null);
    this.#events.push({ type: 'AllBlocksCleared' });
    return true;
  }

  /** Checks the pool's invariants; throws on the first broken one (tests and debugging). */
  check (): void {
    let n = 0;
    for (let b = this.#head, prev = NIL; b !== NIL; prev = b, b = this.#next[b]) {
      if (this.#prev[b] !== prev) throw new Error(`free queue broken at ${b}`);
      if (this.refCount[b] !== 0) throw new Error(`block ${b} is free with refcount ${this.refCount[b]}`);
      if (++n > this.numBlocks) throw new Error('free queue has a cycle');
    }
    if (n !== this.#numFree) throw new Error(`free queue holds ${n} blocks, counter says ${this.#numFree}`);
    let used = 0;
    let cached = 0;
    for (let b = 0; b < this.numBlocks; b++) {
      if (this.refCount[b] < 0) throw new Error(`block ${b} has refcount ${this.refCount[b]}`);
      if (this.refCount[b] > 0) used++;
      const d = this.#digest[b];
      if (d !== null) { cached++; if (this.#cached.get(d) !== b) throw new Error(`block ${b}'s hash maps to another block`); }
    }
    if (used + n !== this.numBlocks) throw new Error(`free ${n} + used ${used} != total ${this.numBlocks}`);
    if (cached !== this.#cached.size) throw new Error(`${this.#cached.size} hashes cached, ${cached} blocks carry one`);
    for (const b of this.#cached.values()) if (this.#digest[b] === null) throw new Error(`cached hash maps to block ${b} which has another hash`);
  }

  #evict (b: number): void {
    const d = this.#digest[b];
    if (d === null) return;
    this.#cached.delete(d);
    this.#digest[b] = null;
    this.evictions++;
    this.#events.push({ type: 'BlockRemoved', blockHashes: [d], medium: 'GPU', groupIdx: null });
  }

  #pushTail (b: number): void {
    this.#prev[b] = this.#tail;
    this.#next[b] = NIL;
    if (this.#tail === NIL) this.#head = b;
    else this.#next[this.#tail] = b;
    this.#tail = b;
    this.#numFree++;
  }

  #unlink (b: number): void {
    const p = this.#prev[b];
    const n = this.#next[b];
    if (p === NIL) this.#head = n; else this.#next[p] = n;
    if (n === NIL) this.#tail = p; else this.#prev[n] = p;
    this.#numFree--;
  }
}
