// sticky-hash: session affinity as stock gateways do it, a consistent hash of the session id over the engines,
// with no look at load (nginx `hash $http_x_session_id consistent`, Envoy's ring_hash on a session header).
// - Each candidate is placed on a 64-bit ring `replication` times (nginx's ketama: 160 points per server of
//   weight 1), at XXH64(pod id + replica number), the ring chwbl builds (chwbl.ts);
// - the session's key (the 64-bit hash of its id) goes to the owner of the first ring point ≥ it, clockwise.
// The ring is a function of the candidate list only, so a session stays on its engine for as long as that engine
// is a candidate, whatever the load; when an engine joins or leaves, only the sessions of the ring arcs it takes
// or gives up move (about 1/n of them), as with any consistent hash. A request without a session goes to an
// engine drawn at random (Envoy's ring hash without a hash key does the same).
// This is the baseline for "stock" affinity: hot pins (several long sessions hashed to one engine) stay pinned,
// where `sticky` places each new session on the least-loaded engine and `ear` moves sessions off hot engines.
import { NoCandidateError, type PodView, type Policy } from '../policy.js';
import { buildRing, search, signatureOf } from './chwbl.js';
import { int, readKnobs } from './knobs.js';

export const STICKY_HASH_DEFAULTS = {
  // Ring points per engine: nginx's ketama (ngx_http_upstream_hash_module: total_weight * 160).
  replication: 160
};

export type StickyHashConfig = typeof STICKY_HASH_DEFAULTS;

type Ring = ReturnType<typeof buildRing>;

/** Rings kept, by candidate list: a retry that excludes an engine, then the next request without, reuse theirs. */
const RINGS_KEPT = 8;

export function createStickyHash (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readKnobs('sticky-hash', config, STICKY_HASH_DEFAULTS, { replication: int(1) });
  // Derived from the candidate list only: one per list seen lately (least recently built out), the last one
  // checked first without rebuilding its signature when the host hands the same list again.
  const rings = new Map<string, Ring>();
  let ring: Ring | null = null;
  let ringPods: readonly PodView[] | null = null;
  const ringFor = (pods: readonly PodView[]): Ring => {
    const sig = signatureOf(pods);
    if (ring !== null && ring.signature === sig) return ring;
    let r = rings.get(sig);
    if (r === undefined) {
      r = buildRing(pods, k.replication);
      if (rings.size >= RINGS_KEPT) rings.delete(rings.keys().next().value!);
      rings.set(sig, r);
    }
    return r;
  };
  return {
    name: 'sticky-hash',
    route (req, cluster) {
      const { pods } = cluster;
      if (pods.length === 0) throw new NoCandidateError();
      if (req.sessionKey === null) return { pod: pods[Math.min(pods.length - 1, Math.floor(req.random * pods.length))].index, reason: 'no-session' };
      if (ring === null || ringPods !== pods) ring = ringFor(pods);
      ringPods = pods;
      const owner = ring.owner[search(ring.points, BigInt.asUintN(64, req.sessionKey))];
      return { pod: pods[owner].index, reason: 'session-hash' };
    }
  };
}
