// Deterministic output tokens: a seeded PRNG draws "words" (token-id sequences) from a vocabulary, and each word
// emits its tokens one per step. Hosts with a tokenizer pass real words, so canned output decodes to text.

/** Default vocabulary when the host has no tokenizer: 1000 single-token words, ids 1000..1999. */
export const DEFAULT_VOCABULARY: readonly number[][] = Array.from({ length: 1000 }, (_, i) => [1000 + i]);

/** 32-bit seed from the request seed and the prompt (its length and last 64 tokens): same pair, same output. */
export function generationSeed (seed: number, prompt: ArrayLike<number>): number {
  let h = Math.imul((seed | 0) ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(prompt.length, 0xc2b2ae35);
  h ^= Math.floor(seed / 0x100000000) | 0;
  for (let i = Math.max(0, prompt.length - 64); i < prompt.length; i++) {
    h = Math.imul(h ^ prompt[i], 0x01000193);
    h ^= h >>> 15;
  }
  return h >>> 0;
}

/** mulberry32: one uint32 of state, good enough spread for picking words; returns [0, 1). */
export function nextRandom (state: { rng: number }): number {
  let t = (state.rng = (state.rng + 0x6d2b79f5) | 0);
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

export function validateVocabulary (v: readonly (readonly number[])[]): void {
  if (!Array.isArray(v) || v.length === 0) throw new RangeError('the output vocabulary must be a non-empty array of token-id sequences');
  for (const w of v) {
    if (!Array.isArray(w) || w.length === 0 || !w.every((t) => Number.isSafeInteger(t) && t >= 0)) {
      throw new RangeError('every vocabulary word must be a non-empty array of non-negative integer token ids');
    }
  }
}
