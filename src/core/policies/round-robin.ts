// round-robin: candidates in turn; the position is the host's decision counter, so it needs no state here.
import { NoCandidateError, type Policy } from '../policy.js';

export function createRoundRobin (): Policy {
  return {
    name: 'round-robin',
    route (_req, cluster) {
      const n = cluster.pods.length;
      if (n === 0) throw new NoCandidateError();
      return { pod: cluster.pods[cluster.decisions % n].index, reason: 'turn' };
    }
  };
}
