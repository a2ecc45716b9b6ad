// Engine profiles: a model on a GPU, as JSON data shipped in the package (src/engine-model/profiles/NAME.json),
// read at run time by the simulator (ear sim, the eval lab) and by migration's cost estimate (kvCostProfile).
// The figures derived from a profile (KV bytes per token, step, prefill and transfer times) are in figures.ts.
// - KV capacity (blocks)  numGpuBlocks = floor((gpuCount × gpuMemoryGiB × 2^30 × gpuMemoryUtilization
//                                               − weightsGiB × 2^30 − activationReserveGiB × 2^30)
//                                              / (kvBytesPerToken × blockSize))
import { readdirSync, readFileSync } from 'node:fs';
import { kvBytesPerToken } from './figures.js';

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
  /** Engine to engine (NIXL over RDMA). */
  transfer: { bytesPerSecond: number; setup: number };
  /** Loading blocks from a shared offload store (remote LMCache backend, Mooncake store); else DEFAULT_OFFLOAD. */
  offload?: { loadBytesPerSecond: number; setup: number };
}

/** A profile with its derived figures. */
export interface ResolvedProfile extends EngineProfile {
  kvBytesPerToken: number;
  numGpuBlocks: number;
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

/** The profile `ear sim` and `ear serve --demo` run, and the one the gateway's KV connector costs read by default. */
export const DEFAULT_PROFILE = 'h100-llama-3.1-8b';

/** The shipped profiles: src/engine-model/profiles in the package (three levels above dist/src/engine-model). */
const PROFILES = new URL('../../../src/engine-model/profiles/', import.meta.url);

/** Names of the shipped profiles, sorted. */
export function profileNames (): string[] {
  return readdirSync(PROFILES).filter((f) => f.endsWith('.json')).map((f) => f.slice(0, -5)).sort();
}

export function loadProfile (name: string): EngineProfile {
  if (!/^[a-z0-9][a-z0-9.-]*$/.test(name)) throw new RangeError(`profile name must be lower-case letters, digits, '.', '-': ${JSON.stringify(name)}`);
  let text: string;
  try {
    text = readFileSync(new URL(`${name}.json`, PROFILES), 'utf8');
  } catch {
    throw new RangeError(`unknown engine profile ${JSON.stringify(name)} (known: ${profileNames().join(', ')})`);
  }
  const p = JSON.parse(text) as EngineProfile;
  validate(p);
  return p;
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
