// Expands prompts to token ids. Block b of a workload seeded s becomes `blockSize` ids drawn from a PRNG
// seeded by (s, b), in [TOKEN_MIN, TOKEN_MIN + TOKEN_SPAN): clear of special tokens in every supported
// vocabulary (Llama 3 and Qwen put theirs above 128,000). A session's next prompt is its previous one's kept
// blocks (copied) plus its new blocks (expanded): the cost is the appended part, not the context. Token ids
// are Uint32Arrays: copying a 33.6k-token context is a memcpy (a number[] copy is ~10× slower, which over
// the 114M prompt tokens of the default agentic run costs seconds) and they go into WASM memory with set().
import { mix32 } from './rng.js';
import type { PromptSpec } from './types.js';

export const TOKEN_MIN = 1000;
export const TOKEN_SPAN = 30000;

/** Writes the `count` first token ids of block `block` into out[at..]. */
export function expandBlock (seed: number, block: number, blockSize: number, out: Uint32Array | number[], at: number, count = blockSize): void {
  let x = mix32(mix32(seed) ^ block) | 0;
  for (let i = 0; i < count; i++) {
    x = (x + 0x6d2b79f5) | 0; // splitmix32 stream: one hash per token
    out[at + i] = TOKEN_MIN + (mix32(x) % TOKEN_SPAN);
  }
}

/** Token ids of a standalone block list cut to `promptTokens` (a prompt with no predecessor). */
export function expandBlocks (seed: number, blocks: ArrayLike<number>, blockSize: number, promptTokens: number): Uint32Array {
  const out = new Uint32Array(promptTokens);
  for (let i = 0, at = 0; at < promptTokens; i++, at += blockSize) {
    if (i >= blocks.length) throw new RangeError(`prompt of ${promptTokens} tokens needs more than ${blocks.length} blocks of ${blockSize}`);
    expandBlock(seed, blocks[i], blockSize, out, at, Math.min(blockSize, promptTokens - at));
  }
  return out;
}

/** One session's current prompt (token ids and block ids); `advance` moves it to the session's next turn. */
export class SessionPrompt {
  tokens = new Uint32Array(0);
  blocks: number[] = [];
  readonly #seed: number;
  readonly #blockSize: number;

  constructor (seed: number, blockSize: number) {
    this.#seed = seed;
    this.#blockSize = blockSize;
  }

  /** Returns fresh arrays (callers may keep the previous ones, e.g. an engine holding a request). */
  advance (spec: PromptSpec): { tokens: Uint32Array; blocks: number[] } {
    const bs = this.#blockSize;
    const { keepBlocks, newBlocks, promptTokens } = spec;
    if (keepBlocks > this.blocks.length) throw new RangeError(`keepBlocks ${keepBlocks} > previous prompt's ${this.blocks.length} blocks`);
    if (promptTokens > (keepBlocks + newBlocks.length) * bs) throw new RangeError(`prompt of ${promptTokens} tokens exceeds its ${keepBlocks + newBlocks.length} blocks`);
    const blocks = this.blocks.slice(0, keepBlocks);
    for (let i = 0; i < newBlocks.length; i++) blocks.push(newBlocks[i]);
    // Only the previous prompt's full blocks can be copied; a kept last block that was cut is re-expanded.
    const copied = Math.min(keepBlocks, Math.floor(this.tokens.length / bs));
    const tokens = new Uint32Array(promptTokens);
    tokens.set(this.tokens.subarray(0, Math.min(copied * bs, promptTokens)));
    for (let i = copied, at = copied * bs; at < promptTokens; i++, at += bs) {
      expandBlock(this.#seed, blocks[i], bs, tokens, at, Math.min(bs, promptTokens - at));
    }
    this.tokens = tokens;
    this.blocks = blocks;
    return { tokens, blocks };
  }
}

/** The token ids of every request of a workload, for a driver: one SessionPrompt per live session, dropped
 *  after the session's last turn (an open-loop trace has thousands of sessions). Turns of a session must be
 *  asked for in order, each once. */
export class PromptSource {
  readonly #seed: number;
  readonly #blockSize: number;
  readonly #live = new Map<string, { prompt: SessionPrompt; next: number }>();

  constructor (workload: { seed: number; blockSize: number }) {
    this.#seed = workload.seed;
    this.#blockSize = workload.blockSize;
  }

  /** Sessions whose prompt is held. */
  get live (): number { return this.#live.size; }

  /** Closed loop: turn k of a session. */
  turn (session: { id: string; turns: readonly PromptSpec[] }, k: number): { tokens: Uint32Array; blocks: number[] } {
    return this.#advance(session.id, k, session.turns[k], k === session.turns.length - 1);
  }

  /** Open loop: the next request of its session. */
  request (r: PromptSpec & { sessionId: string; turn: number; final: boolean }): { tokens: Uint32Array; blocks: number[] } {
    return this.#advance(r.sessionId, r.turn, r, r.final);
  }

  #advance (id: string, k: number, spec: PromptSpec | undefined, last: boolean): { tokens: Uint32Array; blocks: number[] } {
    if (spec === undefined) throw new RangeError(`session ${id} has no turn ${k}`);
    let s = this.#live.get(id);
    if (s === undefined) { s = { prompt: new SessionPrompt(this.#seed, this.#blockSize), next: 0 }; this.#live.set(id, s); }
    if (k !== s.next) throw new Error(`session ${id}: turn ${k} asked for, expected turn ${s.next}`);
    const out = s.prompt.advance(spec);
    s.next++;
    if (last) this.#live.delete(id);
    return out;
  }
}
