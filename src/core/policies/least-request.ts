// least-request: the candidate with the fewest requests in flight from this gateway.
import type { Policy } from '../policy.js';
import { argmin, rotation } from './pick.js';

export function createLeastRequest (): Policy {
  return {
    name: 'least-request',
    route (_req, cluster) {
      const pod = argmin(cluster.pods, (p) => cluster.load.inFlight(p.index), rotation(cluster));
      return { pod: pod.index, reason: 'fewest-in-flight' };
    }
  };
}
