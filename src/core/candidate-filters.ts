// Which pods may take a request, as a list of named filters applied in order (as the Gateway API Inference
// Extension's scheduler filters its candidates): a pod is a candidate when every filter keeps it. A request that
// finds none can say which filter left nothing, so "no backend" says why.
import type { PodRole } from './pod-table.js';

/** What the filters read of a pod. */
export interface CandidatePod {
  readonly state: 'ready' | 'draining' | 'down';
  readonly role: PodRole;
  readonly models: ReadonlySet<string>;
  readonly row: number;
}

/** What the filters read of a request, and of the policy. */
export interface CandidateQuery {
  readonly model: string;
  /** Pods this request may not go to (those that failed it, or a proxy's subset leaves out). */
  readonly exclude: ReadonlySet<number>;
  /** The policy splits prefill from decode (P/D): prefill-only pods take its requests too. */
  readonly disaggregated: boolean;
}

export interface CandidateFilter {
  readonly name: string;
  keep (pod: CandidatePod, q: CandidateQuery): boolean;
}

export const CANDIDATE_FILTERS: readonly CandidateFilter[] = [
  { name: 'ready', keep: (p) => p.state === 'ready' },
  // Prefill-only pods take no whole requests: the P/D connector sends them their half.
  { name: 'role', keep: (p, q) => p.role !== 'prefill' || q.disaggregated },
  { name: 'model', keep: (p, q) => p.models.has(q.model) },
  { name: 'not-excluded', keep: (p, q) => !q.exclude.has(p.row) }
];

/** Whether every filter keeps `pod`. */
export function isCandidate (pod: CandidatePod, q: CandidateQuery): boolean {
  for (const f of CANDIDATE_FILTERS) if (!f.keep(pod, q)) return false;
  return true;
}

/** The first filter that left none of `pods` (the reason a request found no candidate); null if some passed. */
export function emptiedBy (pods: Iterable<CandidatePod>, q: CandidateQuery): string | null {
  let left = [...pods];
  for (const f of CANDIDATE_FILTERS) {
    left = left.filter((p) => f.keep(p, q));
    if (left.length === 0) return f.name;
  }
  return null;
}
