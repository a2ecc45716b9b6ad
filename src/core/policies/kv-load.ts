// kv-load: NVIDIA Dynamo's KV router cost (github.com/ai-dynamo/dynamo, lib/llm/src/kv_router: scheduler.rs
// DefaultWorkerSelector, sequence.rs potential_blocks_and_tokens): for each pod
//   cost = prefillScale · prefill blocks + decode blocks
// and the pod of least cost (temperature 0: ties at random), or a softmax sample over the costs normalised by
// their range, p ∝ exp(−(cost − min) / ((max − min) · temperature)), uniform when all costs are equal.
// Dynamo's terms, and what stands for them here:
//   prefill blocks  (the worker's queued prefill tokens + this prompt's uncached tokens) / block size, with
//                   uncached = max(promptTokens − cached · blockSize, 0) and cached = GPU-resident matched blocks
//                   + offloadCredit · matched blocks held only on an offload tier (Dynamo folds host/disk hits
//                   into an "effective" overlap the same way). Queued prefill: our pendingPrefill.
//   decode blocks   the blocks of the worker's active sequences, which Dynamo tracks from its own routing, plus
//                   the blocks this request would add. Here: the engine's own count, kvUsage · kvCapacityBlocks
//                   (0 when never scraped or capacity unknown), + pendingPrefill / blockSize (prompts sent but not
//                   yet allocated: Dynamo counts them from the moment it routes) + the prompt's full blocks the
//                   pod does not hold in GPU memory (Dynamo counts blocks not already active on the worker; the
//                   view knows cached blocks, not active ones, so blocks shared with idle cache count as held).
import { NoCandidateError, type PodView, type Policy } from '../policy.js';
import { indexOfMinRandom, sampleWeighted } from './pick.js';
import { num, readKnobs } from './knobs.js';

export const KV_LOAD_DEFAULTS = {
  // Dynamo --kv-overlap-score-weight, default 1.0 (0 leaves the memory term only).
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
    const pending = load.pendingPrefill(p.index) / Math.max(1, p.blockSize);
    const held = p.kvCapacityBlocks > 0 ? load.kvUsage(p.index) * p.kvCapacityBlocks : 0;
    const added = prefix.totalBlocks - (matched - offloaded);
    return k.prefillScale * (Math.max(promptBlocks - cached, 0) + pending) + held + pending + added;
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
