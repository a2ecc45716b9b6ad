// Engine profiles: a model on a GPU, as JSON data in src/sim/profiles/NAME.json, read at run time.
//
// Formulas (all times in seconds):
// - KV bytes per token    kvBytesPerToken = 2 (K and V) × layers × kvHeads × headDim × kvDtypeBytes
// - KV capacity (blocks)  numGpuBlocks = floor((gpuCount × gpuMemoryGiB × 2^30 × gpuMemoryUtilization
//                                               − weightsGiB × 2^30 − activationReserveGiB × 2^30)
//                                              / (kvBytesPerToken × blockSize))
// - Step time             t = stepOverhead
//                           + Σ over prefill chunks (n new tokens after p computed ones):
//                               prefillPerToken · n + prefillAttnPerTokenPair · n · (p + n/2)
//                           + decodePerSeq · D + decodePerContextToken · Σ context of the D decoding requests
//   The attention term counts token pairs: token i of a chunk attends to p + i earlier tokens, Σ ≈ n·(p + n/2).
//   A decode step reads the weights once (in stepOverhead) and every decoding request's whole KV (the Σ term).
// - KV transfer           t = transferSetup + bytes / transferBytesPerSecond, bytes = tokens × kvBytesPerToken
// - Offload-store load    t = offload.setup + bytes / offload.loadBytesPerSecond (a shared LMCache/Mooncake store:
//                         a hit costs load bandwidth, not prefill); DEFAULT_OFFLOAD when a profile gives none
import { readFileSync } from 'node:fs';

export interface ModelShape {
  name: string;
  layers: number;
  kvHeads: number;
  headDim: number;
  /** 2 for BF16/FP16 KV, 1 for FP8 KV. */
  kvDtypeBytes: number;
}

export interface EngineProfile {
  name: string;
  description: string;
  /** Public measurements and documents the numbers come from, and the assumptions made. */
  sources: string[];
  model: ModelShape;
  gpu: { name: string; count: number; memoryGiB: number };
  gpuMemoryUtilization: number;
  weightsGiB: number;
  activationReserveGiB: number;
  blockSize: number;
  maxNumSeqs: number;
  maxNumBatchedTokens: number;
  maxModelLen: number;
  step: {
    stepOverhead: number;
    prefillPerToken: number;
    prefillAttnPerTokenPair: number;
    decodePerSeq: number;
    decodePerContextToken: number;
  };
  transfer: { bytesPerSecond: number; setup: number };
  /** Loading blocks from a shared offload store (remote LMCache backend, Mooncake store). Optional. */
  offload?: { loadBytesPerSecond: number; setup: number };
}

/**
 * Used when a profile has no `offload` (an assumption, like the profiles' own figures): a read from a remote store
 * over the same 400 Gb/s NIC as NIXL, but at ~15 GB/s rather than ~40, because a store read adds a lookup round
 * trip and staging through the store's CPU memory; 10 ms covers the lookup and the first chunk.
 */
export const DEFAULT_OFFLOAD: Readonly<{ loadBytesPerSecond: number; setup: number }> = Object.freeze({ loadBytesPerSecond: 1.5e10, setup: 0.01 });

/** A profile with its derived figures. */
export interface ResolvedProfile extends EngineProfile {
  kvBytesPerToken: number;
  numGpuBlocks: number;
}

export function kvBytesPerToken (m: ModelShape): number {
  return 2 * m.layers * m.kvHeads * m.headDim * m.kvDtypeBytes;
}

export function resolveProfile (p: EngineProfile, overrides: { numGpuBlocks?: number } = {}): ResolvedProfile {
  validate(p);
  const perToken = kvBytesPerToken(p.model);
  const GiB = 2 ** 30;
  const kvBytes = p.gpu.count * p.gpu.memoryGiB * GiB * p.gpuMemoryUtilization - (p.weightsGiB + p.activationReserveGiB) * GiB;
  const numGpuBlocks = overrides.numGpuBlocks ?? Math.floor(kvBytes / (perToken * p.blockSize));
  if (!Number.isInteger(numGpuBlocks) || numGpuBlocks < 1) throw new RangeError(`profile ${p.name}: no memory left for KV blocks (${numGpuBlocks})`);
  return { ...p, kvBytesPerToken: perToken, numGpuBlocks };
}

export function loadProfile (name: string): EngineProfile {
  if (!/^[a-z0-9][a-z0-9.-]*$/.test(name)) throw new RangeError(`profile name must be lower-case letters, digits, '.', '-': ${JSON.stringify(name)}`);
  const url = new URL(`../../../src/sim/profiles/${name}.json`, import.meta.url);
  let text: string;
  try {
    text = readFileSync(url, 'utf8');
  } catch {
    throw new RangeError(`unknown engine profile ${JSON.stringify(name)} (no ${url.pathname})`);
  }
  const p = JSON.parse(text) as EngineProfile;
  validate(p);
  return p;
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

export function transferTime (p: ResolvedProfile, tokens: number): number {
  return p.transfer.setup + tokens * p.kvBytesPerToken / p.transfer.bytesPerSecond;
}

export function offloadLoadTime (p: ResolvedProfile, tokens: number): number {
  const o = p.offload ?? DEFAULT_OFFLOAD;
  return o.setup + tokens * p.kvBytesPerToken / o.loadBytesPerSecond;
}

function validate (p: EngineProfile): void {
  const pos = (path: string, v: unknown, integer = false): void => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0 || (integer && !Number.isInteger(v))) {
      throw new RangeError(`profile ${p?.name}: ${path} must be a positive ${integer ? 'integer' : 'number'}, got ${JSON.stringify(v)}`);
    }
  };
  const nonneg = (path: string, v: unknown): void => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw new RangeError(`profile ${p?.name}: ${path} must be a number ≥ 0, got ${JSON.stringify(v)}`);
  };
  if (typeof p !== 'object' || p === null || typeof p.name !== 'string') throw new RangeError('profile must be an object with a name');
  if (!Array.isArray(p.sources) || p.sources.length === 0) throw new RangeError(`profile ${p.name}: sources must cite where the numbers come from`);
  for (const k of ['layers', 'kvHeads', 'headDim', 'kvDtypeBytes'] as const) pos(`model.${k}`, p.model?.[k], true);
  pos('gpu.count', p.gpu?.count, true);
  pos('gpu.memoryGiB', p.gpu?.memoryGiB);
  pos('gpuMemoryUtilization', p.gpuMemoryUtilization);
  if (p.gpuMemoryUtilization > 1) throw new RangeError(`profile ${p.name}: gpuMemoryUtilization must be ≤ 1`);
  nonneg('weightsGiB', p.weightsGiB);
  nonneg('activationReserveGiB', p.activationReserveGiB);
  for (const k of ['blockSize', 'maxNumSeqs', 'maxNumBatchedTokens', 'maxModelLen'] as const) pos(k, p[k], true);
  pos('step.stepOverhead', p.step?.stepOverhead); // > 0: every step must advance time
  for (const k of ['prefillPerToken', 'prefillAttnPerTokenPair', 'decodePerSeq', 'decodePerContextToken'] as const) nonneg(`step.${k}`, p.step?.[k]);
  pos('transfer.bytesPerSecond', p.transfer?.bytesPerSecond);
  nonneg('transfer.setup', p.transfer?.setup);
  if (p.offload !== undefined) {
    pos('offload.loadBytesPerSecond', p.offload?.loadBytesPerSecond);
    nonneg('offload.setup', p.offload?.setup);
  }
}
