// least-load: the candidate with the least pending prefill tokens, then the fewest running requests.
// Prefill dominates an agentic prompt's time to first token, so queued prompt tokens are the load that matters.
import type { Policy } from '../policy.js';
import { argmin, leastLoadScore, rotation } from './pick.js';

export function createLeastLoad (): Policy {
  return {
    name: 'least-load',
    route (_req, cluster) {
      const pod = argmin(cluster.pods, leastLoadScore(cluster), rotation(cluster));
      return { pod: pod.index, reason: 'least-pending-prefill' };
    }
  };
}
