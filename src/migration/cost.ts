// Which KV connector moves a session's context: the one with the lowest estimated time to have the context
// computed on the target (docs/architecture.md#migration, kv-transfer.md §6 "Policy sketch"):
//   nixl          the source's backlog (the export leg queues behind it) + the export leg + the KV transfer
//   shared-store  the offload-store load (the target reads what the source saved)
//   recompute     prefilling the context on the target
// Every figure is an engine profile's, by the formulas the simulator runs on (src/engine-model/figures.ts); the
// export leg's time is measured (an EMA of the legs this process ran), since it is the one part that depends on
// the source's load. Only the modes the fleet offers compete, and an override forces one. The estimate leaves
// out the target's queue: every mode waits in it alike.
// What the export leg waits behind depends on the source's scheduler. An FCFS engine queues it behind all its
// pending prefill. A priority engine gets it at the most urgent value (src/core/engine-priority.ts), so it
// passes the waiting queue but not the running requests (vLLM never preempts for an arrival: it waits for a
// seat and the budget running prefills leave): only the running share of the pending prefill counts.
import { kvBytesPerToken, offloadLoadTime, prefillTime, transferTime } from '../engine-model/figures.js';
import type { EngineProfile } from '../engine-model/profile.js';

export const TRANSFER_MODES = ['nixl', 'shared-store', 'recompute'] as const;
export type TransferMode = typeof TRANSFER_MODES[number];

export interface TransferChoice {
  mode: TransferMode;
  /** Estimated seconds until the context is computed on the target. */
  seconds: number;
  /** The estimate of every mode offered, for logs and the evaluation. */
  estimates: Partial<Record<TransferMode, number>>;
}

/** The source's work an export leg may wait behind, as the gateway sees it (its pending prefill and last scrape). */
export interface SourceBacklog {
  /** Prompt tokens sent to the source and not yet computed (its pending prefill). */
  pending: number;
  /** The engine's running and waiting requests at its last scrape. */
  running: number;
  waiting: number;
  /** Whether the source orders by priority and the leg carries the most urgent one. */
  priority: boolean;
}

/**
 * Prompt tokens ahead of an export leg on its source. A number is an FCFS source's pending prefill. With a
 * priority source, the running requests' share of the pending prefill (by count at the scrape: which tokens
 * are whose is the engine's), all of it when the scrape showed none waiting.
 */
export function backlogAhead (b: number | SourceBacklog): number {
  if (typeof b === 'number') return Math.max(0, b);
  const pending = Math.max(0, b.pending);
  if (!b.priority || b.waiting <= 0) return pending;
  const running = Math.max(0, b.running);
  return pending * running / (running + b.waiting);
}

/** EMA weight of a new export-leg measurement. */
const EXPORT_EMA = 0.2;

export class TransferCosts {
  readonly #p: EngineProfile;
  readonly #kvBytesPerToken: number;
  readonly #modes: readonly TransferMode[];
  readonly #override: TransferMode | null;
  #exportLeg: number;

  /**
   * `profile`: the engines' figures. `modes`: what the fleet offers (recompute always works, and is added if
   * missing). `override`: always this mode (it must be offered).
   */
  constructor (profile: EngineProfile, modes: readonly TransferMode[], override: TransferMode | null = null) {
    this.#p = profile;
    this.#kvBytesPerToken = kvBytesPerToken(profile.model);
    this.#modes = modes.includes('recompute') ? [...modes] : [...modes, 'recompute'];
    if (override !== null && !this.#modes.includes(override)) throw new RangeError(`KV connector ${override} is forced but not offered (offered: ${this.#modes.join(', ')})`);
    this.#override = override;
    // First guess of the export leg: two steps (the prefix hit's last-token recompute and the one decoded token).
    this.#exportLeg = 2 * profile.step.stepOverhead;
  }

  get modes (): readonly TransferMode[] { return this.#modes; }

  /**
   * Seconds `mode` needs to give the target `tokens` of context. `sourceBacklog`: prompt tokens queued or being
   * prefilled on the source ahead of an export leg (its pending prefill), which the leg waits behind (FCFS, as
   * vLLM schedules): a hot source makes nixl slow, the reason a migration happens at all. A SourceBacklog
   * says what the source's scheduler puts ahead of the leg (backlogAhead).
   */
  estimate (mode: TransferMode, tokens: number, sourceBacklog: number | SourceBacklog = 0): number {
    const n = Math.max(0, tokens);
    switch (mode) {
      case 'nixl': return this.#exportLeg + prefillTime(this.#p, backlogAhead(sourceBacklog)) + transferTime(this.#p, n);
      case 'shared-store': return offloadLoadTime(this.#p, n);
      case 'recompute': return prefillTime(this.#p, n);
    }
  }

  /**
   * The cheapest offered mode for `tokens` of context (the override, if set); `sourceBacklog` as for estimate.
   * `recompute` false: the cheapest that moves KV, recompute only when nothing else is offered.
   */
  choose (tokens: number, sourceBacklog: number | SourceBacklog = 0, recompute = true): TransferChoice {
    const estimates: Partial<Record<TransferMode, number>> = {};
    let best: TransferMode = 'recompute';
    let bestSeconds = Infinity;
    for (const mode of this.#modes) {
      const s = this.estimate(mode, tokens, sourceBacklog);
      estimates[mode] = s;
      if (!recompute && mode === 'recompute') continue;
      if (s < bestSeconds) { best = mode; bestSeconds = s; }
    }
    const mode = this.#override ?? best;
    return { mode, seconds: estimates[mode]!, estimates };
  }

  /**
   * A measured export leg (seconds) that started behind `sourceBacklog` tokens: the running average keeps what
   * the backlog does not explain (the leg's own steps, the round trip), which later estimates add to theirs.
   */
  observeExport (seconds: number, sourceBacklog: number | SourceBacklog = 0): void {
    if (!Number.isFinite(seconds) || seconds < 0) return;
    const own = Math.max(0, seconds - prefillTime(this.#p, backlogAhead(sourceBacklog)));
    this.#exportLeg += EXPORT_EMA * (own - this.#exportLeg);
  }

  /** Bytes `tokens` of context weigh. */
  bytes (tokens: number): number {
    return Math.max(0, tokens) * this.#kvBytesPerToken;
  }
}

export function parseTransferMode (v: string): TransferMode {
  if (!(TRANSFER_MODES as readonly string[]).includes(v)) throw new RangeError(`KV connector must be one of ${TRANSFER_MODES.join(', ')}, got ${JSON.stringify(v)}`);
  return v as TransferMode;
}
