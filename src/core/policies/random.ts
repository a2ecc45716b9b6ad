// random: a uniformly random candidate (the host's random number, so the simulator stays deterministic).
import { NoCandidateError, type Policy } from '../policy.js';

export function createRandom (): Policy {
  return {
    name: 'random',
    route (req, cluster) {
      const n = cluster.pods.length;
      if (n === 0) throw new NoCandidateError();
      return { pod: cluster.pods[Math.min(n - 1, Math.floor(req.random * n))].index, reason: 'random' };
    }
  };
}
