// Phase 2, features (docs/architecture.md#features): what routing needs of the body (model, tokens, block
// keys), from the route pool or inline, and the request as the routing host takes it.
import { EarError } from '../errors/errors.js';
import { channels } from './channels.js';
import type { RequestContext } from './context.js';
import { checkOwnPriority } from './engine-priority.js';
import { checkContextLength } from './context-length.js';
import { applyHints } from './hints.js';

export async function features (ctx: RequestContext): Promise<void> {
  const p = ctx.pipeline;
  const f0 = p.now();
  const f = await p.features(ctx.endpoint, ctx.body, ctx.sessionId);
  ctx.features = f;
  checkOwnPriority(ctx);
  applyHints(ctx);
  if (channels.features.hasSubscribers) channels.features.publish({ ctx, seconds: (p.now() - f0) / 1000 });
  // Unknown to every backend that has listed its models: the client's mistake. With no list at all (nothing
  // probed up yet) it is the fleet's state, answered as no backend (503).
  const backends = p.backends;
  if (!backends.some((b) => b.models.has(f.model)) && backends.some((b) => b.models.size > 0)) {
    throw new EarError('EAR_ERR_MODEL_NOT_FOUND', `The model \`${f.model}\` does not exist.`);
  }
  checkContextLength(ctx);
  // A Responses continuation goes to the engine that holds the previous response (response-origin.ts).
  if (f.previousResponseId !== null && p.responses !== null) await p.responses.pin(ctx, f.previousResponseId, backends);
  ctx.input = {
    model: f.model, sessionId: ctx.sessionId, parentSessionId: ctx.parentSessionId, promptTokens: f.promptTokens, blockKeys: f.blockKeys,
    maxTokens: f.maxTokens, user: f.user ?? ctx.keyUser, ...(ctx.exclude.size > 0 ? { exclude: ctx.exclude } : {}),
    ...(ctx.hints === null ? {} : { expectedOutputTokens: ctx.hints.expectedOutputTokens, deadlineAt: ctx.hints.deadlineAt })
  };
  if (f.forward) ctx.forward = Buffer.from(f.forward.buffer, f.forward.byteOffset, f.forward.byteLength);
}
