// How much each pod can take now, for the admission queue (docs/architecture.md#admit). Pure:
// the host feeds it engine reports and asks it with the pod's fresh counters.
//
// Signals, any of which limits a pod:
// - a configured `maxConcurrent` (requests in flight from this gateway);
// - the engine's own figures: when it reports requests waiting, it had more than it could batch (max_num_seqs
//   or KV blocks ran out), so what it was running is its concurrency limit now. The limit is an EMA of those
//   samples (α = `ema`), so one scrape's swing neither flushes the queue nor starves the pod; while the engine
//   reports nothing waiting but runs at the limit, the limit creeps up by one a report (it may have room the
//   last saturation hid). A release cycle's batch for the pod is then limit − in flight;
// - KV usage at or above `kvHighWatermark`: the engine would queue or preempt what it gets;
// - pending prefill tokens against `prefillBudgetTokens` (0 = no budget): prompts sent and not yet computed;
// - `holdEngineQueue` (on under atlas, plas and vtc): nothing of this gateway's may wait in the engine, so that
//   who waits is decided by the gateway's order and not the engine's FIFO. A scrape that shows requests waiting
//   says how many the engine runs at once (its seats: running then); one that shows none while it runs at
//   least that many raises them by one (it may have more). Between scrapes the engine's count is kept current
//   from this gateway's own starts and ends: its in flight now, plus what the engine had beyond this gateway's
//   in flight at the scrape (another client's, a KV leg). A pod is full when that reaches its seats. Until a
//   scrape has shown the engine queuing, nothing is known and nothing is held. The seats bind only while a
//   prompt of this gateway's is still being computed there: an engine with chunked prefill mostly queues for
//   token budget behind a running prefill, not for seats (measured, bench/RESULTS.md "Engine priority"), so
//   once every request of ours there is past its prefill its budget is free and the next request starts at
//   once: holding it then would idle the engine until the next scrape raised the seats (work conservation).
//   At most that one request can wait in an engine that really is out of seats (it holds the pending prefill).
// A pod with nothing in flight always has room for one request, so stale figures can never stall it.
// With no signal at all (no limit configured, none learned, no budget) every pod has room: the scheduler passes
// through, as if off.

export interface CapacityOptions {
  /** Learn a concurrency limit from the engine's reports (running when it had requests waiting). */
  learnLimit: boolean;
  /** Smoothing of the learned limit (weight of the newest sample). */
  ema: number;
  kvHighWatermark: number;
  /** Pending prefill a pod may hold before it takes no more prompts; 0 = unbounded. */
  prefillBudgetTokens: number;
  /** Release to a pod only while the engine would run it at once (no request of this gateway's waiting there). */
  holdEngineQueue: boolean;
}

export const CAPACITY_DEFAULTS: Readonly<CapacityOptions> = Object.freeze({ learnLimit: false, ema: 0.3, kvHighWatermark: 0.97, prefillBudgetTokens: 0, holdEngineQueue: false });

interface PodCapacity {
  configured: number;
  learned: number;
  kvUsage: number;
  /** Requests the engine runs at once, as its last saturated scrape showed (0: never seen queuing). */
  seats: number;
  /** What the engine had at the last scrape beyond this gateway's in flight then (another client's, KV legs). */
  others: number;
}

export class CapacityEstimator {
  readonly opts: Readonly<CapacityOptions>;
  readonly #pods: Array<PodCapacity | undefined> = [];

  constructor (opts: Partial<CapacityOptions> = {}) {
    this.opts = Object.freeze({ ...CAPACITY_DEFAULTS, ...opts });
  }

  #pod (row: number): PodCapacity {
    return (this.#pods[row] ??= { configured: 0, learned: 0, kvUsage: 0, seats: 0, others: 0 });
  }

  /** A pod's configured limit on requests in flight (0 = none). */
  configure (row: number, maxConcurrent: number): void {
    this.#pod(row).configured = maxConcurrent;
  }

  /** The row left: nothing learned about it holds for its next pod. */
  reset (row: number): void {
    this.#pods[row] = undefined;
  }

  /** An engine report (the pod's own figures at a scrape), with this gateway's requests in flight there then. */
  report (row: number, running: number, waiting: number, kvUsage: number, inFlight = 0): void {
    const p = this.#pod(row);
    p.kvUsage = kvUsage;
    if (waiting > 0) p.seats = Math.max(1, running);
    else if (p.seats > 0 && running >= p.seats) p.seats = running + 1;
    p.others = Math.max(0, running + waiting - inFlight);
    if (!this.opts.learnLimit) return;
    if (waiting > 0 && running > 0) {
      p.learned = p.learned === 0 ? running : p.learned + this.opts.ema * (running - p.learned);
    } else if (waiting === 0 && p.learned > 0 && running >= Math.floor(p.learned)) {
      p.learned += 1;
    }
  }

  /** The pod's concurrency limit now (Infinity when nothing limits it), the engine's seats included. */
  limit (row: number): number {
    return Math.min(this.#fixedLimit(row), this.#seatLimit(row));
  }

  /** The configured and the learned limit (Infinity when neither is set). */
  #fixedLimit (row: number): number {
    const p = this.#pods[row];
    if (p === undefined) return Infinity;
    let l = Infinity;
    if (p.configured > 0) l = p.configured;
    if (p.learned > 0) l = Math.min(l, Math.max(1, Math.floor(p.learned)));
    return l;
  }

  /** What the engine's seats leave this gateway under holdEngineQueue (Infinity: not held, or never seen queuing). */
  #seatLimit (row: number): number {
    const p = this.#pods[row];
    if (p === undefined || !this.opts.holdEngineQueue || p.seats === 0) return Infinity;
    return Math.max(1, p.seats - p.others);
  }

  /** The engine's seats as last learned (0: unknown), for tests and stats. */
  seats (row: number): number {
    return this.#pods[row]?.seats ?? 0;
  }

  /** Whether the pod can take a request expecting `prefill` prompt tokens to compute. */
  hasRoom (row: number, inFlight: number, pendingPrefill: number, prefill: number): boolean {
    if (inFlight === 0) return true;
    if (inFlight >= this.#fixedLimit(row)) return false;
    if (pendingPrefill > 0 && inFlight >= this.#seatLimit(row)) return false;
    const p = this.#pods[row];
    if (p !== undefined && p.kvUsage >= this.opts.kvHighWatermark) return false;
    const budget = this.opts.prefillBudgetTokens;
    return budget === 0 || pendingPrefill === 0 || pendingPrefill + prefill <= budget;
  }
}
