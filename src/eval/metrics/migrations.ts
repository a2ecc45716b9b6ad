// The migration microbenchmark of one run (issue 12 item 5): moves by mode, failed transfers, trigger rate,
// transfer time and bytes, thrash, and accuracy (did the target stay below tHot for the moved session's next k
// turns). The collector forwards its events here; this file knows nothing else of the run.
import { Latency, percentile, type LatencySummary } from './latency.js';

export const MIGRATION_MODES = ['nixl', 'shared-store', 'recompute'] as const;
export type MigrationMode = typeof MIGRATION_MODES[number];

export interface Migration {
  at: number;
  sessionId: string;
  from: number;
  to: number;
  tokens: number;
  bytes: number;
  /** Seconds the KV transfer took (for a failed one: until it was given up). */
  transferTime: number;
  /** NIXL: seconds the export leg waited in the source's queue before its first step (drivers that know it). */
  exportWait?: number;
  /** How the KV moved; absent from drivers that do not say (counted as `unspecified`). */
  mode?: MigrationMode;
  /** false: the transfer failed and the session stayed on its source. Absent or true: the session moved. */
  ok?: boolean;
}

export type ModeCounts = Record<MigrationMode | 'unspecified', number>;

/** Plain-number distribution (bytes are no latency: no µs rounding). */
export interface Distribution { count: number; mean: number; p50: number; p99: number; max: number }

export interface MigrationAccuracy {
  /** Pending prefill (tokens) the target must stay at or below. */
  tHot: number;
  /** Turns of the moved session that are looked at after each move. */
  k: number;
  /** Moves whose target stayed ≤ tHot at every one of the session's next (up to k) sends. */
  accurate: number;
  /** Successful moves followed by at least one send of the session (a move with none cannot be judged). */
  judged: number;
  /** accurate / judged; null when nothing was judged. */
  share: number | null;
}

export interface MigrationSummary {
  /** Successful moves (ok !== false). Thrash, tokens, bytes and transfer times count these only. */
  count: number;
  /** Failed transfers (ok === false): the session stayed on its source. */
  failed: number;
  byMode: ModeCounts;
  failedByMode: ModeCounts;
  /** (count + failed) / requests sent × 100: how often the policy decided to move a session. */
  triggerRatePct: number;
  tokens: number;
  bytes: number;
  /** µs, successful moves. */
  transferTime: LatencySummary;
  /** µs, successful NIXL moves: the export leg (its wait in the source's queue included) plus the pull. */
  nixlTransferTime: LatencySummary;
  /** µs, successful NIXL moves whose driver measured it: the export leg's wait in the source's queue alone. */
  nixlExportWait: LatencySummary;
  /** Bytes per successful move. */
  bytesPerMove: Distribution;
  /** null when the collector has no tHot. */
  accuracy: MigrationAccuracy | null;
  thrash: number;
  thrashSessions: number;
  tCool: number;
}

export interface MigrationOptions { tCool: number; tHot?: number; k: number }

/** A move being judged: the session's next sends are checked against the target's pending prefill. */
interface Watch { to: number; left: number; seen: number; ok: boolean }

const zeroModes = (): ModeCounts => ({ nixl: 0, 'shared-store': 0, recompute: 0, unspecified: 0 });

export class MigrationStats {
  readonly #o: MigrationOptions;
  readonly #byMode = zeroModes();
  readonly #failedByMode = zeroModes();
  readonly #transfer = new Latency();
  readonly #nixlTransfer = new Latency();
  readonly #nixlExportWait = new Latency();
  readonly #bytes: number[] = [];
  readonly #lastMove = new Map<string, number>();
  readonly #thrashed = new Set<string>();
  readonly #watch = new Map<string, Watch>();
  #count = 0; #failed = 0; #tokens = 0; #bytesSum = 0; #thrash = 0;
  #accurate = 0; #judged = 0;

  constructor (o: MigrationOptions) {
    if (!(Number.isInteger(o.k) && o.k > 0)) throw new RangeError(`accuracy k must be an integer > 0, got ${o.k}`);
    this.#o = o;
  }

  /** Returns whether the session moved (the caller marks only those on the timeline). */
  record (m: Migration): boolean {
    const mode = m.mode ?? 'unspecified';
    if (m.ok === false) {
      // A failed transfer changes nothing for the session: not a move for thrash, transfer figures or accuracy.
      this.#failed++;
      this.#failedByMode[mode]++;
      return false;
    }
    this.#count++;
    this.#byMode[mode]++;
    this.#tokens += m.tokens;
    this.#bytesSum += m.bytes;
    this.#bytes.push(m.bytes);
    this.#transfer.record(m.transferTime);
    if (mode === 'nixl') this.#nixlTransfer.record(m.transferTime);
    if (mode === 'nixl' && m.exportWait !== undefined) this.#nixlExportWait.record(m.exportWait);
    const last = this.#lastMove.get(m.sessionId);
    if (last !== undefined && m.at - last < this.#o.tCool) { this.#thrash++; this.#thrashed.add(m.sessionId); }
    this.#lastMove.set(m.sessionId, m.at);
    if (this.#o.tHot !== undefined) {
      // A move before the previous one's k turns were seen ends that judgement with the turns it had.
      this.#close(m.sessionId);
      this.#watch.set(m.sessionId, { to: m.to, left: this.#o.k, seen: 0, ok: true });
    }
    return true;
  }

  /** A request of `sessionId` was sent; `pending` is the latest per-engine pending prefill sample (null: none yet). */
  sent (sessionId: string, pending: ArrayLike<number> | null): void {
    const w = this.#watch.get(sessionId);
    if (w === undefined) return;
    if (pending !== null && pending[w.to] > this.#o.tHot!) w.ok = false;
    w.seen++;
    if (--w.left === 0) this.#close(sessionId);
  }

  #close (sessionId: string): void {
    const w = this.#watch.get(sessionId);
    if (w === undefined) return;
    this.#watch.delete(sessionId);
    if (w.seen === 0) return;
    this.#judged++;
    if (w.ok) this.#accurate++;
  }

  summary (requestsSent: number): MigrationSummary {
    // Moves still watched at the end are judged on the turns that happened (idempotent: nothing is removed).
    let accurate = this.#accurate, judged = this.#judged;
    for (const w of this.#watch.values()) if (w.seen > 0) { judged++; if (w.ok) accurate++; }
    const b = this.#bytes;
    return {
      count: this.#count, failed: this.#failed, byMode: { ...this.#byMode }, failedByMode: { ...this.#failedByMode },
      triggerRatePct: requestsSent > 0 ? ((this.#count + this.#failed) / requestsSent) * 100 : 0,
      tokens: this.#tokens, bytes: this.#bytesSum, transferTime: this.#transfer.summary(),
      nixlTransferTime: this.#nixlTransfer.summary(),
      nixlExportWait: this.#nixlExportWait.summary(),
      bytesPerMove: {
        count: b.length, mean: b.length === 0 ? 0 : this.#bytesSum / b.length,
        p50: percentile(b, 50), p99: percentile(b, 99), max: b.reduce((a, x) => Math.max(a, x), 0),
      },
      accuracy: this.#o.tHot === undefined ? null : { tHot: this.#o.tHot, k: this.#o.k, accurate, judged, share: judged > 0 ? accurate / judged : null },
      thrash: this.#thrash, thrashSessions: this.#thrashed.size, tCool: this.#o.tCool,
    };
  }
}
