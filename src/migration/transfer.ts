// One KV transfer, from choice to the target's body: pick the connector by estimated cost (cost.ts), run its
// source leg, and build what the target is sent. A connector that fails leaves `ok` false with the reason; the
// caller decides what that means (a migration's session stays on its source; a P/D request is decoded
// without the prefill's KV). Shared by the gateway's request path and the migration thread.
import type { KvTransferConnector, LegSignal, TransferPeer } from './connector.js';
import { passThrough } from './connector.js';
import { TransferCosts, type SourceBacklog, type TransferChoice, type TransferMode } from './cost.js';
import { NixlConnector } from './nixl-connector.js';

export interface TransferRequest {
  /** The engine path of the request (/v1/chat/completions or /v1/completions). */
  path: string;
  /** The body the target would get without a transfer (client kv_transfer_params already stripped). */
  body: Buffer;
  src: TransferPeer;
  requestId: string;
  /** Tokens of context the target needs (the prompt): what the cost estimate weighs. */
  contextTokens: number;
  /** The source's pending prefill (tokens) when the transfer starts, or what its scheduler puts ahead of the leg. */
  sourceBacklog?: number | SourceBacklog;
  /** Only a connector that moves KV (nixl, shared-store): a proactive move is not worth a recompute. */
  moveKv?: boolean;
  signal: LegSignal;
}

export interface TransferOutcome {
  mode: TransferMode;
  ok: boolean;
  /** What to send the target: the client's body, decorated by the connector when it carries params. */
  body: Buffer;
  /** Seconds the source leg took (0 for connectors without one). */
  seconds: number;
  tokens: number;
  /** KV bytes the transfer moves (0 for recompute, which moves none). */
  bytes: number;
  choice: TransferChoice;
  failure?: string;
}

export class KvTransfers {
  readonly costs: TransferCosts;
  readonly #connectors: Map<TransferMode, KvTransferConnector>;

  constructor (costs: TransferCosts) {
    this.costs = costs;
    this.#connectors = new Map();
    for (const m of costs.modes) this.#connectors.set(m, m === 'nixl' ? new NixlConnector() : passThrough(m));
  }

  async transfer (r: TransferRequest): Promise<TransferOutcome> {
    const choice = this.costs.choose(r.contextTokens, r.sourceBacklog ?? 0, r.moveKv !== true);
    const c = this.#connectors.get(choice.mode)!;
    const base = { mode: choice.mode, tokens: r.contextTokens, choice };
    if (r.moveKv === true && choice.mode === 'recompute') return { ...base, ok: false, body: r.body, seconds: 0, bytes: 0, failure: 'no offered connector moves KV' };
    if (c.mode === 'recompute' || c.mode === 'shared-store') {
      return { ...base, ok: true, body: r.body, seconds: 0, bytes: c.mode === 'recompute' ? 0 : this.costs.bytes(r.contextTokens) };
    }
    let doc: Record<string, unknown>;
    try {
      doc = JSON.parse(r.body.toString('utf8')) as Record<string, unknown>;
    } catch {
      return { ...base, ok: false, body: r.body, seconds: 0, bytes: 0, failure: 'the request body is not JSON' };
    }
    const plan = await c.prepare(doc, r.path, r.src, r.requestId, r.signal);
    const seconds = plan.exportSeconds ?? 0;
    if (plan.failure !== undefined) return { ...base, ok: false, body: r.body, seconds, bytes: 0, failure: plan.failure };
    this.costs.observeExport(seconds, r.sourceBacklog ?? 0);
    const decorated = c.decorate(doc, plan);
    return { ...base, ok: true, body: decorated === null ? r.body : Buffer.from(JSON.stringify(decorated)), seconds, bytes: this.costs.bytes(r.contextTokens) };
  }
}
