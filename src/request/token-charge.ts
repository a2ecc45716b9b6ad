// Tokens per minute in the pipeline (config `rateLimits.*.tokensPerMinute`; the buckets are the client gate's): a
// request of a token-limited client is charged once its prompt is counted, before it waits for admission, and the
// charge is corrected to what it used when it ends.
//
// The charge is the prompt's tokens plus max_tokens (or max_completion_tokens) when the client names it: the most
// the request can cost, as OpenAI reserves it. OpenAI's guide words its estimate as the larger of max_tokens and the
// prompt's estimate; the sum is what an engine may actually spend, and the end gives back what was not used. Without
// max_tokens only the prompt is reserved, and the output is charged at the end.
//
// The charge is clamped: never more than the model's max_model_len (prompt and output together cannot exceed it
// on any engine, context-length.ts), never more than MAX_TOKEN_COUNT, never negative or not a number. count_tokens
// is never charged (it generates nothing: Dialect.costsTokens).
import { MAX_TOKEN_COUNT } from '../dialects/chat-request.js';
import type { RequestContext } from './context.js';
import { contextLimitOf } from './context-length.js';

/** A request's estimate: its prompt tokens and the most it may generate, at most `limit` (max_model_len, when known). */
export function admissionCost (promptTokens: number, maxTokens: number | null, limit: number | null = null): number {
  const cost = promptTokens + (maxTokens ?? 0);
  if (!(cost > 0)) return 0;
  return Math.min(cost, limit ?? MAX_TOKEN_COUNT, MAX_TOKEN_COUNT);
}

/**
 * What a request used: the engine's usage (prompt + completion) when it reported it; else, if any output came, its
 * prompt and a token per content event (a stream without include_usage); else, answered 2xx with nothing seen of
 * its body (ext_proc with response body mode NONE), null: the charge stands; else nothing (it failed or went away
 * before any output, or was never sent).
 */
export function usedTokens (ctx: RequestContext): number | null {
  const u = ctx.usage;
  if (u !== null) return u.promptTokens + u.completionTokens;
  if (ctx.firstTokenAt > 0) return (ctx.features?.promptTokens ?? 0) + ctx.contentEvents;
  const status = ctx.outcome.status;
  if (status >= 200 && status < 300) return null;
  return 0;
}

/** The phase after features: charges the estimate, or throws the 429 of a client whose tokens are in debt. */
export function chargeTokens (ctx: RequestContext): void | Promise<void> {
  const limits = ctx.limits;
  if (limits === null || !limits.limitsTokens || !ctx.dialect.costsTokens) return;
  const f = ctx.features!;
  const refused = limits.chargeTokens(admissionCost(f.promptTokens, f.maxTokens, contextLimitOf(ctx)));
  // A data-plane thread's limits are the owner's: its answer comes by message.
  if (refused instanceof Promise) return refused.then((r) => { if (r !== null) throw r; });
  if (refused !== null) throw refused;
}

/** At the request's end (every request, once): its charge corrected to what it used. */
export function settleTokens (ctx: RequestContext): void {
  ctx.limits?.settleTokens(usedTokens(ctx));
}
