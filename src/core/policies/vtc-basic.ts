// vtc-basic: AIBrix's fairness router (github.com/vllm-project/aibrix, pkg/plugins/gateway/algorithms/vtc:
// vtc_basic.go, token_tracker.go), after the Virtual Token Counter of Sheng et al., "Fairness in Serving Large
// Language Models" (OSDI'24), cut down from a scheduler to a per-request choice of pod.
//
// What AIBrix does. It keeps, per user, the weighted tokens (input · 1 + output · 2 by default) of the user's
// requests in a sliding window (5 units of a minute), and the least and the most of those totals over the
// users that have any. For a request of user u with T tokens in the window, over the ready pods in list
// order i = 0 … n − 1:
//   bucket     = max(minTokens, (min + max) / 2)             (min, max default to minTokens, maxTokens: no users)
//   position   = min(T / bucket, n − 1)                      (a "clamped linear" map of service onto the pods)
//   fairness_i = |i − position|
//   util_i     = min(running requests_i / maxPodLoad, 1)
//   score_i    = fairnessWeight · fairness_i + utilizationWeight · util_i + 0.1 · a uniform draw per pod
// and the pod of least score. Users that have had little service go to the first pods, heavy users to the
// last ones, so heavy users queue behind each other rather than in front of light ones; the utilisation term
// keeps a pod from filling up regardless. A request with no user goes to a pod at random. Knobs, by AIBrix's
// environment variables: MAX_POD_LOAD 100, FAIRNESS_WEIGHT 1, UTILIZATION_WEIGHT 1,
// TOKEN_TRACKER_MIN_TOKENS 1000, TOKEN_TRACKER_MAX_TOKENS 8000; and for the window, WINDOW_SIZE 5 ×
// TIME_UNIT minutes, INPUT_TOKEN_WEIGHT 1, OUTPUT_TOKEN_WEIGHT 2.
//
// Where EAR differs:
// - The window lives in the host (src/core/user-usage.ts; the policy is pure) and its knobs (windowMs,
//   buckets, inputWeight, outputWeight) are the host's `users` options, not this policy's: one window serves
//   every policy and the VTC scheduler. Its range (min / max) is exact at each bucket boundary and a bound in
//   between (see user-usage.ts); AIBrix's is updated only when a user's own total is touched, so a user whose
//   tokens left the window can hold the min or max until it sends again.
// - Tokens count when the request finishes, with the engine's reported usage. AIBrix counts them when it
//   routes, with estimates (prompt characters / 4, and 1.5 × that for output).
// - Utilisation is the larger of the engine's running requests and the gateway's own in-flight count (the
//   engine's figure is as old as the last scrape; AIBrix reads its running-requests metric only).
// - The random term is deterministic in the host's draw: each pod's uniform number is a hash of the request's
//   `random` and the pod's position, scaled by the `jitter` knob (AIBrix's fixed 0.1). With jitter 0, ties go
//   to one of the tied pods at random. A request with no user (or a host with no user window) goes to a pod
//   chosen uniformly with the host's draw.
import { NoCandidateError, type ClusterView, type Policy, type RequestFeatures } from '../policy.js';
import { indexOfMinRandom, uniform } from './pick.js';
import { num, readKnobs } from './knobs.js';

export const VTC_BASIC_DEFAULTS = {
  // AIBRIX_ROUTER_VTC_BASIC_MAX_POD_LOAD: running requests at which a pod's utilisation score is full.
  maxPodLoad: 100,
  // AIBRIX_ROUTER_VTC_BASIC_FAIRNESS_WEIGHT
  fairnessWeight: 1,
  // AIBRIX_ROUTER_VTC_BASIC_UTILIZATION_WEIGHT
  utilizationWeight: 1,
  // AIBRIX_ROUTER_VTC_TOKEN_TRACKER_MIN_TOKENS: the least bucket size, and min with no active user.
  minTokens: 1000,
  // AIBRIX_ROUTER_VTC_TOKEN_TRACKER_MAX_TOKENS: max with no active user.
  maxTokens: 8000,
  // Scale of the per-pod random term (AIBrix's fixed 0.1).
  jitter: 0.1
};

export type VtcBasicConfig = typeof VTC_BASIC_DEFAULTS;

/** A uniform number in [0, 1) for the pod at `position`, a hash of the host's draw (murmur3's finaliser). */
export function podDraw (random: number, position: number): number {
  let h = (Math.floor(random * 0x100000000) ^ Math.imul(position + 1, 0x9e3779b9)) >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return (h >>> 0) / 0x100000000;
}

/**
 * Each candidate's score under `k` (lower is better), in the order of cluster.pods, or null when the request
 * has no user to be fair to (exported for the arithmetic tests and for logs).
 */
export function vtcBasicScores (k: VtcBasicConfig, req: RequestFeatures, cluster: ClusterView): number[] | null {
  const users = cluster.users;
  if (req.userKey === null || users === undefined) return null;
  const { pods, load } = cluster;
  const n = pods.length;
  const tokens = users.tokens(req.userKey);
  const min = users.active > 0 ? users.min : k.minTokens;
  const max = users.active > 0 ? users.max : k.maxTokens;
  const bucket = Math.max(k.minTokens, (min + max) / 2);
  const position = Math.min(tokens / bucket, n - 1);
  return pods.map((p, i) => {
    const util = Math.min(Math.max(load.running(p.index), load.inFlight(p.index)) / k.maxPodLoad, 1);
    return k.fairnessWeight * Math.abs(i - position) + k.utilizationWeight * util + k.jitter * podDraw(req.random, i);
  });
}

export function createVtcBasic (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readKnobs('vtc-basic', config, VTC_BASIC_DEFAULTS, {
    maxPodLoad: num(1),
    fairnessWeight: num(0),
    utilizationWeight: num(0),
    minTokens: num(1),
    maxTokens: num(0),
    jitter: num(0)
  });
  return {
    name: 'vtc-basic',
    route (req, cluster) {
      const { pods } = cluster;
      if (pods.length === 0) throw new NoCandidateError();
      const scores = vtcBasicScores(k, req, cluster);
      if (scores === null) return { pod: uniform(pods, req.random).index, reason: 'no-user' };
      return { pod: pods[indexOfMinRandom(scores, req.random)].index, reason: 'fair-share' };
    }
  };
}
