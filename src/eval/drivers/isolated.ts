// A request's isolated service time: alone on an idle engine that already holds the session's prefix
// (evaluation.md, "Wall-clock amplification"). Chunked prefill of the uncached tokens, then one decode step
// per further output token at batch size 1, with the profile's step-time formula.
import { stepTime, type EngineProfile } from '../../sim/profile.js';

export function isolatedServiceTime (p: EngineProfile, promptTokens: number, cachedTokens: number, outputTokens: number): number {
  return isolatedTtft(p, promptTokens, cachedTokens) + isolatedDecode(p, promptTokens, outputTokens);
}

/** The prefill part: chunked prefill of the uncached tokens, the first token coming with the last chunk. */
export function isolatedTtft (p: EngineProfile, promptTokens: number, cachedTokens: number): number {
  const bs = p.blockSize;
  // Whole cached blocks only, and at least one prompt token is always computed (as vLLM does).
  let past = Math.min(Math.floor(cachedTokens / bs) * bs, promptTokens - 1);
  let t = 0;
  const n = [0];
  const pastArr = [0];
  while (past < promptTokens) {
    n[0] = Math.min(p.maxNumBatchedTokens, promptTokens - past);
    pastArr[0] = past;
    t += stepTime(p.step, n, pastArr, 1, 0, 0);
    past += n[0];
  }
  return t;
}

function isolatedDecode (p: EngineProfile, promptTokens: number, outputTokens: number): number {
  let t = 0;
  const none = [0];
  for (let k = 1; k < outputTokens; k++) t += stepTime(p.step, none, none, 0, 1, promptTokens + k);
  return t;
}
