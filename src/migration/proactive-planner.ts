// The migration thread's planning step (ear-proactive, issue 12 item 2): read the session, load and pod tables
// lock-free, keep the idle sessions, give them and a ClusterView to the pure proactiveMoves(), and bound what
// comes out by the transfers already in flight. It decides nothing itself; the policy's planner does.
//
// Bounds, besides the planner's own (maxMovesPerPod per hot host per call):
// - in flight: at most maxMovesPerPod transfers per source pod at once, across ticks (a move planned while its
//   source already has that many running waits for a later tick; counted as deferred);
// - one attempt per idle period: a session tried (moved, failed, or skipped for lack of a body) is not tried
//   again until its next turn changes its last activity, so a failing session is not retried every tick. The
//   memo of tried sessions is bounded (maxTried, oldest out, counted).
// Sessions move only between pods serving their model: idle sessions are planned per model (the model of the
// session's last request, from its cached body), over the pods whose backends list that model. A session whose
// model is unknown (no body cached) is planned over every pod; its move is then skipped for lack of a body.
// The planner's KV reservation covers one call only: KV promised to a target by a transfer still in flight
// from an earlier tick is not subtracted (the target's engine-reported usage catches up at its next scrape).
import { proactiveMoves, type EarProactiveConfig, type IdleCandidate, type ProactiveMove } from '../core/policies/ear.js';
import type { ClusterView, PodView } from '../core/policy.js';
import type { LoadTable } from '../core/load-table.js';
import type { PodTable } from '../core/pod-table.js';
import type { SessionTable } from '../core/session-table.js';
import { decisionsOf, loadViewOf, servingPodViews, sessionViewOf } from '../core/table-views.js';

export interface PlannerTables {
  sessions: SessionTable;
  load: LoadTable;
  pods: PodTable;
}

/** An idle session as planned: the candidate's fields and the activity stamp its attempt is remembered by. */
export interface IdleSession extends IdleCandidate {
  readonly lastActivity: number;
}

export interface PlannedMove extends ProactiveMove {
  readonly contextTokens: number;
  readonly lastActivity: number;
  /** The source's pending prefill when planned: an export leg queues behind it (all of it on an FCFS engine). */
  readonly sourceBacklog: number;
  /** The source's running and waiting requests at its last scrape (a priority engine's leg waits only behind those running). */
  readonly sourceRunning: number;
  readonly sourceWaiting: number;
}

/** A backend the thread can reach, as the planner needs it: its id and the models it serves. */
export interface PlannerBackend {
  id: string;
  models: ReadonlySet<string>;
}

export interface PlannerStats {
  /** Moves planned and handed out (each is then moved, dropped, failed or skipped for lack of a body). */
  planned: number;
  /** Moves left for a later tick because their source had maxMovesPerPod transfers in flight. */
  deferred: number;
  /** Transfers in flight now. */
  inFlight: number;
  /** Tried sessions forgotten at the memo's bound (they may be tried again in the same idle period). */
  triedEvicted: number;
}

/** A session the planner may move: nothing in flight (a tool gap), bound to a pod, not migrating already. */
export function isIdle (s: { inFlight: number; host: number; migratingFrom: number }): boolean {
  return s.inFlight === 0 && s.host >= 0 && s.migratingFrom < 0;
}

export class ProactivePlanner {
  readonly #t: PlannerTables;
  readonly #k: EarProactiveConfig;
  readonly #maxTried: number;
  /** Backends by pod row, from the main thread's backend list. */
  #backends = new Map<number, PlannerBackend>();
  /** Pods per model ('' = all), valid for one pod-table generation and one backend list. */
  #podsCache: { generation: number; backends: Map<number, PlannerBackend>; byModel: Map<string, PodView[]> } | null = null;
  readonly #inFlight = new Map<number, number>();
  readonly #moving = new Set<bigint>();
  /** Session key → last activity of the idle period in which it was tried. Map order is insertion: oldest first. */
  readonly #tried = new Map<bigint, number>();
  readonly #stats: PlannerStats = { planned: 0, deferred: 0, inFlight: 0, triedEvicted: 0 };

  constructor (tables: PlannerTables, knobs: EarProactiveConfig, opts: { maxTried?: number } = {}) {
    this.#t = tables;
    this.#k = knobs;
    this.#maxTried = opts.maxTried ?? 1 << 16;
  }

  get knobs (): EarProactiveConfig {
    return this.#k;
  }

  /** The backends the thread can reach, by pod row (a row not named here is neither source nor target). */
  setBackends (backends: ReadonlyMap<number, PlannerBackend>): void {
    this.#backends = new Map(backends);
  }

