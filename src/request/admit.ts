// Phase 3, admit (docs/architecture.md#admit): the session's shared record is loaded first (so the
// scheduler ranks it by the service every replica saw), the request waits for the scheduler to release it, and
// if another replica bound the session meanwhile, the request follows that binding.
import { NoCandidateError } from '../core/policy.js';
import { EarError } from '../errors/errors.js';
import type { DropReason, Placement } from '../fleet/routing-port.js';
import { waitForAdmission } from './admission-wait.js';
import { channels } from './channels.js';
import type { RequestContext } from './context.js';

/** The request's first placement, started; null if its client went away first. Throws the refusals (429, 503, 504). */
export async function admit (ctx: RequestContext): Promise<Placement | null> {
  const p = ctx.pipeline;
  const { state, now } = p;
  const input = ctx.input!;
  const shared = p.sessions?.turn(input) ?? null;
  ctx.shared = shared;
  if (shared !== null) await shared.load();
  if (ctx.abort.aborted) return null;
  let first: Placement | null;
  try {
    first = await waitForAdmission(state, now, input, ctx.abort, ctx.priorityClass,
      (r) => { if (channels.admitted.hasSubscribers) channels.admitted.publish({ ctx, ...r }); },
      (reason, waitedMs) => dropError(ctx, reason, waitedMs));
  } catch (err) {
    throw err instanceof NoCandidateError ? noBackend(ctx, err.filter) : err;
  }
  if (first === null) return null;
  ctx.rank = first.rank ?? ctx.rank;
  let placement = first;
  // Another replica bound the session first: follow it (the admitted placement is undone, not sent).
  if (shared !== null) {
    placement = await shared.placed(first, 0, () => {
      const follow = (again: Placement): Placement => {
        state.finished(first, input, null, false, now());
        state.started(again, input, now());
        return again;
      };
      // A data-plane thread's answer comes by message, after its adopt of the winner's host (sent first, applied first).
      const again = state.route(input, ctx.exclude, now(), 0);
      return again instanceof Promise ? again.then(follow) : follow(again);
    });
  }
  if (ctx.abort.aborted) {
    // Released as the client went away: it never reached its backend.
    state.finished(placement, input, null, false, now());
    shared?.completed(now());
    return null;
  }
  return placement;
}

/** No backend can take the request (none serves its model, or none the proxy allows). */
export function noBackend (ctx: RequestContext, filter: string | null = null): EarError {
  const model = ctx.input?.model ?? ctx.features?.model ?? '';
  const why = filter === null ? '' : ` (no backend passed the "${filter}" filter)`;
  return new EarError('EAR_ERR_NO_BACKEND', ctx.restricted
    ? `no healthy backend among the allowed endpoints serves the model \`${model}\`${why}`
    : `no healthy backend serves the model \`${model}\`${why}`);
}

function dropError (ctx: RequestContext, reason: DropReason, waitedMs: number): Error {
  if (reason === 'timeout') return new EarError('EAR_ERR_QUEUE_TIMEOUT', `the request waited ${Math.round(waitedMs / 1000)} s for admission and timed out; the backends are at capacity`);
  if (reason === 'shutdown') return new EarError('EAR_ERR_DRAINING', `EAR shut down after ${Math.round(waitedMs / 1000)} s of waiting for admission (drainTimeoutMs)`);
  return noBackend(ctx);
}
