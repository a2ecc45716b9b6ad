// Parsing and validating /v1/chat/completions and /v1/completions bodies into what the simulator needs,
// with vLLM's 400 answers for invalid fields (vllm-wire.md §3.1). Fields the simulator has no use for
// (temperature, top_p, logprobs, tools...) are type-checked where vLLM would reject them, then ignored.
import type { ChatMessage } from '../tokenize/types.js';
import { HttpError, badRequest } from './http-errors.js';
import { PRIORITY_MAX, PRIORITY_MIN } from './engine.js';

export type PromptInput = { kind: 'text'; text: string } | { kind: 'ids'; ids: number[] };

export interface GenerationRequest {
  endpoint: 'chat' | 'completion';
  model: string | null;
  /** Chat only. */
  messages: ChatMessage[];
  addGenerationPrompt: boolean;
  continueFinalMessage: boolean;
  tools: unknown[] | undefined;
  chatTemplateKwargs: Record<string, unknown> | undefined;
  /** Completions only: one or more prompts (list forms), each its own engine request. */
  prompts: PromptInput[];
  echo: boolean;
  addSpecialTokens: boolean;
  n: number;
  stream: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  /** null: up to the context length (chat); completions default to 16. */
  maxTokens: number | null;
  minTokens: number;
  ignoreEos: boolean;
  stop: string[];
  stopTokenIds: number[];
  seed: number | null;
  cacheSalt: string | null;
  kvTransferParams: Record<string, unknown> | null;
  requestId: string | null;
  /** vLLM's `priority` (lower runs first; default 0): ordered by under --scheduling-policy priority, else ignored. */
  priority: number;
}

type Body = Record<string, unknown>;

/** Bounds on the engine requests one HTTP request may create (prompts × n). */
export const MAX_N = 128;
export const MAX_CHOICES = 1024;

const isInt = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v);

/** A client's value as an error message shows it: short, and never a throw (a deeply nested value overflows JSON.stringify's stack). */
function shown (v: unknown): string {
  try {
    const s = JSON.stringify(v) ?? String(v);
    return s.length > 200 ? `${s.slice(0, 200)}…` : s;
  } catch {
    return 'a value nested too deeply to show';
  }
}

function optInt (b: Body, key: string, min: number): number | null {
  const v = b[key];
  if (v === undefined || v === null) return null;
  if (!isInt(v)) throw badRequest(`${key}: Input should be a valid integer, got ${shown(v)}`, key);
  if (v < min) throw badRequest(`${key} must be at least ${min}, got ${v}.`, key);
  return v;
}

/**
 * `priority`: pydantic's int in int64's range, as vLLM's protocol declares it. Accepted under either scheduling
 * policy: vLLM V1 orders by it under `priority` and ignores it under `fcfs` (V0's "Got priority N but Priority
 * scheduling is not enabled." error is not in V1; vllm-project/vllm#23043 proposed it back and was closed).
 */
function parsePriority (b: Body): number {
  const v = b.priority;
  if (v === undefined || v === null) return 0;
  if (typeof v !== 'number' || !Number.isInteger(v)) throw badRequest(`priority: Input should be a valid integer, got ${shown(v)}`, 'priority');
  if (v < PRIORITY_MIN) throw badRequest('priority: Input should be greater than or equal to -9223372036854775808', 'priority');
  if (v > PRIORITY_MAX) throw badRequest('priority: Input should be less than or equal to 9223372036854775807', 'priority');
  return v;
}

function optBool (b: Body, key: string, dflt: boolean): boolean {
  const v = b[key];
  if (v === undefined || v === null) return dflt;
  if (typeof v !== 'boolean') throw badRequest(`${key}: Input should be a valid boolean, got ${shown(v)}`, key);
  return v;
}

function optNumber (b: Body, key: string): void {
  const v = b[key];
  if (v !== undefined && v !== null && (typeof v !== 'number' || !Number.isFinite(v))) {
    throw badRequest(`${key}: Input should be a valid number, got ${shown(v)}`, key);
  }
}

function optObject (b: Body, key: string): Record<string, unknown> | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'object' || Array.isArray(v)) throw badRequest(`${key}: Input should be a valid dictionary`, key);
  return v as Record<string, unknown>;
}

function parseStop (b: Body): string[] {
  const v = b.stop;
  if (v === undefined || v === null) return [];
  if (typeof v === 'string') return v === '' ? [] : [v];
  if (Array.isArray(v) && v.every((s) => typeof s === 'string')) return (v as string[]).filter((s) => s !== '');
  throw badRequest('stop: Input should be a valid string or a list of strings', 'stop');
}

function parseIdList (v: unknown, key: string): number[] {
  if (!Array.isArray(v) || !v.every((x) => isInt(x) && x >= 0)) throw badRequest(`${key}: Input should be a list of non-negative integers`, key);
  return v as number[];
}

function parseMessages (v: unknown): ChatMessage[] {
  if (!Array.isArray(v)) throw badRequest('messages: Input should be a valid list', 'messages');
  v.forEach((m, i) => {
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw badRequest(`messages.${i}: Input should be a valid dictionary`, 'messages');
    const msg = m as Body;
    if (typeof msg.role !== 'string') throw badRequest(`messages.${i}.role: Field required (a string)`, 'messages');
    const c = msg.content;
    if (c !== undefined && c !== null && typeof c !== 'string') {
      if (!Array.isArray(c)) throw badRequest(`messages.${i}.content: Input should be a string or a list of content parts`, 'messages');
      c.forEach((p, j) => {
        if (typeof p !== 'object' || p === null || typeof (p as Body).type !== 'string') {
          throw badRequest(`messages.${i}.content.${j}: each content part needs a "type"`, 'messages');
        }
        const part = p as Body;
        if (part.type === 'text' && typeof part.text !== 'string') throw badRequest(`messages.${i}.content.${j}.text: Input should be a valid string`, 'messages');
      });
    }
  });
  return v as ChatMessage[];
}

