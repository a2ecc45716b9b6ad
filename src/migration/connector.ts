// The KvTransferConnector contract (kv-transfer.md §6): how a request's KV gets from a source engine to the
// engine that serves it, for a session's migration and for the static prefill/decode baseline alike.
// prepare() runs on the source before the target is called (may do nothing); decorate() builds the target's
// body from the client's and the plan. Engines are reached through TransferPeer, so the same connectors run on
// the gateway's main thread (its backends' pools) and on the migration thread (its own pools).
import type { TransferMode } from './cost.js';
import type { EnginePriorityKind } from '../core/engine-priority.js';

/** One engine's answer, buffered. status null: no answer (connection failed, timed out, too large). */
export interface PeerAnswer {
  status: number | null;
  contentType: string;
  body: Buffer;
}

/** Cancels a leg when its client goes away (the gateway's ResponseState has this shape). */
export interface LegSignal {
  aborted: boolean;
  onAbort: (() => void) | null;
}

export interface TransferPeer {
  readonly id: string;
  /** Host of the engine's URL: what `remote_host` becomes when the engine reports a loopback side channel. */
  readonly host: string;
  /** Whether (and in which polarity) its engine orders by request priority: a leg sent to it goes first. Absent: no. */
  readonly priority?: EnginePriorityKind | null;
  /** One non-streaming POST to the engine; never throws. */
  post (path: string, body: Buffer, requestId: string, signal: LegSignal): Promise<PeerAnswer>;
}

export interface TransferPlan {
  mode: TransferMode;
  /** nixl: the params the source returned, to be put verbatim in the target's body. */
  kvTransferParams?: Record<string, unknown>;
  /** Seconds the source leg took (nixl). */
  exportSeconds?: number;
  /** Why the connector could not prepare the transfer (the caller falls back). */
  failure?: string;
}

export interface KvTransferConnector {
  readonly mode: TransferMode;
  prepare (body: Readonly<Record<string, unknown>>, path: string, src: TransferPeer, requestId: string, signal: LegSignal): Promise<TransferPlan>;
  /** The target's body, or null when it is the client's unchanged. Pure. */
  decorate (body: Readonly<Record<string, unknown>>, plan: TransferPlan): Record<string, unknown> | null;
}

/**
 * shared-store: the engines share an offload store (LMCache or Mooncake store), so the target finds what the
 * source saved by itself; moving is re-routing. recompute: the target prefills the context anew.
 */
export function passThrough (mode: 'shared-store' | 'recompute'): KvTransferConnector {
  return {
    mode,
    prepare: async () => ({ mode }),
    decorate: () => null
  };
}
