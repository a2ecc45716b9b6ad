// One proactive move's transfer (ear-proactive): an idle session's KV is put on its new host before its next
// turn, off the critical path. The session's last request body is replayed as a pre-warm: max_tokens 1, not
// streamed, its answer discarded. Per connector (chosen by KvTransfers, as the request path chooses):
//   nixl          export leg on the source (the connector's prepare), then the pre-warm on the target carrying
//                 the returned kv_transfer_params: the target pulls the blocks and keeps them cached;
//   shared-store  nothing to send: the target loads the context from the store on the next turn.
// Never recompute: computing an idle session's whole context again on another engine, on the chance that its
// host stays hot until its next turn, cost more than it saved in the lab (ear-proactive with recompute
// pre-warms: mean session slowdown 7.07 against ear's 4.47 at the stress regime; bench/RESULTS.md). With no
// connector that moves KV offered, the move is not made.
// A failure of either leg is a failed transfer: the caller leaves the session on its source.
import type { LegSignal, TransferPeer } from './connector.js';
import type { SourceBacklog, TransferMode } from './cost.js';
import type { KvTransfers } from './transfer.js';
import { legPriority } from './leg-priority.js';

/** Fields a one-token, non-streaming request must not carry. */
const PREWARM_DROPPED = ['stream_options', 'min_tokens', 'min_completion_tokens'];

/**
 * The pre-warm body: the session's last body computing its context and one token, not streamed; with
 * `priority` (a priority engine: the most urgent value) it passes the target's waiting queue.
 */
export function prewarmBody (body: Readonly<Record<string, unknown>>, priority: number | null = null): Record<string, unknown> {
  const b: Record<string, unknown> = { ...body };
  for (const k of PREWARM_DROPPED) delete b[k];
  delete b.priority;
  if (priority !== null) b.priority = priority;
  b.stream = false;
  b.max_tokens = 1;
  if ('max_completion_tokens' in b) b.max_completion_tokens = 1;
  return b;
}

export interface ProactiveTransferRequest {
  path: string;
  /** The session's last forwarded body (client kv_transfer_params already stripped). */
  body: Uint8Array;
  src: TransferPeer;
  dst: TransferPeer;
  /** The session's context in tokens: what the cost estimate weighs. */
  contextTokens: number;
  /** The source's pending prefill (tokens), or what its scheduler puts ahead of the export leg. */
  sourceBacklog?: number | SourceBacklog;
  requestId: string;
  signal: LegSignal;
}

export interface ProactiveTransferResult {
  mode: TransferMode | 'none';
  ok: boolean;
  /** Seconds of the source leg (nixl), 0 otherwise. */
  sourceSeconds: number;
  /** Estimated KV bytes moved (0 for recompute and failures). */
  bytes: number;
  failure?: string;
}

export async function proactiveTransfer (transfers: KvTransfers, r: ProactiveTransferRequest): Promise<ProactiveTransferResult> {
  let doc: Record<string, unknown>;
  try {
    doc = JSON.parse(Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength).toString('utf8')) as Record<string, unknown>;
  } catch {
    return { mode: 'none', ok: false, sourceSeconds: 0, bytes: 0, failure: 'the session\'s body is not JSON' };
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return { mode: 'none', ok: false, sourceSeconds: 0, bytes: 0, failure: 'the session\'s body is not a JSON object' };
  // The export leg is built from this body too: both legs carry the same messages, as NIXL requires.
  // The export leg sets the source's own priority on its copy (nixl-connector.ts); the target's is this one.
  const warm = Buffer.from(JSON.stringify(prewarmBody(doc, legPriority(r.dst, r.path))));
  const t = await transfers.transfer({
    path: r.path, body: warm, src: r.src, requestId: r.requestId, contextTokens: r.contextTokens, sourceBacklog: r.sourceBacklog, moveKv: true, signal: r.signal
  });
  const base = { mode: t.mode, sourceSeconds: t.seconds };
  if (!t.ok) return { ...base, ok: false, bytes: 0, failure: t.failure };
  if (t.mode === 'shared-store') return { ...base, ok: true, bytes: t.bytes };
  const a = await r.dst.post(r.path, t.body, r.requestId, r.signal);
  if (a.status === null) return { ...base, ok: false, bytes: 0, failure: `the pre-warm on ${r.dst.id} got no answer` };
  if (a.status < 200 || a.status > 299) return { ...base, ok: false, bytes: 0, failure: `the pre-warm on ${r.dst.id} answered ${a.status}` };
  return { ...base, ok: true, bytes: t.bytes };
}
