// preble: the E2 global scheduler of Preble (Srivatsa et al., "Preble: Efficient Distributed Prompt Scheduling
// for LLM Serving", ICLR 2025; github.com/WukLab/preble, multi_node/global_scheduler_with_time.py):
// - exploit when the prompt's cached tokens outnumber the rest (longest match > prompt − longest match): the pod
//   with the longest match (among several, the least loaded);
// - else explore: the pod of least load + this request's prefill there (the paper's L_i + P_i; its eviction
//   term M_i needs a per-pod LRU model of the engine, which the view does not carry);
// - then rebalance: if the chosen pod's load exceeds rebalanceRatio × the lightest pod's load, the lightest
//   (the paper moves prefixes from the heaviest to the lightest GPU past a threshold; per request, that is
//   sending the request where the load is lightest).
// Load, in prefill-token equivalents: the paper sums, over a 3-minute window, each prefix's prefill time
// (times its miss rate) and its requests' decode time (running requests × output length × time per output
// token). From the view: pending prefill tokens + decodeCostTokens × the pod's running requests (the engine's
// count or the gateway's in flight, whichever is larger). Ties at random.
import { NoCandidateError, type PodView, type Policy } from '../policy.js';
import { indexOfMinRandom } from './pick.js';
import { num, readKnobs } from './knobs.js';

export const PREBLE_DEFAULTS = {
  // The paper's Th_bal, 1.5 as our evaluation specifies (the public code's rebalancer, disabled there, uses 15).
  rebalanceRatio: 1.5,
  // Ours, not the paper's: prefill tokens taken to cost as much as one running request's decode. The paper
  // measures output length × time per output token per prefix; the view carries neither, so this is a knob.
  decodeCostTokens: 256
};

export type PrebleConfig = typeof PREBLE_DEFAULTS;

export function createPreble (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readKnobs('preble', config, PREBLE_DEFAULTS, { rebalanceRatio: num(1), decodeCostTokens: num(0) });
  return {
    name: 'preble',
    route (req, cluster) {
      const { pods, load } = cluster;
      if (pods.length === 0) throw new NoCandidateError();
      const { prefix } = req;
      const podLoad = (p: PodView): number =>
        load.pendingPrefill(p.index) + k.decodeCostTokens * Math.max(load.running(p.index), load.inFlight(p.index));
      const loads = pods.map(podLoad);
      const cachedTokens = pods.map((p) => Math.min(req.promptTokens, Math.min(prefix.matched(p.index), prefix.totalBlocks) * prefix.blockSize));
      const longest = Math.max(...cachedTokens);

      let chosen: number;
      let reason: string;
      if (longest > req.promptTokens - longest) {
        chosen = indexOfMinRandom(loads.map((l, i) => (cachedTokens[i] === longest ? l : Infinity)), req.random);
        reason = 'exploit';
      } else {
        chosen = indexOfMinRandom(loads.map((l, i) => l + (req.promptTokens - cachedTokens[i])), req.random);
        reason = 'explore';
      }
      const lightest = indexOfMinRandom(loads, req.random);
      if (loads[chosen] > k.rebalanceRatio * loads[lightest]) return { pod: pods[lightest].index, reason: 'rebalance' };
      return { pod: pods[chosen].index, reason };
    }
  };
}
