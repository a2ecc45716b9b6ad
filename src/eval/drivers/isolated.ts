// A request's isolated service time: alone on an idle engine that already holds the session's prefix
// (evaluation.md, "Wall-clock amplification"). Chunked prefill of the uncached tokens, then one decode step
// per further output token at batch size 1, with the profile's step-time formula.
import { prefillTime, stepTime } from '../../engine-model/figures.js';
import type { EngineProfile } from '../../engine-model/profile.js';

export function isolatedServiceTime (p: EngineProfile, promptTokens: number, cachedTokens: number, outputTokens: number): number {
  return isolatedTtft(p, promptTokens, cachedTokens) + isolatedDecode(p, promptTokens, outputTokens);
}

/** The prefill part: chunked prefill of the uncached tokens, the first token coming with the last chunk. */
export function isolatedTtft (p: EngineProfile, promptTokens: number, cachedTokens: number): number {
  // Whole cached blocks only, and at least one prompt token is always computed (as vLLM does).
  const past = Math.min(Math.floor(cachedTokens / p.blockSize) * p.blockSize, promptTokens - 1);
  return prefillTime(p, promptTokens - past, past);
}

function isolatedDecode (p: EngineProfile, promptTokens: number, outputTokens: number): number {
  let t = 0;
  const none = [0];
  for (let k = 1; k < outputTokens; k++) t += stepTime(p.step, none, none, 0, 1, promptTokens + k);
  return t;
}
