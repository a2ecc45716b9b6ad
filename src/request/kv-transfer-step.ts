// The request path's KV transfer step (docs/architecture.md#migrate): when a placement names a source for
// its KV (a migration's source, or a P/D prefill pod), the connector's source leg runs before the request goes
// to its backend, and the request carries what the connector adds. What a failure means:
// - a migration: the session and the request go back to the source (which still holds the KV), through the
//   routing state; the client never sees it. Counted.
// - a P/D prefill: the decode backend computes the prompt itself (llm-d falls back to decode-only the same way).
// The migration ends (the session's "migrating" mark clears) when the target's first token shows it has the KV,
// or when the request ends without one.
import type { Backend } from '../fleet/backends.js';
import { post } from '../upstream/buffered-post.js';
import type { Placement, RoutingInput, Placements } from '../fleet/routing-port.js';
import type { LegSignal, TransferPeer } from '../migration/connector.js';
import { KvTransfers } from '../migration/transfer.js';
import type { SourceBacklog } from '../migration/cost.js';
import { legPriority } from '../migration/leg-priority.js';
import type { TraceHeaders } from '../upstream/traceparent.js';

/** What a KV transfer did (its trace span's facts; the KV transfer series count them, telemetry/kv-transfer-metrics.ts). */
export interface TransferFacts {
  /** The connector used (nixl, shared-store, recompute; none when it could not start). */
  mode: string;
  ok: boolean;
  bytes: number;
  tokens: number;
  failure?: string;
  /** The source leg's time; absent when no leg ran (the source was not serving). */
  seconds?: number;
}

export interface TransferStepResult {
  placement: Placement;
  /** What the backend is sent. */
  body: Buffer;
  /** Call when the target's first token came or the request ended: ends the migration (once). Null: none. */
  arrived: ((now: number) => void) | null;
  /** What the transfer did (for its trace span); absent when the placement named no source. */
  transfer?: TransferFacts;
}

/** `trace`: the trace context the source's legs carry (the transfer's span), if any. */
export function peerOf (b: Backend, trace?: TraceHeaders): TransferPeer {
  return { id: b.id, host: new URL(b.config.url).hostname, priority: b.config.priority, post: (path, body, rid, signal) => post(b.pool, path, body, rid, signal, trace) };
}

export class KvTransferStep {
  readonly #transfers: KvTransfers;
  readonly #state: Placements;
  readonly #now: () => number;
  readonly #leave: (b: Backend) => void;

  /** `leave`: the source leg ended on `b` (the gateway's in-flight count; a draining backend goes when idle). */
  constructor (transfers: KvTransfers, state: Placements, now: () => number, leave: (b: Backend) => void) {
    this.#leave = leave;
    this.#transfers = transfers;
    this.#state = state;
    this.#now = now;
  }

  /**
   * The request's KV per its placement: the source leg if there is one, and what the backend is to be sent.
   * `trace`: the trace context the source leg carries (the transfer's span), if traced.
   */
  async run (placement: Placement, input: RoutingInput, path: string, body: Buffer, rid: string, signal: LegSignal, trace?: TraceHeaders): Promise<TransferStepResult> {
    const src = placement.transferFrom ?? null;
    if (src === null || src === placement.backend) return { placement, body, arrived: null };
    const kind = placement.migrating === true ? 'migration' : 'pd';
    if (src.gone || src.draining || src.health !== 'healthy') return this.#failed(kind, { mode: 'none', ok: false, bytes: 0, tokens: 0, failure: `the source ${src.id} is not serving` }, placement, input, body);
    src.inFlight++;
    let t;
    try {
      const peer = peerOf(src, trace);
      // A priority source takes the leg ahead of its waiting queue (cost.ts): the estimate counts what runs.
      // From the load table, which every thread reads as it is now (a data-plane thread's backend has no engine load).
      const queue = this.#state.engineQueue?.(src) ?? { running: src.engineLoad?.running ?? 0, waiting: src.engineLoad?.waiting ?? 0 };
      const sourceBacklog: SourceBacklog = {
        pending: this.#state.pendingPrefill?.(src) ?? 0, running: queue.running, waiting: queue.waiting,
        priority: legPriority(peer, path) !== null
      };
      t = await this.#transfers.transfer({ path, body, src: peer, requestId: rid, contextTokens: input.promptTokens, sourceBacklog, signal });
    } finally {
      this.#leave(src);
    }
    const transfer: TransferFacts = { mode: t.mode, ok: t.ok, bytes: t.ok ? t.bytes : 0, tokens: t.tokens, failure: t.failure, seconds: t.seconds };
    if (!t.ok) return this.#failed(kind, transfer, placement, input, body);
    if (kind !== 'migration') return { placement, body: t.body, arrived: null, transfer };
    let done = false;
    return {
      placement,
      body: t.body,
      transfer,
      arrived: (now) => {
        if (done) return;
        done = true;
        this.#state.migrationEnded?.(placement, true, now);
      }
    };
  }

  async #failed (kind: 'migration' | 'pd', transfer: TransferFacts, placement: Placement, input: RoutingInput, body: Buffer): Promise<TransferStepResult> {
    if (kind !== 'migration') return { placement, body, arrived: null, transfer };
    const now = this.#now();
    const back = (await this.#state.migrationEnded?.(placement, false, now)) ?? null;
    if (back === null) return { placement, body, arrived: null, transfer };
    this.#state.started(back, input, now);
    return { placement: back, body, arrived: null, transfer };
  }
}
