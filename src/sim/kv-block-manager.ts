// The engine core's KV block manager (vLLM's KVCacheManager over its BlockPool): a request's prefix-cache hits,
// the blocks its scheduled tokens need, the hashing and caching of the blocks those tokens fill (→ BlockStored),
// and freeing. With an offload store, it also lists the blocks each step computes, for the engine to save.
import type { BlockStored } from '../kvevents/types.js';
import { blockExtraKeys, type BlockDigest, type BlockHasher } from './block-hash.js';
import type { BlockPool } from './block-pool.js';
import { tokenSlice, type Req } from './engine-request.js';

export class KvBlockManager {
  readonly blockSize: number;
  readonly hasher: BlockHasher;
  readonly pool: BlockPool;
  /** Whether computed blocks are saved to an offload store (then toSave lists them). */
  readonly #saves: boolean;
  /** Digests of the blocks this step computes, saved to the store with the step's end time. */
  toSave: BlockDigest[] = [];
  /** The cached blocks the last lookup() found (scratch, reused). */
  #hitBlocks: number[] = [];

  constructor (hasher: BlockHasher, pool: BlockPool, saves: boolean) {
    this.blockSize = hasher.blockSize;
    this.hasher = hasher;
    this.pool = pool;
    this.#saves = saves;
  }

  /** Longest run of cached leading blocks, leaving at least one prompt token to compute (as vLLM). */
  lookup (q: Req): number {
    const maxBlocks = Math.floor((q.numPrompt + q.out.length - 1) / this.blockSize);
    this.#extendDigests(q, maxBlocks);
    const hb = this.#hitBlocks;
    hb.length = 0;
    for (let i = 0; i < maxBlocks; i++) {
      const b = this.pool.lookup(q.digests[i]);
      if (b < 0) break;
      hb.push(b);
    }
    return hb.length;
  }

  /**
   * Gives `q` the blocks for numComputed + hits·blockSize + numNew tokens (hits = the leading cached blocks
   * found by lookup(), taken by reference), then caches the blocks those tokens fill. False if too few blocks.
   */
  allocate (q: Req, numNew: number, hits: number): boolean {
    const bs = this.blockSize;
    const total = q.numComputed + hits * bs + numNew;
    const need = Math.ceil(total / bs) - q.blocks.length - hits;
    if (!this.#takeHits(q, hits, need)) return false;
    q.numCachedBlocks += hits;
    q.numComputed += hits * bs;
    if (need > 0) this.pool.allocate(need, q.blocks);
    const from = q.numCachedBlocks;
    this.cacheFullBlocks(q, total);
    // The blocks these scheduled tokens fill are computed by this step (hits and loads were computed elsewhere).
    if (this.#saves) for (let i = from; i < q.numCachedBlocks; i++) this.toSave.push(q.digests[i]);
    return true;
  }

  /** Gives `q` `numBlocks` blocks (the `hits` cached ones by reference) for KV to land in, caching none yet. */
  allocateNoCache (q: Req, numBlocks: number, hits: number): boolean {
    const need = numBlocks - hits;
    if (!this.#takeHits(q, hits, need)) return false;
    q.numCachedBlocks = hits;
    this.pool.allocate(need, q.blocks);
    return true;
  }

  /** Takes q's blocks out of this step's saves (it is being preempted: the step will not compute them). */
  unsave (q: Req): void {
    if (this.#saves && this.toSave.length > 0) {
      const mine = new Set(q.digests);
      this.toSave = this.toSave.filter((d) => !mine.has(d));
    }
  }

  /** Frees a request's blocks, last block first (so they are evicted first). */
  free (q: Req): void {
    this.pool.free(q.blocks.reverse());
    q.blocks = [];
    q.numCachedBlocks = 0;
  }

  /** Caches the blocks that `numTokens` scheduled tokens fill; one BlockStored per run of newly cached blocks. */
  cacheFullBlocks (q: Req, numTokens: number): void {
    const bs = this.blockSize;
    const full = Math.floor(numTokens / bs);
    const from = q.numCachedBlocks;
    if (full <= from) return;
    this.#extendDigests(q, full);
    let run = -1;
    for (let i = from; i <= full; i++) {
      const ok = i < full && this.pool.cache(q.blocks[i], q.digests[i]);
      if (ok && run < 0) run = i;
      else if (!ok && run >= 0) { this.#emitStored(q, run, i); run = -1; }
    }
    q.numCachedBlocks = full;
  }

  /**
   * Takes the `hits` cached blocks found by lookup() into q, if the pool can also supply `need` fresh blocks
   * (a hit block with no other holder sits in the free queue, so taking it uses up a free block too).
   */
  #takeHits (q: Req, hits: number, need: number): boolean {
    let evictableHits = 0;
    for (let i = 0; i < hits; i++) if (this.pool.refCount[this.#hitBlocks[i]] === 0) evictableHits++;
    if (need + evictableHits > this.pool.numFree) return false;
    for (let i = 0; i < hits; i++) {
      this.pool.touch(this.#hitBlocks[i]);
      q.blocks.push(this.#hitBlocks[i]);
    }
    return true;
  }

  /** Hashes the request's blocks up to `numBlocks` (prompt and generated tokens), reusing those it has. */
  #extendDigests (q: Req, numBlocks: number): void {
    const bs = this.blockSize;
    const d = q.digests;
    for (let i = d.length; i < numBlocks; i++) {
      const extra = i === 0 ? blockExtraKeys(0, q.r.loraName, q.r.cacheSalt) : q.extraLora;
      const parent = i === 0 ? null : d[i - 1];
      const start = i * bs;
      if (start + bs <= q.numPrompt) d.push(this.hasher.hashBlock(parent, q.prompt, start, extra));
      else d.push(this.hasher.hashBlock(parent, tokenSlice(q, start, start + bs), 0, extra));
    }
  }

  #emitStored (q: Req, from: number, to: number): void {
    const bs = this.blockSize;
    let extraKeys: Array<unknown[] | null> | null = null;
    if (q.r.loraName !== null || (q.r.cacheSalt !== null && from === 0)) {
      extraKeys = [];
      for (let i = from; i < to; i++) extraKeys.push(blockExtraKeys(i, q.r.loraName, q.r.cacheSalt));
    }
    const e: BlockStored<Uint8Array> = {
      type: 'BlockStored',
      blockHashes: q.digests.slice(from, to),
      parentBlockHash: from === 0 ? null : q.digests[from - 1],
      tokenIds: tokenSlice(q, from * bs, to * bs),
      blockSize: bs,
      loraId: null,
      medium: 'GPU',
      loraName: q.r.loraName,
      extraKeys,
      groupIdx: null
    };
    this.pool.emit(e);
  }
}
