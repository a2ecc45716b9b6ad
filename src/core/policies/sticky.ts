// sticky: a session keeps its pod for as long as that pod is a candidate (hard pinning, no load check);
// a new session, or one whose pod left, goes to the least loaded candidate (ties: in turn, pick.ts placementRotation).
import type { Policy } from '../policy.js';
import { argmin, findPod, leastLoadScore, placementRotation } from './pick.js';

export function createSticky (): Policy {
  return {
    name: 'sticky',
    route (req, cluster) {
      if (req.sessionKey !== null) {
        const s = cluster.sessions.get(req.sessionKey);
        if (s && s.host >= 0 && findPod(cluster, s.host)) return { pod: s.host, reason: 'session-host' };
      }
      const pod = argmin(cluster.pods, leastLoadScore(cluster), placementRotation(cluster));
      return { pod: pod.index, reason: req.sessionKey === null ? 'no-session' : 'new-session' };
    }
  };
}
