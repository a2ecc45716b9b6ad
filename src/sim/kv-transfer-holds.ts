// The blocks a finished kvExport request holds for its importer (NixlConnector's delayed free, kv-transfer.md §2b):
// kept out of the free queue until the importer's pull releases them or VLLM_NIXL_ABORT_REQUEST_TIMEOUT passes.
import type { BlockPool } from './block-pool.js';

interface Held { blocks: number[]; tokens: number[]; expiry: number }

export class TransferHolds {
  readonly #pool: BlockPool;
  readonly #timeout: number;
  /** Insertion order = expiry order (one timeout for all). */
  readonly #held = new Map<string, Held>();

  constructor (pool: BlockPool, timeout: number) {
    this.#pool = pool;
    this.#timeout = timeout;
  }

  has (id: string): boolean { return this.#held.has(id); }

  /** Holds `blocks` (their references pass to the hold) and the token ids they carry, until `end` + the timeout. */
  hold (id: string, blocks: number[], tokens: number[], end: number): void {
    this.#held.set(id, { blocks, tokens, expiry: end + this.#timeout });
  }

  /** Frees a hold's blocks, last block first. False if nothing is held under that id. */
  release (id: string): boolean {
    const h = this.#held.get(id);
    if (h === undefined) return false;
    this.#held.delete(id);
    this.#pool.free(h.blocks.reverse());
    return true;
  }

  /** Token ids of the full blocks a hold keeps (what an importer pulls), or null if none is held. */
  tokens (id: string): number[] | null {
    return this.#held.get(id)?.tokens ?? null;
  }

  /** Releases the holds whose timeout passed by `now`; returns how many. */
  expire (now: number): number {
    let n = 0;
    for (const [id, h] of this.#held) {
      if (h.expiry > now) break;
      this.release(id);
      n++;
    }
    return n;
  }

  /** When the oldest hold expires; Infinity when none is held. */
  nextExpiry (): number {
    for (const h of this.#held.values()) return h.expiry;
    return Infinity;
  }

  /** Adds each held block's reference to `refs` (the engine's invariant check). */
  countRefs (refs: Int32Array): void {
    for (const h of this.#held.values()) for (const b of h.blocks) refs[b]++;
  }
}
