// kv-load: NVIDIA Dynamo's KV router cost (github.com/ai-dynamo/dynamo, lib/llm/src/kv_router/scheduler.rs,
// DefaultWorkerSelector): for each pod
//   cost = prefillScale · max(prompt blocks − cached blocks, 0) + decode blocks
// and the pod of least cost (temperature 0: ties at random), or a softmax sample over the costs normalised by
// their range, p ∝ exp(−(cost − min) / ((max − min) · temperature)), uniform when all costs are equal.
//   prompt blocks  promptTokens / blockSize (fractional, as Dynamo's prefill tokens / block size)
//   cached blocks  GPU-resident matched blocks + offloadCredit · matched blocks held only on an offload tier
//                  (Dynamo weighs host/disk overlap into an "effective" overlap the same way)
//   decode blocks  Dynamo counts the blocks of the worker's active sequences, which it tracks itself; our view
//                  carries the engine's own count instead: kvUsage · kvCapacityBlocks (blocks held by running
//                  requests; 0 when never scraped or capacity unknown) plus the prompt tokens sent but not yet
//                  computed (pendingPrefill / blockSize), which will hold blocks once prefilled.
import { NoCandidateError, type PodView, type Policy } from '../policy.js';
import { indexOfMinRandom, sampleWeighted } from './pick.js';
import { num, readKnobs } from './knobs.js';

export const KV_LOAD_DEFAULTS = {
  // Dynamo --kv-overlap-score-weight, default 1.0 (0 ignores the cache: pure load balancing).
  prefillScale: 1,
  // Dynamo --router-temperature, default 0 (deterministic least cost).
  temperature: 0,
  // Ours: a block on CPU/disk saves this fraction of its recompute (loading it back is not free).
  offloadCredit: 0.5
};

export type KvLoadConfig = typeof KV_LOAD_DEFAULTS;

/** Each pod's cost under `k` (exported for the arithmetic tests and for logs). */
export function kvLoadCosts (k: KvLoadConfig, req: Parameters<Policy['route']>[0], cluster: Parameters<Policy['route']>[1]): number[] {
  const { load } = cluster;
  const { prefix } = req;
  const blockSize = Math.max(1, prefix.blockSize);
  const promptBlocks = req.promptTokens / blockSize;
  return cluster.pods.map((p: PodView) => {
    const matched = Math.min(prefix.matched(p.index), prefix.totalBlocks);
    const offloaded = Math.min(matched, Math.max(0, prefix.offloadedBlocks?.(p.index) ?? 0));
    const cached = matched - offloaded + k.offloadCredit * offloaded;
    const held = p.kvCapacityBlocks > 0 ? load.kvUsage(p.index) * p.kvCapacityBlocks : 0;
    const decode = held + load.pendingPrefill(p.index) / Math.max(1, p.blockSize);
    return k.prefillScale * Math.max(promptBlocks - cached, 0) + decode;
  });
}

export function createKvLoad (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readKnobs('kv-load', config, KV_LOAD_DEFAULTS, { prefillScale: num(0), temperature: num(0), offloadCredit: num(0, 1) });
  return {
    name: 'kv-load',
    route (req, cluster) {
      const { pods } = cluster;
      if (pods.length === 0) throw new NoCandidateError();
      const costs = kvLoadCosts(k, req, cluster);
      if (k.temperature === 0) {
        return { pod: pods[indexOfMinRandom(costs, req.random)].index, reason: 'least-cost' };
      }
      const min = Math.min(...costs), max = Math.max(...costs);
      const weights = costs.map((c) => (max === min ? 1 : Math.exp(-(c - min) / ((max - min) * k.temperature))));
      return { pod: pods[sampleWeighted(weights, req.random)].index, reason: 'softmax-sample' };
    }
  };
}
