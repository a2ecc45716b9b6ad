// The routing host's pods as its thread sees them (routing-host.ts keeps the shared tables in step): each row's
// spec, the view policies read, what the candidate filters read, and the KV capacity its engine reported; and a
// request's candidates (candidate-filters.ts), cached per model while the pods do not change.
import { emptiedBy, isCandidate, type CandidatePod, type CandidateQuery } from './candidate-filters.js';
import type { PodRole, PodState } from './pod-table.js';
import { NoCandidateError, type PodView } from './policy.js';

export interface PodSpec {
  id: string;
  role: PodRole;
  /** Models it serves now (an engine's /v1/models). */
  models: ReadonlySet<string>;
  /** ready: takes new requests; draining: finishes what it has; down: failed its health checks. */
  state: PodState;
  /** KV capacity in blocks from configuration; what the engine itself reports (engineLoad) takes precedence. */
  kvCapacityBlocks?: number;
}

export interface HostPod {
  spec: PodSpec;
  view: PodView;
  /** What the candidate filters read of it. */
  candidate: CandidatePod;
  /** From the engine's metrics; 0 until it reports one. */
  engineBlocks: number;
}

export class HostPods {
  readonly #pods: Array<HostPod | undefined> = [];
  /**
   * Candidate lists of requests that exclude nothing, per model, kept while the pods do not change: the same
   * array for the same pods, so a policy may key what it derives from the list (a hash ring) on its identity.
   * Only models some pod serves get one, so the map is bounded by the pods' models.
   */
  readonly #candidates = new Map<string, readonly PodView[]>();

  /** `disaggregated`: the policy splits prefill from decode, so prefill-only pods are candidates too. */
  constructor (readonly blockSize: number, readonly disaggregated: () => boolean) {}

  get (row: number): HostPod | undefined {
    return this.#pods[row];
  }

  /** Sets row `row`'s pod as `spec` says (its engine's reported capacity kept); returns it. */
  set (row: number, spec: PodSpec): HostPod {
    const engineBlocks = this.#pods[row]?.engineBlocks ?? 0;
    const kv = engineBlocks > 0 ? engineBlocks : spec.kvCapacityBlocks ?? 0;
    const p: HostPod = {
      spec, engineBlocks, view: { index: row, id: spec.id, role: spec.role, blockSize: this.blockSize, kvCapacityBlocks: kv },
      candidate: { state: spec.state, role: spec.role, models: spec.models, row }
    };
    this.#pods[row] = p;
    this.#candidates.clear();
    return p;
  }

  remove (row: number): void {
    this.#pods[row] = undefined;
    this.#candidates.clear();
  }

  #query (model: string, exclude: ReadonlySet<number>): CandidateQuery {
    return { model, exclude, disaggregated: this.disaggregated() };
  }

  /** Whether `p` passes every candidate filter for a request of `model` not excluding it. */
  serves (p: HostPod | undefined, model: string, exclude: ReadonlySet<number>): p is HostPod {
    return p !== undefined && isCandidate(p.candidate, this.#query(model, exclude));
  }

  /** The candidates of a request for `model` beyond `exclude`; throws NoCandidateError (naming the filter) if none. */
  candidates (model: string, exclude: ReadonlySet<number>): readonly PodView[] {
    const cached = exclude.size === 0 ? this.#candidates.get(model) : undefined;
    if (cached !== undefined) return cached;
    const list: PodView[] = [];
    for (const row of this.rows(model, exclude)) list.push(this.#pods[row]!.view);
    if (list.length === 0) throw this.noCandidate(model, exclude);
    if (exclude.size === 0) this.#candidates.set(model, list);
    return list;
  }

  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean {
    for (const _ of this.rows(model, exclude)) return true;
    return false;
  }

  /** The rows of the pods that pass the candidate filters. */
  * rows (model: string, exclude: ReadonlySet<number>): Iterable<number> {
    const q = this.#query(model, exclude);
    for (const p of this.#pods) if (p !== undefined && isCandidate(p.candidate, q)) yield p.view.index;
  }

  /** Every pod, by row and id. */
  * ids (): Iterable<{ row: number; id: string }> {
    for (const p of this.#pods) if (p !== undefined) yield { row: p.view.index, id: p.spec.id };
  }

  /** No pod is a candidate: the error names the filter that left none. */
  noCandidate (model: string, exclude: ReadonlySet<number>): NoCandidateError {
    const pods: CandidatePod[] = [];
    for (const p of this.#pods) if (p !== undefined) pods.push(p.candidate);
    return new NoCandidateError(undefined, emptiedBy(pods, this.#query(model, exclude)) ?? 'none');
  }
}
