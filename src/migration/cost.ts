// Which KV connector moves a session's context: the one with the lowest estimated time to have the context
// computed on the target (ARCHITECTURE.md "Migration (EAR)", kv-transfer.md §6 "Policy sketch"):
//   nixl          the source's backlog (the export leg queues behind it) + the export leg + setup
//                 + bytes / link bandwidth
//   shared-store  setup + bytes / the store's load bandwidth (the target reads what the source saved)
//   recompute     prefilling the context on the target (profile step-time model)
// bytes = tokens × KV bytes per token. The figures come from an engine profile (src/sim/profiles, the same
// numbers the simulator runs on); the export leg's time is measured (an EMA of the legs this process ran),
// since it is the one part that depends on the source's load. Only the modes the fleet offers compete, and an
// override forces one. The estimate leaves out the target's queue: every mode waits in it alike.
import type { EngineProfile } from '../sim/profile.js';
import { kvBytesPerToken } from '../sim/profile.js';

export const TRANSFER_MODES = ['nixl', 'shared-store', 'recompute'] as const;
export type TransferMode = typeof TRANSFER_MODES[number];

export interface TransferCostModel {
  kvBytesPerToken: number;
  /** Engine-to-engine link (NIXL over RDMA). */
  link: { bytesPerSecond: number; setup: number };
  /** The shared offload store's load path. */
  store: { bytesPerSecond: number; setup: number };
  /** Prefill: seconds per new token, per token pair (attention), per step, and tokens per step. */
  prefill: { perToken: number; attnPerTokenPair: number; stepOverhead: number; tokensPerStep: number };
  /** First guess of the export leg (a prefix hit plus one decoded token on the source), seconds. */
  exportLeg: number;
}

/** A remote store read over the network when a profile names none (LMCache/Mooncake over RDMA or fast TCP). */
const DEFAULT_STORE = { bytesPerSecond: 1.5e10, setup: 0.003 };

export function costModelOf (p: EngineProfile): TransferCostModel {
  const offload = (p as EngineProfile & { offload?: { loadBytesPerSecond?: number; setup?: number } }).offload;
  return {
    kvBytesPerToken: kvBytesPerToken(p.model),
    link: { bytesPerSecond: p.transfer.bytesPerSecond, setup: p.transfer.setup },
    store: { bytesPerSecond: offload?.loadBytesPerSecond ?? DEFAULT_STORE.bytesPerSecond, setup: offload?.setup ?? DEFAULT_STORE.setup },
    prefill: { perToken: p.step.prefillPerToken, attnPerTokenPair: p.step.prefillAttnPerTokenPair, stepOverhead: p.step.stepOverhead, tokensPerStep: p.maxNumBatchedTokens },
    // Two steps: the prefix hit's last-token recompute and the one decoded token.
    exportLeg: 2 * p.step.stepOverhead
  };
}

export interface TransferChoice {
  mode: TransferMode;
  /** Estimated seconds until the context is computed on the target. */
  seconds: number;
  /** The estimate of every mode offered, for logs and the evaluation. */
  estimates: Partial<Record<TransferMode, number>>;
}

/** EMA weight of a new export-leg measurement. */
const EXPORT_EMA = 0.2;

export class TransferCosts {
  readonly #m: TransferCostModel;
  readonly #modes: readonly TransferMode[];
  readonly #override: TransferMode | null;
  #exportLeg: number;

  /**
   * `modes`: what the fleet offers (recompute always works, and is added if missing). `override`: always this
   * mode (it must be offered).
   */
  constructor (model: TransferCostModel, modes: readonly TransferMode[], override: TransferMode | null = null) {
    this.#m = model;
    this.#modes = modes.includes('recompute') ? [...modes] : [...modes, 'recompute'];
    if (override !== null && !this.#modes.includes(override)) throw new RangeError(`KV connector ${override} is forced but not offered (offered: ${this.#modes.join(', ')})`);
    this.#override = override;
    this.#exportLeg = model.exportLeg;
  }

  get modes (): readonly TransferMode[] { return this.#modes; }

  /**
   * Seconds `mode` needs to give the target `tokens` of context. `sourceBacklog`: prompt tokens queued or being
   * prefilled on the source ahead of an export leg (its pending prefill), which the leg waits behind (FCFS, as
   * vLLM schedules): a hot source makes nixl slow, the reason a migration happens at all.
   */
  estimate (mode: TransferMode, tokens: number, sourceBacklog = 0): number {
    const m = this.#m;
    const n = Math.max(0, tokens);
    switch (mode) {
      case 'nixl': return this.#exportLeg + this.#prefillSeconds(sourceBacklog) + m.link.setup + n * m.kvBytesPerToken / m.link.bytesPerSecond;
      case 'shared-store': return m.store.setup + n * m.kvBytesPerToken / m.store.bytesPerSecond;
      case 'recompute': return this.#prefillSeconds(n);
    }
  }

  /** Prefill of `n` tokens from scratch, by the profile's step-time model. */
  #prefillSeconds (n: number): number {
    const p = this.#m.prefill;
    const t = Math.max(0, n);
    return Math.ceil(t / p.tokensPerStep) * p.stepOverhead + p.perToken * t + p.attnPerTokenPair * t * t / 2;
  }

  /**
   * The cheapest offered mode for `tokens` of context (the override, if set); `sourceBacklog` as for estimate.
   * `recompute` false: the cheapest that moves KV, recompute only when nothing else is offered.
   */
  choose (tokens: number, sourceBacklog = 0, recompute = true): TransferChoice {
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
  observeExport (seconds: number, sourceBacklog = 0): void {
    if (!Number.isFinite(seconds) || seconds < 0) return;
    const own = Math.max(0, seconds - this.#prefillSeconds(sourceBacklog));
    this.#exportLeg += EXPORT_EMA * (own - this.#exportLeg);
  }

  /** Bytes `tokens` of context weigh. */
  bytes (tokens: number): number {
    return Math.max(0, tokens) * this.#m.kvBytesPerToken;
  }
}

export function parseTransferMode (v: string): TransferMode {
  if (!(TRANSFER_MODES as readonly string[]).includes(v)) throw new RangeError(`KV connector must be one of ${TRANSFER_MODES.join(', ')}, got ${JSON.stringify(v)}`);
  return v as TransferMode;
}
