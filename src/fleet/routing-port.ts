// The routing core and its tables as the rest of the gateway sees them, one port per caller: `Placements`, all that
// the request pipeline (src/request/) asks — a decision for a request and the bookkeeping that keeps load and
// sessions fresh as it moves along; `BackendRouting`, what the backend list (fleet.ts) tells it of its backends;
// `ContextSessions`, what explicit contexts (gateway/contexts.ts) ask; and `Fleet`, what the scheduler's clock,
// /metrics and the admin routes ask. TableRouting (over the routing host) implements them all (`RoutingState`).
import type { Backend } from './backends.js';
import type { Usage } from '../upstream/stream-observer.js';
import type { EngineLoad } from './engine-metrics.js';
import type { HostRequest, MigrationStats } from '../core/routing-host.js';
import type { AdmissionStats, DropReason, Queued, ReleaseInfo } from '../core/admission-control.js';
import type { AdmissionRank } from '../core/engine-priority.js';

export type { Queued, ReleaseInfo, DropReason };

/** Told what became of a request submitted to admission. */
export interface GatewayWaiter {
  /** `info.queued` false: it could go at once (a data-plane thread hears even that through its waiter). */
  released (p: Placement, info: ReleaseInfo & { queued?: boolean }): void;
  dropped (reason: DropReason, now: number): void;
  /** What submit throws on the main thread (queue full, no candidate), as a data-plane thread hears it: later. */
  refused? (err: unknown): void;
}

/** A request as the routing host takes it (block keys empty when the prompt was not hashed, e.g. a batch). */
export type RoutingInput = HostRequest;

/** A request placed on a backend; handed back to the bookkeeping calls. */
export interface Placement {
  readonly backend: Backend;
  readonly reason: string;
  /** Prompt tokens expected to be computed (not cached) on that backend: counted as its pending prefill until the first token. */
  readonly expectedPrefill: number;
  /** Leading prompt blocks the prefix index placed on that backend when it was chosen (traces), if the state says. */
  readonly matchedBlocks?: number;
  readonly decidedAt: number;
  /** When the routing state counted it dispatched, if it keeps that (its service is measured from there). */
  readonly dispatchedAt?: number;
  /** The backend its KV is to come from through a KV connector (a migration's source, a P/D prefill pod), if any. */
  readonly transferFrom?: Backend | null;
  /** The policy moved the request's session here from transferFrom (else a P/D prefill, or nothing). */
  readonly migrating?: boolean;
  /** Where admission ranked it (class, order), if the state ranks: the engine priority it is sent with. */
  readonly rank?: AdmissionRank;
}

/**
 * What the request pipeline asks of routing. On the main thread it is the routing host itself (TableRouting) and
 * answers at once; on a data-plane thread (httpThreads ≥ 2) the owner answers by message, so the calls that
 * return a decision may return a promise of it (src/gateway/owner-client.ts).
 */
export interface Placements {
  /**
   * Chooses a backend among those serving the model, excluding `exclude` (backends that already failed this
   * request). `attempt` > 0 is a retry of the same request, never a migration of its session.
   */
  route (input: RoutingInput, exclude: ReadonlySet<number>, now: number, attempt?: number): Placement | Promise<Placement>;
  /**
   * Admission: the placement, already started, when the request may go now; else it waits (a handle for
   * cancel) and `waiter` hears when it is released (placed and started) or dropped. Throws QueueFullError at
   * the queue's bound, NoCandidateError when no backend serves the model. `priorityClass`: 0 high, 1 normal, 2 low.
   */
  submit (input: RoutingInput, waiter: GatewayWaiter, now: number, priorityClass: number): Placement | Queued;
  /** A waiting request leaves the queue (its client went away); false if it was released or dropped already. */
  cancel (q: Queued): boolean;
  /** Whether a backend beyond `exclude` could still take a request for `model` (a retry would find one). */
  hasCandidate (model: string, exclude: ReadonlySet<number>): boolean;
  /** The request was sent. */
  started (p: Placement, input: RoutingInput, now: number): void;
  /** The first content token passed. */
  firstToken (p: Placement, now: number): void;
  /** The request ended (any outcome). `usage` is what the engine reported, if it did. */
  /**
   * The request ended. `retain`: its turn ended in a tool call, or the client asked its prefix kept for `ttlMs`
   * (cache_control, agentic_context): the host retains the prefix on its engine (src/core/retention.ts).
   */
  finished (p: Placement, input: RoutingInput, usage: Usage | null, ok: boolean, now: number, retain?: Retain): void;
  /**
   * A migration's transfer ended (RoutingHost.migrationEnded): ok, or failed, when the placement on the
   * source is returned (to be started and sent there instead); null when nothing is to be redone.
   */
  migrationEnded? (p: Placement, ok: boolean, now: number): Placement | null | Promise<Placement | null>;
  /** Prompt tokens sent to `b` and not yet computed (its pending prefill, as policies see it). */
  pendingPrefill? (b: Backend): number;
  /** `b`'s engine's running and waiting requests at its last scrape (the load table's engine half, as policies see it). */
  engineQueue? (b: Backend): { running: number; waiting: number };
}

