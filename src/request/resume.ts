// After the send phase: a streamed turn whose engine failed after the first byte ('cut') goes on on another engine
// as a continuation of what the client already has (docs/resume.md; src/resume/ builds the continuation and
// rewrites the new engine's events into the client's stream). Up to maxResumes times; a turn that cannot go on
// (cut inside a tool call's arguments, a request a continuation cannot express, no engine left) ends with the
// API's error event, as a cut stream did before.
import { EarError } from '../errors/errors.js';
import { isUpstreamTimeout } from '../upstream/errors.js';
import { channels, type SendMessage } from './channels.js';
import type { RequestContext } from './context.js';
import { reroute } from './route.js';
import type { SendResult, Transport } from './transport.js';

/** How a cut stream ended (ear_stream_resumes_total{outcome}). */
export type ResumeOutcome =
  /** It went on on another engine and ended there. */
  | 'resumed'
  /** Only its terminal event was lost: EAR wrote it. */
  | 'finished'
  /** Cut inside a tool call's arguments. */
  | 'tool_call'
  /** A request a continuation cannot express (n > 1, reasoning output, a token-id prompt, a transcript past maxResumeBytes…). */
  | 'unsupported'
  /** Cut again after maxResumes resumes. */
  | 'limit'
  /** No other engine took it. */
  | 'no_backend';

export interface ResumeMessage { ctx: RequestContext; outcome: ResumeOutcome }

/**
 * Goes on with `ctx`'s cut stream (`cutBy`, the engine that failed, was sent `body`); never rejects: a failure
 * ends the client's stream.
 */
export async function resume (ctx: RequestContext, transport: Transport, body: Buffer, cutBy: string, error: unknown): Promise<void> {
  const p = ctx.pipeline;
  const { state, now } = p;
  const input = ctx.input!;
  let resumes = 0;
  // Attempts that reached no engine (connect errors, busy) do not use a resume, but are bounded as retries are.
  for (let unsent = 0; ;) {
    if (ctx.abort.aborted) return;
    const plan = transport.continuation?.(ctx, body) ?? { kind: 'refuse', reason: 'unsupported', detail: 'this transport cannot resume' } as const;
    if (plan.kind === 'finish') {
      transport.finish!(ctx, plan.tail);
      ctx.outcome.backend = cutBy;
      return ended(ctx, 'finished');
    }
    if (plan.kind === 'refuse') return failed(ctx, transport, plan.reason, error, plan.detail);
    if (resumes >= p.maxResumes) return failed(ctx, transport, 'limit', error, `maxResumes (${p.maxResumes}) reached`);
    if (unsent >= p.maxAttempts) return failed(ctx, transport, 'no_backend', error, 'no engine took the continuation');
    const placement = await reroute(ctx, ctx.attempt + 1);
    if (placement === null) return failed(ctx, transport, 'no_backend', error, 'no other engine serves the model');
    const b = placement.backend;
    // Subscribers (tracing) give the leg its span and trace headers.
    const send: SendMessage = { ctx, backend: b, attempt: ctx.attempt, endpoints: null, headers: [] };
    if (channels.send.hasSubscribers) channels.send.publish(send);
    p.hold(b);
    let r: SendResult;
    try {
      r = await transport.send(ctx, { backend: b, body: plan.body, attempt: ctx.attempt, endpoints: null, final: true, headers: send.headers, firstToken: () => {}, splice: plan.splice });
    } finally {
      p.release(ctx.placement!.backend);
    }
    const t = now();
    const last = r.result;
    if (channels.sent.hasSubscribers) channels.sent.publish({ ctx, backend: b, result: r });
    state.finished(placement, input, r.usage, last.kind === 'done', t);
    ctx.shared?.completed(t);
    if (last.kind === 'aborted') return;
    if (last.kind === 'done') {
      ctx.usage = r.usage;
      ctx.contentEvents += r.contentEvents;
      ctx.outcome.backend = b.id;
      if (ctx.sessionId !== null && ctx.dialect.kvTransfer) p.onSessionCompleted?.(ctx.sessionId, input.model, ctx.path, ctx.forward);
      return ended(ctx, 'resumed');
    }
    // Cut past maxResumeBytes: the proxy ended the stream with the error event.
    if (last.kind === 'broken') return ended(ctx, 'unsupported');
    ctx.exclude.add(b.index);
    if (last.kind === 'cut') {
      cutBy = b.id;
      resumes++;
      error = last.error;
    } else {
      unsent++;
      if (last.kind === 'retryable') error = last.error;
    }
  }
}

function ended (ctx: RequestContext, outcome: ResumeOutcome): void {
  if (channels.resume.hasSubscribers) channels.resume.publish({ ctx, outcome } satisfies ResumeMessage);
}

/** The client's stream ends with the API's error event: the engine's failure, and why it did not go on. */
function failed (ctx: RequestContext, transport: Transport, outcome: ResumeOutcome, error: unknown, why: string): void {
  const err = isUpstreamTimeout(error)
    ? new EarError('EAR_ERR_UPSTREAM_TIMEOUT', `upstream stopped sending mid-response (upstream body timeout); not resumed: ${why}`, { cause: error })
    : new EarError('EAR_ERR_UPSTREAM', `upstream connection failed mid-response; not resumed: ${why}`, { cause: error });
  ctx.outcome.error = err;
  transport.fail(ctx, err);
  ended(ctx, outcome);
}
