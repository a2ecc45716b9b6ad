// POST /tokenize and /detokenize, both body forms of vLLM (vllm-wire.md §3.3).
import { badRequest } from './http-errors.js';
import { parseGenerationRequest } from './openai-request.js';
import type { SimContext } from './sim-context.js';
import { resolveModelName } from './generation-handler.js';

type Body = Record<string, unknown>;

function asObject (raw: unknown): Body {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw badRequest('Input should be a valid dictionary or object to extract fields from');
  return raw as Body;
}

function flag (b: Body, key: string, dflt: boolean): boolean {
  const v = b[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') throw badRequest(`${key}: Input should be a valid boolean`, key);
  return v;
}

export function handleTokenize (ctx: SimContext, raw: unknown): string {
  const b = asObject(raw);
  if (b.model !== undefined && b.model !== null && typeof b.model !== 'string') throw badRequest('model: Input should be a valid string', 'model');
  resolveModelName(ctx, (b.model ?? null) as string | null);
  const tk = ctx.tokenizer;
  let tokens: number[];
  if (b.messages !== undefined) {
    // TokenizeChatRequest: the chat fields mean what they mean for /v1/chat/completions.
    const g = parseGenerationRequest('chat', { messages: b.messages, add_generation_prompt: b.add_generation_prompt,
      continue_final_message: b.continue_final_message, add_special_tokens: b.add_special_tokens ?? false,
      tools: b.tools, chat_template_kwargs: b.chat_template_kwargs });
    let text: string;
    try {
      text = tk.chatTemplate.render(g.messages, { addGenerationPrompt: g.addGenerationPrompt, continueFinalMessage: g.continueFinalMessage,
        tools: g.tools, chatTemplateKwargs: g.chatTemplateKwargs });
    } catch (err) {
      throw badRequest(`Cannot apply the chat template: ${(err as Error).message}`, 'messages');
    }
    tokens = tk.encode(text, { addSpecialTokens: g.addSpecialTokens });
  } else if (typeof b.prompt === 'string') {
    tokens = tk.encode(b.prompt, { addSpecialTokens: flag(b, 'add_special_tokens', true) });
  } else {
    throw badRequest('Either "prompt" (a string) or "messages" must be given', b.prompt === undefined ? null : 'prompt');
  }
  const tokenStrs = flag(b, 'return_token_strs', false) ? tokens.map((t) => tk.decode([t])) : null;
  return JSON.stringify({ count: tokens.length, max_model_len: ctx.maxModelLen, tokens, token_strs: tokenStrs });
}

export function handleDetokenize (ctx: SimContext, raw: unknown): string {
  const b = asObject(raw);
  if (b.model !== undefined && b.model !== null && typeof b.model !== 'string') throw badRequest('model: Input should be a valid string', 'model');
  resolveModelName(ctx, (b.model ?? null) as string | null);
  const t = b.tokens;
  if (!Array.isArray(t) || !t.every((x) => Number.isSafeInteger(x) && (x as number) >= 0)) {
    throw badRequest('tokens: Input should be a list of non-negative integers', 'tokens');
  }
  for (const id of t as number[]) if (id >= ctx.tokenizer.vocabSize) throw badRequest(`Token id ${id} is out of vocabulary`, 'tokens');
  return JSON.stringify({ prompt: ctx.tokenizer.decode(t as number[]) });
}