/** What a finished turn asks of retention: kept for a tool gap (ttlMs null: the session's learnt gap) or a hint's TTL. */
export interface Retain { toolCall: boolean; ttlMs: number | null }

/** What the backend list (fleet.ts) tells routing: a backend's pod row, its comings and goings, its engine's reports. */
export interface BackendRouting {
  /** A pod row for a new backend (its `index`); throws PodRowsFullError when every row is in use. */
  admit (id: string): number;
  /** The backend leaves (reload, discovery): nothing new goes to it, its sessions are unbound. */
  retire (b: Backend): void;
  /** The retired backend has nothing in flight: its row is purged and freed for the next backend. */
  release (b: Backend): Promise<void>;
  /** A backend's health, role or draining state changed, or a backend was added. */
  backendChanged (b: Backend, now: number): void;
  /** A backend's engine reported its load (/metrics). */
  engineLoad (b: Backend, load: EngineLoad, now: number): void;
  /** A backend's engine is a new process (its /metrics start time changed): what the tables hold of its cache is stale. */
  engineRestarted? (b: Backend): void;
}

/** Runs around the routing decisions of a session's requests (explicit contexts keep their session bound and alive). */
export interface RouteHook {
  /** Before a session's first placement (not a retry's); `backend` finds a serving backend by id. */
  beforeRoute (sessionId: string, backend: (id: string) => Backend | null): void;
  /** After a session's placement was decided (at release, for a request that waited for admission). */
  afterRoute (sessionId: string): void;
}

/**
 * What explicit contexts (gateway/contexts.ts) ask: their sessions kept bound and alive, and where a context's
 * prefix is. Optional: a state without session tables does nothing.
 */
export interface ContextSessions {
  /** Keeps the session alive with idle TTL `ttlMs` and binds it to `backend` if it has no host. */
  holdSession? (sessionId: string, backend: Backend | null, ttlMs: number, now: number): void;
  /** Sets an existing session's idle TTL (ms). */
  setSessionTtl? (sessionId: string, ttlMs: number): void;
  /** `hook` runs around every routing decision of a session's request from now on. */
  addRouteHook? (hook: RouteHook): void;
  /** Leading blocks of `keys` the prefix index places on `backend`, by kind (see RoutingHost.prefixOf); null if unknown. */
  prefixOf? (keys: BigUint64Array, backend: Backend): { gpu: number; engine: number; assumed: number; total: number } | null;
}

/** What the scheduler's clock, /metrics and the admin routes ask. */
export interface Fleet {
  /** The upkeep clock: admission timeouts, anti-starvation, release when events did not; a slice of session expiry. */
  tick (now: number): void;
  /** Every waiting request is dropped (shutdown). */
  dropAll (reason: DropReason, now: number): void;
  admissionStats (now: number): AdmissionStats;
  /** Session facts for the admin endpoint; null if unknown. */
  session (sessionId: string): Record<string, unknown> | null;
  /** Table sizes and what their bounds dropped, for /metrics. */
  tableStats (): Array<{ table: string; entries: number; dropped: number }>;
  /** Migrations started / done / failed, and turns that went to a source while their session moved. */
  migrationStats? (): MigrationStats;
}

export interface RoutingState extends Placements, BackendRouting, ContextSessions, Fleet {
  route (input: RoutingInput, exclude: ReadonlySet<number>, now: number, attempt?: number): Placement;
  migrationEnded? (p: Placement, ok: boolean, now: number): Placement | null;
}

/**
 * A decision that must be had at once: the path that calls this (ext_proc's moveTo) is not run on data-plane
 * threads (ear epp keeps one thread).
 */
export function atOnce<T> (x: T | Promise<T>): T {
  if (x instanceof Promise) throw new Error('a routing decision was asked for at once on a data-plane thread');
  return x;
}