/** prompt: str | list[str] | list[int] | list[list[int]]. */
function parsePrompts (v: unknown): PromptInput[] {
  const empty = (): HttpError => badRequest('Either prompt or prompt_embeds must be provided and non-empty.', 'prompt');
  if (typeof v === 'string') return [{ kind: 'text', text: v }];
  if (!Array.isArray(v) || v.length === 0) throw empty();
  if (v.every((x) => typeof x === 'string')) return (v as string[]).map((text) => ({ kind: 'text', text }));
  if (v.every(isInt)) return [{ kind: 'ids', ids: parseIdList(v, 'prompt') }];
  if (v.every(Array.isArray)) {
    return v.map((ids) => {
      if ((ids as unknown[]).length === 0) throw empty();
      return { kind: 'ids', ids: parseIdList(ids, 'prompt') };
    });
  }
  throw badRequest('prompt: Input should be a string, a list of strings, a list of token ids or a list of lists of token ids', 'prompt');
}

export function parseGenerationRequest (endpoint: 'chat' | 'completion', raw: unknown): GenerationRequest {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw badRequest('Input should be a valid dictionary or object to extract fields from');
  const b = raw as Body;

  const model = b.model ?? null;
  if (model !== null && typeof model !== 'string') throw badRequest('model: Input should be a valid string', 'model');

  const stream = optBool(b, 'stream', false);
  const so = b.stream_options;
  let includeUsage = false;
  let continuousUsage = false;
  if (so !== undefined && so !== null) {
    if (!stream) throw badRequest('Stream options can only be defined when `stream=True`.', 'stream_options');
    const opts = optObject(b, 'stream_options') as Body;
    includeUsage = optBool(opts, 'include_usage', true);
    continuousUsage = optBool(opts, 'continuous_usage_stats', false);
  }

  for (const k of ['temperature', 'top_p', 'top_k', 'min_p', 'presence_penalty', 'frequency_penalty', 'repetition_penalty']) optNumber(b, k);

  const cacheSalt = b.cache_salt ?? null;
  if (cacheSalt !== null && (typeof cacheSalt !== 'string' || cacheSalt === '')) {
    throw badRequest("Parameter 'cache_salt' must be a non-empty string if provided.", 'cache_salt');
  }

  const n = optInt(b, 'n', 1) ?? 1;
  if (n > MAX_N) throw badRequest(`n must be at most ${MAX_N}, got ${n}.`, 'n');
  const minTokens = optInt(b, 'min_tokens', 0) ?? 0;
  const seed = b.seed === undefined || b.seed === null ? null : optInt(b, 'seed', Number.MIN_SAFE_INTEGER);

  let maxTokens: number | null;
  if (endpoint === 'chat') {
    maxTokens = optInt(b, 'max_completion_tokens', 1) ?? optInt(b, 'max_tokens', 1);
  } else {
    maxTokens = b.max_tokens === null ? null : (optInt(b, 'max_tokens', 1) ?? 16);
  }
  if (maxTokens !== null && minTokens > maxTokens) {
    throw badRequest(`min_tokens must be less than or equal to max_tokens=${maxTokens}, got ${minTokens}.`, 'min_tokens');
  }

  const kv = optObject(b, 'kv_transfer_params') ?? null;
  const requestId = b.request_id === undefined || b.request_id === null ? null : b.request_id;
  if (requestId !== null && typeof requestId !== 'string') throw badRequest('request_id: Input should be a valid string', 'request_id');

  const req: GenerationRequest = {
    endpoint,
    model: model as string | null,
    messages: [],
    addGenerationPrompt: true,
    continueFinalMessage: false,
    tools: undefined,
    chatTemplateKwargs: undefined,
    prompts: [],
    echo: false,
    addSpecialTokens: endpoint === 'completion',
    n,
    stream,
    includeUsage,
    continuousUsage,
    maxTokens,
    minTokens,
    ignoreEos: optBool(b, 'ignore_eos', false),
    stop: parseStop(b),
    stopTokenIds: b.stop_token_ids === undefined || b.stop_token_ids === null ? [] : parseIdList(b.stop_token_ids, 'stop_token_ids'),
    seed,
    cacheSalt: cacheSalt as string | null,
    kvTransferParams: kv,
    requestId: requestId as string | null,
    priority: parsePriority(b)
  };
  req.addSpecialTokens = optBool(b, 'add_special_tokens', req.addSpecialTokens);

  if (endpoint === 'chat') {
    if (b.messages === undefined) throw badRequest('messages: Field required', 'messages');
    req.messages = parseMessages(b.messages);
    req.addGenerationPrompt = optBool(b, 'add_generation_prompt', true);
    req.continueFinalMessage = optBool(b, 'continue_final_message', false);
    if (req.addGenerationPrompt && req.continueFinalMessage) {
      throw badRequest('Cannot set both `continue_final_message` and `add_generation_prompt` to True.');
    }
    if (b.tools !== undefined && b.tools !== null && !Array.isArray(b.tools)) throw badRequest('tools: Input should be a valid list', 'tools');
    req.tools = (b.tools ?? undefined) as unknown[] | undefined;
    req.chatTemplateKwargs = optObject(b, 'chat_template_kwargs');
  } else {
    req.prompts = parsePrompts(b.prompt);
    if (req.prompts.length * n > MAX_CHOICES) throw badRequest(`A request may ask for at most ${MAX_CHOICES} completions (prompts × n), got ${req.prompts.length * n}.`, 'prompt');
    req.echo = optBool(b, 'echo', false);
  }
  return req;
}
