// prefix-cache: AIBrix's prefix-cache router (github.com/vllm-project/aibrix,
// pkg/plugins/gateway/algorithms/prefix_cache.go, in the releases with the absolute imbalance guard):
// 1. if max − min requests across the pods > imbalanceAbsCount → a least-request pod (random among the least);
// 2. else rank the pods that hold at least one block of the prompt by integer match percent (descending), then
//    by requests (ascending), ties at random, and take the first with requests ≤ mean + stdDevFactor · σ
//    (σ the sample standard deviation over all candidates, as AIBrix computes it);
// 3. no pod matched, or none passed the σ rule → a least-request pod (random among the least).
// "Requests" is AIBrix's realtime running-request count, which its gateway keeps itself (incremented at routing,
// decremented at completion): our in-flight counter. AIBrix's main branch has since replaced the guard with
// "max > 2 · (mean + 1) and max − min ≥ 8 → restrict matching to the least-loaded pods"; not modelled here.
import { NoCandidateError, type Policy, type PodView } from '../policy.js';
import { argminRandom, uniform } from './pick.js';
import { num, readKnobs } from './knobs.js';

export const PREFIX_CACHE_DEFAULTS = {
  // AIBRIX_PREFIX_CACHE_POD_RUNNING_REQUEST_IMBALANCE_ABS_COUNT: 8 in prefix_cache.go
  // (defaultPodRunningRequestImbalanceAbsCount); the algorithms README documents 16.
  imbalanceAbsCount: 8,
  // AIBRIX_PREFIX_CACHE_STANDARD_DEVIATION_FACTOR: 1 in prefix_cache.go (defaultStandardDeviationFactor);
  // the README documents 2.
  stdDevFactor: 1
};

export type PrefixCacheConfig = typeof PREFIX_CACHE_DEFAULTS;

export function createPrefixCache (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readKnobs('prefix-cache', config, PREFIX_CACHE_DEFAULTS, { imbalanceAbsCount: num(0), stdDevFactor: num(0) });
  return {
    name: 'prefix-cache',
    route (req, cluster) {
      const { pods, load } = cluster;
      const running = (p: PodView): number => load.inFlight(p.index);
      const leastRequest = (reason: string) => ({ pod: argminRandom(pods, running, req.random).index, reason });
      if (pods.length === 0) throw new NoCandidateError();

      let min = Infinity, max = -Infinity, sum = 0;
      for (const p of pods) {
        const r = running(p);
        min = Math.min(min, r);
        max = Math.max(max, r);
        sum += r;
      }
      if (max - min > k.imbalanceAbsCount) return leastRequest('load-imbalance');

      const total = req.prefix.totalBlocks;
      const matched = total > 0 ? pods.filter((p) => req.prefix.matched(p.index) > 0) : [];
      if (matched.length === 0) return leastRequest('no-match');

      const n = pods.length;
      const mean = sum / n;
      let squares = 0;
      for (const p of pods) squares += (running(p) - mean) ** 2;
      // Sample deviation (n − 1) as AIBrix's standardDeviation(); one pod has none.
      const sigma = n > 1 ? Math.sqrt(squares / (n - 1)) : 0;
      const bound = mean + k.stdDevFactor * sigma;
      const percent = (p: PodView): number => Math.floor((Math.min(req.prefix.matched(p.index), total) * 100) / total);

      const ranked = matched.map((p) => ({ p, pct: percent(p), r: running(p) }))
        .sort((a, b) => b.pct - a.pct || a.r - b.r);
      // Pods equal in (percent, requests) are all within the bound or all beyond it: pick among the first such group.
      for (let i = 0; i < ranked.length;) {
        let j = i + 1;
        while (j < ranked.length && ranked[j].pct === ranked[i].pct && ranked[j].r === ranked[i].r) j++;
        if (ranked[i].r <= bound) return { pod: uniform(ranked.slice(i, j), req.random).p.index, reason: 'prefix-match' };
        i = j;
      }
      return leastRequest('prefix-match-skipped');
    }
  };
}
