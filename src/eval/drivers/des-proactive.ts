// ear-proactive's migration thread, on the lab's virtual clock: every interval the thread's own planner
// (src/migration/proactive-planner.ts: idle sessions from the session table, proactiveMoves, at most
// maxMovesPerPod transfers in flight per source, one attempt per idle period) names the moves; each runs the
// connector that moves KV the shared cost estimate picks, as a pre-warm of the target in the session's tool gap
// (nixl: export on the source, then a one-token import on the target; shared-store: nothing to send; never
// recompute, as the thread never does), then rebinds through the host's compare-and-set (a turn that came
// meanwhile drops the move). What differs from the gateway is only the leg: engine requests in virtual time.
import type { DesHost } from '../../sim/des.js';
import type { BlockDigest } from '../../sim/block-hash.js';
import type { ResolvedProfile } from '../../engine-model/profile.js';
import { exportLeg } from './des-nixl.js';
import type { EarProactiveConfig } from '../../core/policies/ear.js';
import type { TransferCosts, TransferMode } from '../../migration/cost.js';
import { ProactivePlanner, type PlannedMove } from '../../migration/proactive-planner.js';
import type { MetricsCollector } from '../metrics/index.js';
import type { LabRouting } from './lab-routing.js';
import { priorityToSend, type EnginePriorityKind } from '../../core/engine-priority.js';

interface LastPrompt { sessionId: string; tokens: Uint32Array; digests: BlockDigest[] }

export interface DesProactiveOptions {
  des: DesHost;
  lab: LabRouting;
  transfers: TransferCosts;
  profile: ResolvedProfile;
  knobs: EarProactiveConfig;
  model: string;
  metrics: MetricsCollector;
  /** Planning interval (virtual ms): the gateway's proactiveIntervalMs. */
  intervalMs: number;
  /** Whether the engines order by priority (as a backend's `priority` says): legs go at the most urgent value. */
  enginePriority: EnginePriorityKind | null;
}

export class DesProactive {
  readonly #o: DesProactiveOptions;
  readonly #planner: ProactivePlanner;
  /** Each session's latest prompt: what an export of it sends (the thread's body cache). */
  readonly #last = new Map<bigint, LastPrompt>();
  #next = 0;
  #seq = 0;

  constructor (o: DesProactiveOptions) {
    this.#o = o;
    const { host } = o.lab;
    this.#planner = new ProactivePlanner({ sessions: host.sessions, load: host.load, pods: host.pods }, o.knobs);
    // Engine i is pod row i (lab-routing.ts), every one serving the lab's model.
    const models = new Set([o.model]);
    this.#planner.setBackends(new Map(o.des.engines.map((_, i) => [i, { id: `engine-${i}`, models }])));
  }

  /** A turn was sent: its prompt is the session's latest. */
  noteTurn (sessionId: string, tokens: Uint32Array, digests: BlockDigest[]): void {
    this.#last.set(this.#o.lab.host.sessionKey(sessionId), { sessionId, tokens, digests });
  }

  /** Called on the driver's sampling tick (virtual seconds); plans when the interval has passed. */
  tick (t: number): void {
    const now = t * 1000;
    if (now < this.#next) return;
    this.#next = now + this.#o.intervalMs;
    for (const m of this.#planner.plan(now, (key) => (this.#last.has(key) ? this.#o.model : undefined))) this.#move(m, t);
  }

  #move (m: PlannedMove, t: number): void {
    const o = this.#o;
    const { sessionKey: key, from, to } = m;
    const last = this.#last.get(key);
    if (last === undefined) return this.#planner.end(m); // no body: the thread skips it too
    const { tokens, digests } = last;
    // As the gateway's thread: only a connector that moves KV (proactive-transfer.ts says why not recompute).
    const choice = o.transfers.choose(tokens.length, { pending: m.sourceBacklog, running: m.sourceRunning, waiting: m.sourceWaiting, priority: o.enginePriority !== null }, false);
    if (choice.mode === 'recompute') return this.#planner.end(m);
    const id = `proactive-${this.#seq++}`;
    const done = (mode: TransferMode, ok: boolean, at: number, bytes: number, exportWait?: number): void => {
      this.#planner.end(m);
      const moved = ok && o.lab.host.rebindIdle(key, from, to, at * 1000);
      o.metrics.migration({ at, sessionId: last.sessionId, from, to, tokens: moved ? tokens.length : 0, bytes: moved ? bytes : 0, transferTime: at - t, mode, ok: moved, exportWait });
    };
    if (choice.mode === 'shared-store') return done('shared-store', true, t, o.transfers.bytes(tokens.length));
    // Both legs at the most urgent value, as the thread sends them (proactive-transfer.ts, leg-priority.ts).
    const priority = priorityToSend(o.enginePriority, true, 'urgent') ?? undefined;
    const request = (suffix: string, extra: object) => ({
      id: `${id}${suffix}`, promptTokenIds: tokens, maxTokens: 1, minTokens: 0, ignoreEos: true, stopTokenIds: [],
      loraName: null, cacheSalt: null, seed: 0, arrivalTime: t, blockHashes: digests, priority, ...extra
    });
    exportLeg(o.des, o.profile, from, request('#export', {}), t, {
      held: (xt, kvImport, _pull, waited) => {
        o.des.submit(to, request('#warm', { kvImport }), xt, {
          onFinish: (ft) => done('nixl', true, ft, o.transfers.bytes(kvImport.prefixTokenIds.length), waited),
          onError: (ft) => done('nixl', false, ft, 0)
        });
      },
      failed: (xt) => done('nixl', false, xt, 0)
    });
  }
}
