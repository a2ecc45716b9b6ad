// ear-proactive's migration thread, on the lab's virtual clock: every interval, the idle sessions (nothing in
// flight, no migration under way) are read from the session table and proactiveMoves (the policy's pure
// planner, the one the gateway's thread calls) names the moves; each runs the connector that moves KV the shared
// cost estimate picks, as a pre-warm of the target in the session's tool gap (nixl: export on the source, then a
// one-token import on the target; shared-store: nothing to send; never recompute, as the thread never does),
// and then rebinds through the host's compare-and-set (a turn that came meanwhile drops the move).
import type { DesHost } from '../../sim/des.js';
import type { BlockDigest } from '../../sim/block-hash.js';
import { transferTime, type ResolvedProfile } from '../../sim/profile.js';
import { proactiveMoves, type EarProactiveConfig, type IdleCandidate } from '../../core/policies/ear.js';
import type { TransferCosts, TransferMode } from '../../migration/cost.js';
import type { MetricsCollector } from '../metrics/index.js';
import type { LabRouting } from './lab-routing.js';

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
}

export class DesProactive {
  readonly #o: DesProactiveOptions;
  /** Each session's latest prompt: what an export of it sends. */
  readonly #last = new Map<bigint, LastPrompt>();
  /** Transfers under way per source pod (at most maxMovesPerPod). */
  readonly #busy = new Map<number, number>();
  #next = 0;
  #seq = 0;

  constructor (o: DesProactiveOptions) {
    this.#o = o;
  }

  /** A turn was sent: its prompt is the session's latest. */
  noteTurn (sessionId: string, tokens: Uint32Array, digests: BlockDigest[]): void {
    this.#last.set(this.#o.lab.host.sessionKey(sessionId), { sessionId, tokens, digests });
  }

  /** Called on the driver's sampling tick (virtual seconds); plans when the interval has passed. */
  tick (t: number): void {
    const o = this.#o;
    const now = t * 1000;
    if (now < this.#next) return;
    this.#next = now + o.intervalMs;
    const idle: IdleCandidate[] = [];
    for (const s of o.lab.host.sessions.scan()) {
      if (s.inFlight === 0 && s.host >= 0 && s.migratingFrom < 0 && this.#last.has(s.key)) idle.push(s);
    }
    if (idle.length === 0) return;
    for (const m of proactiveMoves(idle, o.lab.host.clusterView(o.model, now), now, o.knobs)) {
      const busy = this.#busy.get(m.from) ?? 0;
      if (busy >= o.knobs.maxMovesPerPod) continue;
      this.#busy.set(m.from, busy + 1);
      this.#move(m.sessionKey, m.from, m.to, t);
    }
  }

  #move (key: bigint, from: number, to: number, t: number): void {
    const o = this.#o;
    const last = this.#last.get(key)!;
    const { tokens, digests } = last;
    // As the gateway's thread: only a connector that moves KV (proactive-transfer.ts says why not recompute).
    const choice = o.transfers.choose(tokens.length, o.lab.host.load.pendingPrefill(from), false);
    const id = `proactive-${this.#seq++}`;
    const done = (mode: TransferMode, ok: boolean, at: number, bytes: number): void => {
      this.#busy.set(from, (this.#busy.get(from) ?? 1) - 1);
      const moved = ok && o.lab.host.rebindIdle(key, from, to, at * 1000);
      o.metrics.migration({ at, sessionId: last.sessionId, from, to, tokens: moved ? tokens.length : 0, bytes: moved ? bytes : 0, transferTime: at - t, mode, ok: moved });
    };
    const request = (suffix: string, extra: object) => ({
      id: `${id}${suffix}`, promptTokenIds: tokens, maxTokens: 1, minTokens: 0, ignoreEos: true, stopTokenIds: [],
      loraName: null, cacheSalt: null, seed: 0, arrivalTime: t, blockHashes: digests, ...extra
    });
    const warm = (at: number, mode: TransferMode, bytes: number, kvImport: { prefixTokenIds: number[]; sourceEngineId: string } | null): void => {
      o.des.submit(to, request('#warm', { kvImport }), at, {
        onFinish: (ft) => done(mode, true, ft, bytes),
        onError: (ft) => done(mode, false, ft, 0)
      });
    };
    if (choice.mode === 'shared-store') return done('shared-store', true, t, o.transfers.bytes(tokens.length));
    if (choice.mode === 'recompute') {
      this.#busy.set(from, (this.#busy.get(from) ?? 1) - 1);
      return;
    }
    o.des.submit(from, request('#export', { kvExport: true }), t, {
      onFinish: (xt) => {
        const held = o.des.engines[from].heldBlocks(`${id}#export`);
        if (held === null) return done('nixl', false, xt, 0);
        const pull = transferTime(o.profile, held.length);
        o.des.abort(from, `${id}#export`, xt + pull);
        warm(xt, 'nixl', o.transfers.bytes(held.length), { prefixTokenIds: held, sourceEngineId: `engine-${from}` });
      },
      onError: (xt) => done('nixl', false, xt, 0)
    });
  }
}
