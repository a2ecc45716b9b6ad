// chwbl: consistent hashing with bounded loads (Mirrokni, Thorup, Zadimoghaddam, "Consistent Hashing with
// Bounded Loads", SODA 2018), in the form KubeAI's PrefixHash strategy uses for LLM prefixes
// (github.com/substratusai/kubeai, internal/loadbalancer/balance_chwbl.go):
// - each pod is placed on a 64-bit ring `replication` times, at XXH64(id + replica number);
// - the request's key is the hash of its prompt's first prefixTokens tokens: here the chained block key of the
//   last full block within them (it hashes every token before it), so no second pass over the prompt;
// - from the first ring point ≥ key, clockwise, take the first pod whose load passes
//   load + 1 ≤ loadFactor · (total load + 1) / pods (the +1s count the request being placed; a cluster with no
//   load passes anywhere); if none passes, the first pod met (KubeAI's default endpoint).
// Load is requests in flight from this gateway, as KubeAI counts them. KubeAI keys on the first 100 characters
// of the last user message; we key on tokens of the whole prompt, which is what the engine's cache reuses.
// A prompt with no full block (or a host that gives no block keys) is keyed on its session, else on 0.
import { NoCandidateError, type PodView, type Policy } from '../policy.js';
import { xxh64Ref } from '../reference/xxhash64.js';
import { int, num, readKnobs } from './knobs.js';

export const CHWBL_DEFAULTS = {
  // Tokens of prompt prefix hashed into the key (rounded down to whole blocks).
  prefixTokens: 256,
  // KubeAI PrefixHash.replication default 256: virtual nodes per pod.
  replication: 256,
  // KubeAI PrefixHash.meanLoadPercentage default 125 (the paper's 1 + ε with ε = 0.25).
  loadFactor: 1.25
};

export type ChwblConfig = typeof CHWBL_DEFAULTS;

interface Ring {
  /** The candidates it was built for, as `index:id` lines. */
  readonly signature: string;
  /** Ring points, ascending. */
  readonly points: BigUint64Array;
  /** Position in the candidate list of each point's pod. */
  readonly owner: Int32Array;
}

const utf8 = new TextEncoder();

export function signatureOf (pods: readonly PodView[]): string {
  let s = '';
  for (const p of pods) s += `${p.index}:${p.id}\n`;
  return s;
}

export function buildRing (pods: readonly PodView[], replication: number): Ring {
  const entries: { point: bigint; owner: number }[] = [];
  pods.forEach((p, owner) => {
    for (let r = 0; r < replication; r++) entries.push({ point: xxh64Ref(utf8.encode(`${p.id}${r}`)), owner });
  });
  entries.sort((a, b) => (a.point < b.point ? -1 : a.point > b.point ? 1 : a.owner - b.owner));
  return {
    signature: signatureOf(pods),
    points: BigUint64Array.from(entries, (e) => e.point),
    owner: Int32Array.from(entries, (e) => e.owner)
  };
}

/** First ring position whose point is ≥ key, wrapping to 0. */
export function search (points: BigUint64Array, key: bigint): number {
  let lo = 0, hi = points.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (points[mid] < key) lo = mid + 1;
    else hi = mid;
  }
  return lo === points.length ? 0 : lo;
}

export function createChwbl (config: Readonly<Record<string, unknown>> = {}): Policy {
  const k = readKnobs('chwbl', config, CHWBL_DEFAULTS, { prefixTokens: int(1), replication: int(1), loadFactor: num(1) });
  // Derived from the candidate list only; rebuilt whenever that list changes.
  let ring: Ring | null = null;
  let ringPods: readonly PodView[] | null = null;
  return {
    name: 'chwbl',
    route (req, cluster) {
      const { pods, load } = cluster;
      const n = pods.length;
      if (n === 0) throw new NoCandidateError();
      if (ring === null || (ringPods !== pods && ring.signature !== signatureOf(pods))) ring = buildRing(pods, k.replication);
      ringPods = pods;

      const { prefix } = req;
      const blocks = Math.min(Math.floor(k.prefixTokens / Math.max(1, prefix.blockSize)), prefix.totalBlocks);
      const keyed = blocks > 0 && prefix.blockKey !== undefined;
      const key = keyed ? BigInt.asUintN(64, prefix.blockKey!(blocks - 1)) : BigInt.asUintN(64, req.sessionKey ?? 0n);

      let total = 0;
      for (const p of pods) total += load.inFlight(p.index);
      const bound = (k.loadFactor * (total + 1)) / n;
      const fits = (p: PodView): boolean => total === 0 || load.inFlight(p.index) + 1 <= bound;

      const start = search(ring.points, key);
      const seen = new Uint8Array(n);
      let distinct = 0;
      for (let step = 0; step < ring.points.length && distinct < n; step++) {
        const owner = ring.owner[(start + step) % ring.points.length];
        if (seen[owner] === 1) continue;
        seen[owner] = 1;
        distinct++;
        if (fits(pods[owner])) {
          const reason = !keyed ? 'no-prefix-key' : distinct === 1 ? 'ring-owner' : 'ring-walk';
          return { pod: pods[owner].index, reason };
        }
      }
      return { pod: pods[ring.owner[start]].index, reason: 'all-over-bound' };
    }
  };
}
