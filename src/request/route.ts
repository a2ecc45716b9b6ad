// Phase 4, route, for what follows the first placement (which admission makes): a retry on the next-best backend
// once an attempt failed before its first byte, and the move to the backend a proxy reports having served (ext_proc
// fallbacks). A retry is never a migration of the session.
import { NoCandidateError } from '../core/policy.js';
import type { Backend } from '../fleet/backends.js';
import { atOnce, type Placement } from '../fleet/routing-port.js';
import { channels } from './channels.js';
import type { RequestContext } from './context.js';

/** The placement for attempt `n` > 0, started; null when no backend is left to try. */
export async function reroute (ctx: RequestContext, n: number): Promise<Placement | null> {
  const { state, now } = ctx.pipeline;
  const input = ctx.input!;
  const d0 = now();
  let placement: Placement;
  try {
    const r = state.route(input, ctx.exclude, d0, n);
    placement = r instanceof Promise ? await r : r;
  } catch (err) {
    if (err instanceof NoCandidateError) return null;
    throw err;
  }
  const decisionSeconds = (now() - d0) / 1000;
  if (ctx.shared !== null) placement = await ctx.shared.placed(placement, n, () => state.route(input, ctx.exclude, now(), n));
  state.started(placement, input, now());
  routed(ctx, placement, n, decisionSeconds);
  return placement;
}

/** The request's placement is `placement` for attempt `n` (published for metrics and traces). */
export function routed (ctx: RequestContext, placement: Placement, n: number, decisionSeconds: number | null): void {
  ctx.placement = placement;
  ctx.attempt = n;
  if (channels.routed.hasSubscribers) channels.routed.publish({ ctx, placement, attempt: n, decisionSeconds, backends: ctx.pipeline.backends });
}

/**
 * The request is recorded on `server` (the proxy fell back to it) instead of its placement: the placement ends
 * unserved, as a failed attempt does, and a retry placement on `server` is started. False when that cannot be:
 * a token already came, or `server` no longer serves.
 */
export function moveTo (ctx: RequestContext, server: Backend): boolean {
  const p = ctx.pipeline;
  const prev = ctx.placement;
  if (prev === null || ctx.firstTokenAt > 0 || prev.backend === server) return false;
  const exclude = new Set<number>();
  for (const b of p.backends) if (b !== server) exclude.add(b.index);
  let next: Placement;
  try {
    next = atOnce(p.state.route(ctx.input!, exclude, p.now(), 1));
  } catch (err) {
    if (err instanceof NoCandidateError) return false;
    throw err;
  }
  p.state.finished(prev, ctx.input!, null, false, p.now());
  p.release(prev.backend);
  p.state.started(next, ctx.input!, p.now());
  p.hold(next.backend);
  routed(ctx, next, 1, null);
  // The session now lives where it was served: the shared binding follows (a host change, not a migration).
  ctx.shared?.reverted(next.backend.id);
  return true;
}
