// Small selection helpers shared by the policies.
import { NoCandidateError, type ClusterView, type PodView } from '../policy.js';

/**
 * The candidate with the lowest score; ties go to the first in a rotation that starts at `start`, so equal
 * pods share the load instead of the first pod taking every tie.
 */
export function argmin (pods: readonly PodView[], score: (p: PodView) => number, start = 0): PodView {
  const n = pods.length;
  if (n === 0) throw new NoCandidateError();
  let best = pods[start % n];
  let bestScore = score(best);
  for (let k = 1; k < n; k++) {
    const p = pods[(start + k) % n];
    const s = score(p);
    if (s < bestScore) {
      best = p;
      bestScore = s;
    }
  }
  return best;
}

/** A rotation start that changes with every decision, for fair tie-breaking. */
export function rotation (cluster: ClusterView): number {
  return cluster.decisions;
}

/**
 * A rotation start that changes with every placement of a request that has no live binding (a new session):
 * for policies that bind sessions, so equal pods take new sessions in turn whatever the bound sessions' turns
 * in between.
 */
export function placementRotation (cluster: ClusterView): number {
  return cluster.placements;
}

/** Pending prefill first, then running requests (the engine's count or the gateway's, whichever is larger). */
export function leastLoadScore (cluster: ClusterView): (p: PodView) => number {
  const { load } = cluster;
  // Running requests break ties between pods with the same pending prefill; they never outweigh one token.
  return (p) => load.pendingPrefill(p.index) + Math.max(load.running(p.index), load.inFlight(p.index)) / (1 << 20);
}

export function findPod (cluster: ClusterView, index: number): PodView | undefined {
  for (const p of cluster.pods) if (p.index === index) return p;
  return undefined;
}

/**
 * The candidate with the lowest score; ties go to one of the tied pods chosen uniformly with `random` in [0, 1)
 * (the sources these policies follow break ties at random, not in turn).
 */
export function argminRandom (pods: readonly PodView[], score: (p: PodView) => number, random: number): PodView {
  if (pods.length === 0) throw new NoCandidateError();
  return pods[indexOfMinRandom(pods.map(score), random)];
}

/** Index of the least value, ties chosen uniformly by `random`; all NaN or +Infinity → any index, uniformly. */
export function indexOfMinRandom (values: readonly number[], random: number): number {
  let best = Infinity;
  const tied: number[] = [];
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (v < best) {
      best = v;
      tied.length = 0;
    }
    if (v === best) tied.push(i);
  }
  return tied.length > 0 ? uniform(tied, random) : Math.min(values.length - 1, Math.floor(random * values.length));
}

/** One of `items` chosen uniformly by `random` in [0, 1). */
export function uniform<T> (items: readonly T[], random: number): T {
  return items[Math.min(items.length - 1, Math.floor(random * items.length))];
}

/** Index i with probability weights[i] / Σ weights (weights ≥ 0, Σ > 0), by inverse CDF at `random` in [0, 1). */
export function sampleWeighted (weights: readonly number[], random: number): number {
  let total = 0;
  for (const w of weights) total += w;
  const target = random * total;
  let acc = 0;
  let last = -1;
  for (let i = 0; i < weights.length; i++) {
    if (weights[i] <= 0) continue;
    acc += weights[i];
    last = i;
    if (target < acc) return i;
  }
  return last; // rounding left target at the very top
}
