// What an engine profile says a piece of work costs, one formula each, for the simulator's engine (step time,
// KV transfers, offload-store loads), the lab's ideal (isolated) times and migration's connector choice.
// All times in seconds.
// - KV bytes per token    2 (K and V) × layers × kvHeads × headDim × kvDtypeBytes
// - Step time             stepOverhead
//                           + Σ over prefill chunks (n new tokens after p computed ones):
//                               prefillPerToken · n + prefillAttnPerTokenPair · n · (p + n/2)
//                           + decodePerSeq · D + decodePerContextToken · Σ context of the D decoding requests
//   The attention term counts token pairs: token i of a chunk attends to p + i earlier tokens, Σ ≈ n·(p + n/2).
//   A decode step reads the weights once (in stepOverhead) and every decoding request's whole KV (the Σ term).
// - Prefill alone         the steps of n new tokens after p cached ones in chunks of maxNumBatchedTokens, nothing
//                         else running: ⌈n / chunk⌉ · stepOverhead + prefillPerToken · n
//                         + prefillAttnPerTokenPair · n · (p + n/2) (the chunks' pair counts sum to exactly that)
// - KV transfer           transfer.setup + bytes / transfer.bytesPerSecond, bytes = tokens × KV bytes per token
// - Offload-store load    offload.setup + bytes / offload.loadBytesPerSecond (a shared LMCache/Mooncake store:
//                         a hit costs load bandwidth, not prefill); DEFAULT_OFFLOAD when a profile gives none
import type { EngineProfile, ModelShape } from './profile.js';

/**
 * The offload store of a profile that names none (an assumption, like the profiles' own figures, and the same
 * as theirs): a read from a remote store over the same 400 Gb/s NIC as NIXL, but at ~15 GB/s rather than ~40,
 * because a store read adds a lookup round trip and staging through the store's CPU memory; 10 ms covers the
 * lookup and the first chunk.
 */
export const DEFAULT_OFFLOAD: Readonly<{ loadBytesPerSecond: number; setup: number }> = Object.freeze({ loadBytesPerSecond: 1.5e10, setup: 0.01 });

export function kvBytesPerToken (m: ModelShape): number {
  return 2 * m.layers * m.kvHeads * m.headDim * m.kvDtypeBytes;
}

/** Seconds one step takes for the given prefill chunks and decoding requests (the formula above). */
export function stepTime (s: EngineProfile['step'], prefillNew: ArrayLike<number>, prefillPast: ArrayLike<number>, numPrefill: number,
  numDecode: number, decodeContext: number): number {
  let t = s.stepOverhead + s.decodePerSeq * numDecode + s.decodePerContextToken * decodeContext;
  for (let i = 0; i < numPrefill; i++) {
    const n = prefillNew[i];
    t += s.prefillPerToken * n + s.prefillAttnPerTokenPair * n * (prefillPast[i] + n / 2);
  }
  return t;
}

/** Seconds to prefill `tokens` new tokens after `past` cached ones on an engine with nothing else to do. */
export function prefillTime (p: EngineProfile, tokens: number, past = 0): number {
  const n = Math.max(0, tokens);
  const s = p.step;
  return Math.ceil(n / p.maxNumBatchedTokens) * s.stepOverhead + s.prefillPerToken * n + s.prefillAttnPerTokenPair * n * (past + n / 2);
}

/** Seconds to move `tokens` of KV from one engine to another. */
export function transferTime (p: EngineProfile, tokens: number): number {
  return p.transfer.setup + tokens * kvBytesPerToken(p.model) / p.transfer.bytesPerSecond;
}

/** Seconds to load `tokens` of KV from the shared offload store. */
export function offloadLoadTime (p: EngineProfile, tokens: number): number {
  const o = p.offload ?? DEFAULT_OFFLOAD;
  return o.setup + tokens * kvBytesPerToken(p.model) / o.loadBytesPerSecond;
}
