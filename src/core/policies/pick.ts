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
