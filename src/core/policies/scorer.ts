// scorer: the Gateway API Inference Extension / llm-d endpoint picker (github.com/kubernetes-sigs/
// gateway-api-inference-extension, pkg/epp/scheduling/framework/plugins): every scorer gives each candidate a
// score in [0, 1], the profile sums clamp(score) · weight, a picker chooses. Scorers, as in the source:
//  prefix            matched blocks / prompt blocks, both capped at prefixMaxBlocks (prefix/plugin.go)
//  queue             (max − waiting) / (max − min) over the candidates, 1 when all equal (scorer/queue.go)
//  kv-utilization    1 − KV usage (scorer/kvcache_utilization.go)
//  running           as queue, on the engine's running requests (scorer/running.go)
//  session-affinity  1 on the session's current host, else 0 (llm-d-inference-scheduler session-affinity scorer)
// Pickers: max-score (highest total, ties at random: the source shuffles before a stable sort) and
// weighted-random (probability ∝ total score; the source's A-Res keys U^(1/w) pick the same distribution for
// one endpoint; all totals zero → uniform). Filters: the host has already kept only usable candidates.
import { NoCandidateError, type PodView, type Policy } from '../policy.js';
import { sampleWeighted, uniform } from './pick.js';
import { num, int, oneOf, readKnobs } from './knobs.js';

export const SCORER_DEFAULTS = {
  // Weights of GIE's default EndpointPickerConfig profile: queue-scorer 2, kv-cache-utilization-scorer 2,
  // prefix-cache-scorer 3. running and session-affinity are not in the default profile (weight 0).
  prefixWeight: 3,
  queueWeight: 2,
  kvUtilizationWeight: 2,
  runningWeight: 0,
  sessionAffinityWeight: 0,
  // Default picker of a profile: max-score-picker.
  picker: 'max-score' as 'max-score' | 'weighted-random',
  // prefix/plugin.go DefaultMaxPrefixBlocks: 256 (longer prompts are told apart only by their first 256 blocks).
  prefixMaxBlocks: 256
};

export type ScorerConfig = typeof SCORER_DEFAULTS;

/** (max − v) / (max − min) over the candidates: the least loaded scores 1; all equal → 1 for everyone. */
function minMaxLow (pods: readonly PodView[], value: (p: PodView) => number): (p: PodView) => number {
  let min = Infinity, max = -Infinity;
  for (const p of pods) {
    const v = value(p);
    min = Math.min(min, v);
    max = Math.max(max, v);
  }
  return (p) => (max === min ? 1 : (max - value(p)) / (max - min));
}

const clamp01 = (x: number): number => (x > 1 ? 1 : x > 0 ? x : 0);

export function createScorer (config: Readonly<Record<string, unknown>> = {}): Policy {
  const w = readKnobs('scorer', config, SCORER_DEFAULTS, {
    prefixWeight: num(0),
    queueWeight: num(0),
    kvUtilizationWeight: num(0),
    runningWeight: num(0),
    sessionAffinityWeight: num(0),
    picker: oneOf(['max-score', 'weighted-random']),
    prefixMaxBlocks: int(1)
  });
  return {
    name: 'scorer',
    route (req, cluster) {
      const { pods, load } = cluster;
      if (pods.length === 0) throw new NoCandidateError();
      const total = Math.min(req.prefix.totalBlocks, w.prefixMaxBlocks);
      const queue = minMaxLow(pods, (p) => load.waiting(p.index));
      const running = minMaxLow(pods, (p) => load.running(p.index));
      let host = -1;
      if (w.sessionAffinityWeight > 0 && req.sessionKey !== null) host = cluster.sessions.get(req.sessionKey)?.host ?? -1;

      const scores = pods.map((p) =>
        w.prefixWeight * (total > 0 ? clamp01(Math.min(req.prefix.matched(p.index), total) / total) : 0) +
        w.queueWeight * clamp01(queue(p)) +
        w.kvUtilizationWeight * clamp01(1 - load.kvUsage(p.index)) +
        w.runningWeight * clamp01(running(p)) +
        w.sessionAffinityWeight * (p.index === host ? 1 : 0));

      if (w.picker === 'weighted-random') {
        if (!scores.some((s) => s > 0)) return { pod: uniform(pods, req.random).index, reason: 'uniform-random' };
        return { pod: pods[sampleWeighted(scores, req.random)].index, reason: 'weighted-random' };
      }
      const best = Math.max(...scores);
      const top = pods.filter((_, i) => scores[i] === best);
      return { pod: uniform(top, req.random).index, reason: 'max-score' };
    }
  };
}
