// max_model_len at the door: a request whose max_tokens no engine of its model can hold is refused before it is
// charged or sent, with the message vLLM answers it with (vllm/entrypoints/openai/serving_engine.py), as the
// engine would have refused it a round trip later while the client's key stayed charged. The limit is what the
// engines' /v1/models report (vLLM and ear sim list max_model_len): the largest among the backends that serve the
// model, and none when one of them reports none (an engine that does not say is not second-guessed).
import type { Backend } from '../fleet/backends.js';
import { EarError } from '../errors/errors.js';
import type { RequestContext } from './context.js';

/** The largest max_model_len of the backends that list `model`; null when none lists it or one does not report it. */
export function contextLimit (backends: readonly Backend[], model: string): number | null {
  let limit: number | null = null;
  for (const b of backends) {
    if (b.draining || !b.models.has(model)) continue;
    const n = b.maxModelLen.get(model);
    if (n === undefined) return null;
    limit = limit === null ? n : Math.max(limit, n);
  }
  return limit;
}

/** contextLimit of the request's model, looked up once a request (the door's check and the token charge share it). */
export function contextLimitOf (ctx: RequestContext): number | null {
  if (ctx.contextLimit === undefined) ctx.contextLimit = contextLimit(ctx.pipeline.backends, ctx.features!.model);
  return ctx.contextLimit;
}

/**
 * Throws vLLM's 400 when max_tokens alone reaches max_model_len: no prompt (it has at least one token) fits beside
 * it on any engine. A smaller max_tokens that only the prompt pushes over is left to the engine, whose count of
 * the prompt is the one that decides.
 */
export function checkContextLength (ctx: RequestContext): void {
  const f = ctx.features!;
  if (f.maxTokens === null) return;
  const limit = contextLimitOf(ctx);
  if (limit === null || f.maxTokens < limit) return;
  throw new EarError('EAR_ERR_CONTEXT_LENGTH', `'max_tokens' or 'max_completion_tokens' is too large: ${f.maxTokens}. This model's maximum context length is ${limit} ` +
    `tokens and your request has ${f.promptTokens} input tokens (${f.maxTokens} > ${limit} - ${f.promptTokens}).`);
}
