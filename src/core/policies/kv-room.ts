// KV room: what a policy can tell of an engine's KV from what the host knows (issue 31 part 4). An engine's
// blocks are in use by its running requests (its KV usage, from /metrics), about to be taken by the prompts
// sent to it and not yet computed (the gateway's pending prefill), or free; free blocks still cache prefixes,
// and a new allocation evicts the least recently freed. The prefixes of sessions in their tool gap are among
// them, and retention (retention.ts) names how many blocks of them the host wants kept. So the room an engine
// has for new work without evicting a retained prefix is
//   room = capacity − usage · capacity − pending prefill / block size − retained blocks
// and a session's KV fits where room ≥ the blocks it needs (its context and this turn's prompt and output:
// a running request holds all of its blocks, cached ones too). An engine of unknown capacity has room without
// end, as freeKvTokens took it.
import type { ClusterView, PodView, RequestFeatures } from '../policy.js';

/** Blocks the pod can give new work without evicting retained prefixes; +Infinity when its capacity is unknown. */
export function kvRoom (p: PodView, cluster: ClusterView): number {
  if (!(p.kvCapacityBlocks > 0)) return Infinity;
  const { load } = cluster;
  const usage = Math.min(1, Math.max(0, load.kvUsage(p.index) || 0));
  const pending = load.pendingPrefill(p.index) / Math.max(1, p.blockSize);
  return p.kvCapacityBlocks * (1 - usage) - pending - (cluster.retention?.blocks(p.index) ?? 0);
}

/** Blocks a request of this session holds while it runs: the larger of its stored context and this prompt, plus its output. */
export function kvNeed (req: RequestFeatures, contextTokens: number, blockSize: number): number {
  const tokens = Math.max(contextTokens, req.promptTokens) + (req.expectedOutputTokens ?? 0);
  return Math.ceil(tokens / Math.max(1, blockSize));
}

/** Of the session's own retained prefix, the blocks on `pod` (its own room there: they are its to use). */
export function ownRetained (cluster: ClusterView, sessionKey: bigint | null, pod: number): number {
  if (sessionKey === null) return 0;
  const r = cluster.retention?.of(sessionKey);
  return r !== null && r !== undefined && r.pod === pod ? r.blocks : 0;
}