  /** Idle sessions in the session table (a lock-free scan: a hint), less those in flight or tried this idle period. */
  idleSessions (): IdleSession[] {
    const out: IdleSession[] = [];
    for (const s of this.#t.sessions.scan()) {
      if (!isIdle(s) || this.#moving.has(s.key) || this.#tried.get(s.key) === s.lastActivity) continue;
      out.push({ key: s.key, host: s.host, contextTokens: s.contextTokens, lastMigration: s.lastMigration, inFlight: s.inFlight, lastActivity: s.lastActivity });
    }
    return out;
  }

  /**
   * The pods that serve (ready, not prefill-only, reachable; serving `model` when one is given) and their load,
   * as the policy's planner sees them.
   */
  clusterView (model = ''): ClusterView {
    const { pods, load, sessions } = this.#t;
    const generation = pods.generation;
    let c = this.#podsCache;
    // Rebuilt only when a pod or the backend list changed: the same arrays otherwise, as the host keeps them.
    if (c === null || c.generation !== generation || c.backends !== this.#backends) {
      c = this.#podsCache = { generation, backends: this.#backends, byModel: new Map() };
    }
    let list = c.byModel.get(model);
    if (list === undefined) {
      const backends = this.#backends;
      list = servingPodViews(pods, (row) => {
        const b = backends.get(row);
        return b !== undefined && (model === '' || b.models.has(model)) ? b.id : undefined;
      });
      // Bounded by the models the backends serve (and '').
      if (model === '' || [...backends.values()].some((b) => b.models.has(model))) c.byModel.set(model, list);
    }
    return { pods: list, load: loadViewOf(load), sessions: sessionViewOf(sessions), decisions: decisionsOf(load, list), placements: 0 }; // it places no new sessions
  }

  /**
   * The moves to start now: proactiveMoves over the idle sessions of each model (`modelOf`: the session's model,
   * undefined if unknown), then at most maxMovesPerPod in flight per source. Each returned move is in flight
   * (begun) until end() is called for it.
   */
  plan (now: number, modelOf: (key: bigint) => string | undefined = () => undefined): PlannedMove[] {
    const idle = this.idleSessions();
    if (idle.length === 0) return [];
    const byModel = new Map<string, IdleSession[]>();
    for (const s of idle) {
      const model = modelOf(s.key) ?? '';
      let list = byModel.get(model);
      if (list === undefined) byModel.set(model, list = []);
      list.push(s);
    }
    const byKey = new Map(idle.map((s) => [s.key, s]));
    const out: PlannedMove[] = [];
    for (const [model, sessions] of byModel) {
      const cluster = this.clusterView(model);
      if (cluster.pods.length < 2) continue;
      this.#take(proactiveMoves(sessions, cluster, now, this.#k), byKey, out);
    }
    return out;
  }

  /** Begins the planned moves whose source has room for another transfer. */
  #take (moves: readonly ProactiveMove[], byKey: ReadonlyMap<bigint, IdleSession>, out: PlannedMove[]): void {
    for (const m of moves) {
      if ((this.#inFlight.get(m.from) ?? 0) >= this.#k.maxMovesPerPod) {
        this.#stats.deferred++;
        continue;
      }
      const s = byKey.get(m.sessionKey)!;
      const move: PlannedMove = { ...m, contextTokens: s.contextTokens, lastActivity: s.lastActivity, sourceBacklog: this.#t.load.pendingPrefill(m.from),
        sourceRunning: this.#t.load.running(m.from), sourceWaiting: this.#t.load.waiting(m.from) };
      this.#begin(move);
      out.push(move);
    }
  }

  #begin (m: PlannedMove): void {
    this.#inFlight.set(m.from, (this.#inFlight.get(m.from) ?? 0) + 1);
    this.#moving.add(m.sessionKey);
    this.#tried.delete(m.sessionKey); // re-inserted last: the most recent
    this.#tried.set(m.sessionKey, m.lastActivity);
    for (const k of this.#tried.keys()) {
      if (this.#tried.size <= this.#maxTried) break;
      this.#tried.delete(k);
      this.#stats.triedEvicted++;
    }
    this.#stats.planned++;
    this.#stats.inFlight++;
  }

  /** The move's transfer is over (any outcome): its source has room for another. */
  end (m: PlannedMove): void {
    if (!this.#moving.delete(m.sessionKey)) return;
    const n = (this.#inFlight.get(m.from) ?? 1) - 1;
    if (n > 0) this.#inFlight.set(m.from, n);
    else this.#inFlight.delete(m.from);
    this.#stats.inFlight--;
  }

  /** Transfers in flight from `pod` now. */
  inFlightFrom (pod: number): number {
    return this.#inFlight.get(pod) ?? 0;
  }

  stats (): PlannerStats {
    return { ...this.#stats };
  }
}
