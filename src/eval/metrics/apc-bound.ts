// Upper bounds of the automatic prefix cache hit rate: the hits of one infinite cache that sees every request
// in the order sent (any earlier request may have left the prefix), and of the same cache restricted to reuse
// within a session (only the session's own earlier requests count). Full blocks only, as engines cache them.

export class ApcBound {
  readonly #blockSize: number;
  readonly #seen = new Set<number>();
  readonly #seenBy = new Map<string, Set<number>>();

  constructor (blockSize: number) {
    if (!(Number.isInteger(blockSize) && blockSize > 0)) throw new RangeError(`blockSize must be an integer > 0, got ${blockSize}`);
    this.#blockSize = blockSize;
  }

  /** Tokens each bound would serve from cache for this prompt; then remembers its full blocks. */
  observe (session: string, blocks: ArrayLike<number>, promptTokens: number): { all: number; intra: number } {
    const bs = this.#blockSize;
    const full = Math.min(blocks.length, Math.floor(promptTokens / bs));
    let mine = this.#seenBy.get(session);
    if (mine === undefined) { mine = new Set(); this.#seenBy.set(session, mine); }
    let all = 0;
    while (all < full && this.#seen.has(blocks[all])) all++;
    let intra = 0;
    while (intra < full && mine.has(blocks[intra])) intra++;
    // The hit prefixes are in the sets already.
    for (let i = all; i < full; i++) this.#seen.add(blocks[i]);
    for (let i = intra; i < full; i++) mine.add(blocks[i]);
    return { all: all * bs, intra: intra * bs };
  }
}
