// pd-static: fixed prefill and decode pools, the design paper's 4P/4D baseline (specs/evaluation.md "Policies
// compared"). Every request is prefilled on a P pod and decoded on a D pod: { pod: D, prefillOn: P }. The host
// runs the P leg (max_tokens 1, KV export) and sends the request to D with the returned transfer params, as
// llm-d's always-disagg decider and AIBrix's "pd" strategy do (specs/kv-transfer.md §4). Its known failure
// mode, which this baseline is there to show, is KV overflow on the decode side: every session's whole context
// lives on the D pool, half the cluster's KV.
//
// Pools.
// - Candidates with a role: P = role 'prefill', D = role 'decode' (AIBrix's role-name labels, llm-d's P and D
//   deployments). Pods with role 'both' are in neither pool; the prefillPods knob is ignored.
// - No candidate with a role (all 'both'): the prefillPods lowest pod indexes among the candidates are P, the
//   rest D. Default: half the candidates (rounded down), at least 1 P and at least 1 D. A pod's index is its
//   row in the pod table, kept for the pod's lifetime, and a new backend takes the lowest free row, so a pod
//   replacing one that left takes its row and its role; only while a pod with a lower index is missing does the
//   split shift (the lowest D pod serves as P meanwhile), keeping both pools at their size.
// - One pool empty (a single candidate, or roles of one kind only): no split. The request goes to the least
//   pending prefill among all candidates, without prefillOn, reason 'no-pd-split'.
//
// P choice: the least prefill work ahead of this prompt's first token on that pod, in tokens:
//   pending prefill + the prompt's tokens the pod does not hold (prompt − matched blocks · block size).
// This is llm-d's prefill profile (prefix scorer + load scorers) with the weights made commensurable: with equal
// load it takes the longest prefix, with equal prefixes the least pending prefill, and a long match does not
// win on a pod whose queue costs more than the match saves (a strict prefix-first rule would pile every turn of
// a popular prefix onto one P pod). Blocks held only on an offload tier count as held, as the index reports
// them. Ties: fewer requests, then the decision counter's rotation (leastLoadScore, as least-load).
//
// D choice.
// - The session's host, when it is a D candidate: decode holds the previous turns' KV, so only the new
//   suffix has to cross from P (llm-d's decode profile keeps a session there through its prefix scorer).
//   No tHot here: a static baseline does not move sessions.
// - Otherwise the D pod with the least KV in use, as a fraction of its capacity: the engine's kvUsage (last
//   scrape) plus the gateway's pending prefill on it over its capacity in tokens (prompts sent since, whose KV
//   is landing; without that term every request between two scrapes would go to the same pod). Decode is KV
//   bound, so KV, not queued prefill, is the load that matters there. Unknown capacity: kvUsage alone. Ties:
//   fewer requests (engine running or gateway in flight), then the rotation.
import { NoCandidateError, type ClusterView, type PodView, type Policy, type RequestFeatures, type Decision } from '../policy.js';
import { argmin, leastLoadScore, placementRotation, rotation } from './pick.js';
import { int, readKnobs } from './knobs.js';

export const PD_STATIC_DEFAULTS = {
  // P pods when the candidates carry no roles; 0 stands for the default, half the candidates (the 4P/4D split on
  // eight engines). A value given must be ≥ 1; it is capped so that at least one D remains.
  prefillPods: 0
};

export type PdStaticConfig = typeof PD_STATIC_DEFAULTS;

export interface Pools {
  readonly prefill: readonly PodView[];
  readonly decode: readonly PodView[];
}

/** The P and D pools among the candidates (by role, else by index); either may be empty. */
export function pdPools (pods: readonly PodView[], prefillPods: number): Pools {
  if (pods.some((p) => p.role !== 'both')) {
    return { prefill: pods.filter((p) => p.role === 'prefill'), decode: pods.filter((p) => p.role === 'decode') };
  }
  const byIndex = [...pods].sort((a, b) => a.index - b.index);
  const n = byIndex.length;
  const want = prefillPods >= 1 ? prefillPods : Math.max(1, Math.floor(n / 2));
  const p = Math.max(0, Math.min(want, n - 1));
  return { prefill: byIndex.slice(0, p), decode: byIndex.slice(p) };
}

/** Tokens of prefill ahead of this prompt's first token on each pod: pending prefill + the prompt's uncached part. */
function prefillScore (req: RequestFeatures, cluster: ClusterView): (p: PodView) => number {
  const load = leastLoadScore(cluster);
  const { prefix } = req;
  return (p) => {
    const held = Math.min(prefix.matched(p.index), prefix.totalBlocks) * prefix.blockSize;
    return load(p) + Math.max(0, req.promptTokens - held);
  };
}

/** The D pod with the least KV in use (engine usage + pending prefill over capacity), then fewest requests, then the placement rotation. */
function leastKv (pods: readonly PodView[], cluster: ClusterView): PodView {
  const { load } = cluster;
  const used = (p: PodView): number => {
    const usage = Math.min(1, Math.max(0, load.kvUsage(p.index) || 0));
    const capacity = p.kvCapacityBlocks * p.blockSize;
    return capacity > 0 ? usage + load.pendingPrefill(p.index) / capacity : usage;
  };
  let min = Infinity;
  for (const p of pods) min = Math.min(min, used(p));
  const least = pods.filter((p) => used(p) === min);
  return argmin(least, (p) => Math.max(load.running(p.index), load.inFlight(p.index)), placementRotation(cluster));
}

function routePd (pools: (pods: readonly PodView[]) => Pools, req: RequestFeatures, cluster: ClusterView): Decision {
  if (cluster.pods.length === 0) throw new NoCandidateError();
  const { prefill, decode } = pools(cluster.pods);
  if (prefill.length === 0 || decode.length === 0) {
    return { pod: argmin(cluster.pods, leastLoadScore(cluster), rotation(cluster)).index, reason: 'no-pd-split' };
  }
  const p = argmin(prefill, prefillScore(req, cluster), rotation(cluster));
  const host = req.sessionKey === null ? -1 : (cluster.sessions.get(req.sessionKey)?.host ?? -1);
  if (host >= 0 && decode.some((d) => d.index === host)) return { pod: host, prefillOn: p.index, reason: 'session-host' };
  return { pod: leastKv(decode, cluster).index, prefillOn: p.index, reason: 'least-kv' };
}

export function createPdStatic (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readKnobs('pd-static', config, PD_STATIC_DEFAULTS, { prefillPods: int(1) });
  // The view keeps `pods` the same array while the candidates are the same: split once per candidate set.
  let last: readonly PodView[] | null = null;
  let lastPools: Pools = { prefill: [], decode: [] };
  const pools = (pods: readonly PodView[]): Pools => {
    if (pods !== last) {
      lastPools = pdPools(pods, k.prefillPods);
      last = pods;
    }
    return lastPools;
  };
  return { name: 'pd-static', disaggregated: true, route: (req, cluster) => routePd(pools, req, cluster) };
}
