// Shared fixtures for the simulator tests: a tiny profile with round step-time coefficients, request builders,
// and a loop that steps an engine on its own clock until it is idle.
import type { EngineProfile } from '../../src/engine-model/profile.js';
import type { RequestOutput, SimRequest, StepResult } from '../../src/sim/engine-types.js';
import type { SimEngine } from '../../src/sim/engine.js';

export function tinyProfile (over: Partial<EngineProfile> = {}): EngineProfile {
  return {
    name: 'tiny',
    description: 'test profile',
    sources: ['test fixture'],
    model: { name: 'tiny', layers: 2, kvHeads: 1, headDim: 4, kvDtypeBytes: 2 },
    gpu: { name: 'none', count: 1, memoryGiB: 1 },
    gpuMemoryUtilization: 0.5,
    weightsGiB: 0,
    activationReserveGiB: 0,
    blockSize: 4,
    maxNumSeqs: 8,
    maxNumBatchedTokens: 64,
    maxModelLen: 4096,
    step: { stepOverhead: 0.01, prefillPerToken: 0.001, prefillAttnPerTokenPair: 0.00001, decodePerSeq: 0.002, decodePerContextToken: 0.0001 },
    transfer: { bytesPerSecond: 1000, setup: 0.5 },
    ...over
  };
}

export function req (id: string, prompt: number[], over: Partial<SimRequest> = {}): SimRequest {
  return {
    id,
    promptTokenIds: prompt,
    maxTokens: 8,
    minTokens: 0,
    ignoreEos: false,
    stopTokenIds: [],
    loraName: null,
    cacheSalt: null,
    seed: 7,
    arrivalTime: 0,
    ...over
  };
}

export function range (from: number, n: number): number[] {
  return Array.from({ length: n }, (_, i) => from + i);
}

export interface Drained {
  t: number;
  outputs: RequestOutput[];
  events: StepResult['kvEvents'];
  finished: Map<string, RequestOutput>;
  tokens: Map<string, number[]>;
  durations: number[];
}

/** Steps until idle (or maxSteps), checking the engine's invariants after every step. */
export function drain (e: SimEngine, t0 = 0, maxSteps = 100000): Drained {
  const d: Drained = { t: t0, outputs: [], events: [], finished: new Map(), tokens: new Map(), durations: [] };
  for (let i = 0; i < maxSteps; i++) {
    const next = e.nextStepTime(d.t);
    if (next === null) return d;
    d.t = next;
    const r = e.step(d.t);
    d.t += r.duration;
    d.durations.push(r.duration);
    d.events.push(...r.kvEvents);
    for (const o of r.outputs) {
      d.outputs.push(o);
      const tk = d.tokens.get(o.id) ?? [];
      tk.push(...o.newTokenIds);
      d.tokens.set(o.id, tk);
      if (o.finished !== null) d.finished.set(o.id, o);
    }
    e.check();
  }
  throw new Error('engine did not become idle');
}
