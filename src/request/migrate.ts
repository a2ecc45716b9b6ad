// Phase 5, migrate (docs/architecture.md#migrate): when the placement names a source for its KV (a
// migration's source, a P/D prefill pod), the connector's source leg runs before the request goes to its backend.
// Without a KV connector (ext_proc: the proxy sends the request), or for an API whose engine takes no
// kv_transfer_params (Responses), the target recomputes the prompt, and the session's move is done at once so
// that later turns do not wait on it.
import type { TransferStepResult } from './kv-transfer-step.js';
import type { Placement } from '../fleet/routing-port.js';
import type { Backend } from '../fleet/backends.js';
import { channels, type TransferStartMessage } from './channels.js';
import type { RequestContext } from './context.js';

const NO_TRANSFER = { mode: 'none', ok: false, bytes: 0, tokens: 0 };

/** What the request is sent as, after the transfer its placement names (at once when it names none). */
export function migrate (ctx: RequestContext, placement: Placement): TransferStepResult | Promise<TransferStepResult> {
  const p = ctx.pipeline;
  const src = placement.transferFrom ?? null;
  if (p.kvTransfers === null || ctx.via === 'ext_proc' || !ctx.dialect.kvTransfer) {
    if (placement.migrating === true) p.state.migrationEnded?.(placement, true, p.now());
    return { placement, body: ctx.forward, arrived: null };
  }
  if (src === null || src === placement.backend) return { placement, body: ctx.forward, arrived: null };
  return transfer(ctx, placement, src);
}

async function transfer (ctx: RequestContext, placement: Placement, src: Backend): Promise<TransferStepResult> {
  const p = ctx.pipeline;
  const start: TransferStartMessage = { ctx, kind: placement.migrating === true ? 'migration' : 'pd', source: src, target: placement.backend, headers: undefined };
  if (channels.transferStart.hasSubscribers) channels.transferStart.publish(start);
  const step = await p.kvTransfers!.run(placement, ctx.input!, ctx.path, ctx.forward, ctx.id, ctx.abort, start.headers);
  if (channels.transferEnd.hasSubscribers) channels.transferEnd.publish({ ctx, kind: start.kind, transfer: step.transfer ?? NO_TRANSFER, servedBy: step.placement.backend });
  // A failed migration went back to its source: the shared binding follows.
  if (ctx.shared !== null && step.placement.backend.id !== placement.backend.id) ctx.shared.reverted(step.placement.backend.id);
  return step;
}
