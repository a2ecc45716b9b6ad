// The routing core's contract. A policy is a pure function of (request features, a read-only view of the
// cluster, the time) to a decision: no I/O, no clock, no state of its own. What it must remember between
// calls (a session's host, a round-robin position) it reads back from the tables the host keeps, so the
// gateway's threads and the discrete-event driver all see the same thing.

import type { PodRole } from './pod-table.js';
import { EarError } from '../errors/errors.js';
import type { RetentionView } from './retention.js';
export type { PodRole, PodState } from './pod-table.js';

/** One engine as a policy sees it. `index` is its row in the shared pod and load tables. */
export interface PodView {
  readonly index: number;
  readonly id: string;
  readonly role: PodRole;
  readonly blockSize: number;
  /** KV capacity in blocks (0 when unknown). */
  readonly kvCapacityBlocks: number;
}

/** Fresh load of a pod, by pod index. Gateway counters and engine-reported figures. */
export interface LoadView {
  /** Requests the gateway has sent to the pod and not yet finished. */
  inFlight (pod: number): number;
  /** Prompt tokens sent to the pod and not yet computed (prompt minus expected cached, until the first token). */
  pendingPrefill (pod: number): number;
  /** Requests the engine reports running / waiting (from its /metrics); 0 when never scraped. */
  running (pod: number): number;
  waiting (pod: number): number;
  /** KV cache usage 0..1 reported by the engine. */
  kvUsage (pod: number): number;
}

/** What the session table says about one session. */
export interface SessionInfo {
  /** Pod index the session is bound to, −1 for none. */
  readonly host: number;
  readonly attainedService: number;
  readonly contextTokens: number;
  /** Host time of the session's last migration, −Infinity if never. */
  readonly lastMigration: number;
  readonly inFlight: number;
}

export interface SessionView {
  get (sessionKey: bigint): SessionInfo | null;
}

/**
 * The cluster at the moment of a decision. `pods` holds only the candidates: healthy, serving the model, in a
 * usable role. The view is valid during the call only; `pods` is the same array for as long as the
 * candidates are the same, so what a policy derives from it may be cached on its identity.
 */
export interface ClusterView {
  readonly pods: readonly PodView[];
  readonly load: LoadView;
  readonly sessions: SessionView;
  /** Decisions the host has recorded so far (a shared counter); round-robin reads its position from it. */
  readonly decisions: number;
  /**
   * Decisions so far that placed a request with no live binding of its own (a new session, one whose host is
   * no longer a candidate, or no session): the rotation that spreads such requests over tied pods. A bound
   * session's turns do not advance it, so they cannot line it up with the pod count and send every new
   * session on an idle fleet to the same pod, as a rotation on `decisions` could.
   */
  readonly placements: number;
  /** Per-user weighted tokens in the host's sliding window (user-usage.ts); absent when the host keeps none. */
  readonly users?: UserView;
  /** Prefixes kept for sessions in their tool gap (retention.ts); absent when the host keeps none. */
  readonly retention?: RetentionView;
  /**
   * The largest context of a session the host has seen, in tokens (a session's prompt as routed, its context
   * as finished): how much KV one session may ask of an engine. Absent when the host does not track it.
   */
  readonly maxContextTokens?: number;
  /**
   * The KV the live sessions need, in tokens: the sum of the last context of every session seen (a turn routed
   * or finished) within the host's live window (60 s by default). Absent when the host does not track it.
   */
  readonly liveContextTokens?: number;
}

/** The host's per-user token window as of the decision (src/core/user-usage.ts). */
export interface UserView {
  /** Weighted tokens (input · inputWeight + output · outputWeight) of the user in the window; 0 if unknown. */
  tokens (userKey: bigint): number;
  /** Users with tokens in the window. */
  readonly active: number;
  /** Least tokens of an active user (a lower bound between the window's bucket boundaries); 0 with none. */
  readonly min: number;
  /** Most tokens of an active user; 0 with none. */
  readonly max: number;
}

/** How much of the prompt each pod holds, from the prefix index, computed by the host before route(). */
export interface PrefixMatch {
  /** Full blocks in the prompt. */
  readonly totalBlocks: number;
  readonly blockSize: number;
  /** Consecutive blocks from block 0 that each pod holds (on any tier), indexed by pod index. */
  matched (pod: number): number;
  /**
   * Optional, filled by hosts whose index knows tiers: how many of `matched(pod)` blocks the pod holds only on
   * an offload tier (CPU, disk), not in GPU memory. Absent means all matched blocks count as GPU-resident.
   */
  offloadedBlocks? (pod: number): number;
  /**
   * Optional: the chained key of the prompt's block `block` (0 ≤ block < totalBlocks). Key i hashes every token
   * of blocks 0..i, so it stands for the prompt's first (i + 1) · blockSize tokens (chwbl hashes a prefix with it).
   */
  blockKey? (block: number): bigint;
}

export interface RequestFeatures {
  readonly model: string;
  /** 64-bit hash of the session id, or null for a request with no session. */
  readonly sessionKey: bigint | null;
  /** The parent session of a sub-agent, if known. */
  readonly parentSessionKey: bigint | null;
  readonly promptTokens: number;
  readonly prefix: PrefixMatch;
  /** Output tokens the client said to expect (max_tokens), if it did. */
  readonly expectedOutputTokens: number | null;
  /** 64-bit hash of the user (the OpenAI `user` field, else the client's API key), or null when unknown. */
  readonly userKey: bigint | null;
  /** A uniform number in [0, 1) drawn by the host (seeded in the simulator), for policies that randomise. */
  readonly random: number;
}

export interface Decision {
  /** Index of the chosen pod (one of cluster.pods). */
  readonly pod: number;
  /** Set when the policy moves the session: its KV should come from this pod. */
  readonly migrateFrom?: number;
  /**
   * Set by a disaggregating policy (pd-static): the prompt is prefilled on this pod first and its KV moved to
   * `pod`, which decodes (through the same KV connector as a migration). Not a migration: the session's host
   * is `pod`.
   */
  readonly prefillOn?: number;
  /** A short reason for logs and metrics, from a small fixed set per policy. */
  readonly reason: string;
  /**
   * false: this decision does not keep retained prefixes although its policy does (Policy.keepsRetained; ear
   * placing by cost short of KV), so admission releases it where it was placed instead of routing it again.
   */
  readonly keepsRetained?: false;
}

export interface Policy {
  readonly name: string;
  /**
   * A disaggregating policy (pd-static) sees pods whose role is 'prefill' among its candidates, to name them in
   * `prefillOn`; it must never choose one as `pod`. Other policies never see them.
   */
  readonly disaggregated?: boolean;
  /**
   * The policy places new work where it does not evict retained prefixes while another pod has room (it reads
   * `retention` through kv-room.ts). The host's admission then keeps that true at release: a new request parked
   * on a pod whose room retained prefixes took meanwhile is routed again (admission-control.ts).
   */
  readonly keepsRetained?: boolean;
  route (req: RequestFeatures, cluster: ClusterView, now: number): Decision;
}

export type PolicyFactory = (config: Readonly<Record<string, unknown>>) => Policy;

/** A request that no policy can place (no candidate pod); the host answers 503. */
export class NoCandidateError extends EarError {
  /** The candidate filter that left no pod (candidate-filters.ts), when the routing host knows it. */
  readonly filter: string | null;
  constructor (message = 'no healthy backend serves this model', filter: string | null = null) {
    super('EAR_ERR_NO_BACKEND', filter === null ? message : `${message} (no pod passed the "${filter}" filter)`);
    this.filter = filter;
    this.name = 'NoCandidateError';
  }
}
