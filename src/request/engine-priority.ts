// Phase 6's part of the order (docs/architecture.md#send): which `priority` a request carries to
// the backend it is sent to. EAR's own, mapped from where admission ranked it (src/core/engine-priority.ts),
// for a backend that honours priorities and an API that takes the field; the most urgent one for a KV leg
// (a /v1/context prefill); the client's own only when its API key may set it (config enginePriorityKeys).
import type { Backend } from '../fleet/backends.js';
import { priorityToSend } from '../core/engine-priority.js';
import type { RequestContext } from './context.js';
import { EarError } from '../errors/errors.js';

/** The priority to write into the body sent to `b`, or null for none (the body goes as EAR forwards it). */
export function enginePriorityFor (ctx: RequestContext, b: Backend): number | null {
  if (ctx.ownEnginePriority) {
    const own = ctx.features?.clientPriority ?? null;
    return typeof own === 'number' ? own : null;
  }
  return priorityToSend(b.config.priority, ctx.dialect.enginePriority, ctx.kvLeg ? 'urgent' : ctx.rank);
}

/** A client allowed to set the engine priority must send an integer (what vLLM's protocol takes). */
export function checkOwnPriority (ctx: RequestContext): void {
  if (ctx.ownEnginePriority && ctx.features?.clientPriority === 'invalid') {
    throw new EarError('EAR_ERR_BAD_REQUEST', '"priority" must be an integer (the engine\'s request priority)');
  }
}
