// Reads a request body (OpenAI chat or completions; Anthropic Messages and OpenAI Responses, converted to the chat
// request the engine renders, src/dialects/) into what routing needs, and the body to forward. Runs in the route
// pool. The body forwarded upstream is the client's own bytes unless something must change: a client's
// kv_transfer_params are never forwarded (they would let a client steer an engine's KV transfers), nor its
// `priority` (it would let a client jump an engine's queue: the engine's priority is EAR's to give,
// src/core/engine-priority.ts); the latter is kept aside for a client whose API key may set it.
import { EarError } from '../errors/errors.js';
import type { ChatMessage, RenderOptions } from '../tokenize/types.js';
import type { Endpoint } from '../dialects/dialect.js';
import { anthropicToChat } from '../dialects/anthropic-request.js';
import { responsesToChat } from '../dialects/responses-request.js';
import { bad, checkSampling, MAX_TOKEN_COUNT, optIntIn } from '../dialects/chat-request.js';
import { MAX_JSON_DEPTH } from '../core/defaults.js';
import { nestsDeeperThan } from '../core/json-depth.js';
import { hasAgenticContext, requestHints, type RequestHints } from '../dialects/request-hints.js';

export interface ParsedRequest {
  endpoint: Endpoint;
  model: string;
  stream: boolean;
  /** Chat messages (chat) — as sent. */
  messages: ChatMessage[] | null;
  /** Completions prompt: text, or token ids (a list of ints). Batched prompts (lists of prompts) are not routed by content. */
  prompt: string | number[] | null;
  /** max_tokens / max_completion_tokens, if given. */
  maxTokens: number | null;
  /** vLLM's cache_salt: it salts block 0, so it seeds the block keys too. */
  cacheSalt: string | null;
  /** The OpenAI `user` field (whom fairness policies count the tokens against); null when absent or empty. */
  user: string | null;
  /** Chat rendering options the engine honours (vLLM names), so EAR renders the same prompt. */
  render: RenderOptions;
  /** The body to send upstream (the client's bytes when nothing had to change). */
  forward: Buffer;
  /** Responses API: the stored response this one continues; null elsewhere. */
  previousResponseId: string | null;
  /** Responses API: whether the engine stores the response (vLLM's default true); false elsewhere. */
  store: boolean;
  /**
   * The client's own `priority` field (stripped from `forward`): an integer, 'invalid' for anything else, null
   * when absent. Sent on only for an API key allowed to set it (config enginePriorityKeys).
   */
  clientPriority: ClientPriority;
  /** The agent's hints (vllm_xargs.agentic_context, Anthropic cache_control marks); null when it sent none. */
  hints: RequestHints | null;
  /**
   * The client's `vllm_xargs.agentic_context` as it sent it (stripped from `forward`), for a backend that asks for
   * it (a vLLM router: config agenticContext); undefined when absent.
   */
  agenticContext: unknown;
}

export type ClientPriority = number | 'invalid' | null;

/** A non-empty list of token ids (uint32): a completions prompt given as tokens. */
export function isTokenIds (v: unknown): v is number[] {
  if (!Array.isArray(v) || v.length === 0) return false;
  for (const x of v) if (typeof x !== 'number' || !Number.isInteger(x) || x < 0 || x > 0xffffffff) return false;
  return true;
}

/**
 * A client's parsed body written back as JSON (after a field was dropped). JSON.parse takes nesting that
 * JSON.stringify's recursion cannot (a stack overflow, which was a 500): such a body is the client's mistake.
 */
export function reserialize (doc: unknown): Buffer {
  try {
    return Buffer.from(JSON.stringify(doc));
  } catch {
    throw bad('request body nests too deeply');
  }
}

/** The error for a body JSON.parse refused. */
export function badJson (err: unknown): EarError {
  return new EarError('EAR_ERR_BAD_JSON', `request body is not valid JSON: ${(err as Error).message}`);
}

export function parseRequestBody (endpoint: Endpoint, raw: Buffer): ParsedRequest {
  let doc: unknown;
  try {
    doc = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw badJson(err);
  }
  return requestFromDoc(endpoint, raw, doc);
}

/** parseRequestBody for a body already parsed: `doc` is JSON.parse(raw) (and is modified: see forward). */
export function requestFromDoc (endpoint: Endpoint, raw: Buffer, doc: unknown): ParsedRequest {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw bad('request body must be a JSON object');
  if (nestsDeeperThan(doc, MAX_JSON_DEPTH)) throw bad(`request body nests deeper than ${MAX_JSON_DEPTH} levels`);
  const b = doc as Record<string, unknown>;
  if (endpoint !== 'chat' && endpoint !== 'completions') return dialectRequest(endpoint, raw, b);
  if (typeof b.model !== 'string' || b.model === '') throw bad('"model" is required and must be a non-empty string');
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== 'boolean') throw bad('"stream" must be a boolean');
  // Both bounded (either may be the one the engine reads); max_completion_tokens wins when both are given.
  const maxCompletion = optIntIn(b, 'max_completion_tokens', '', 0, MAX_TOKEN_COUNT);
  const maxTokens = optIntIn(b, 'max_tokens', '', 0, MAX_TOKEN_COUNT);
  const max = maxCompletion ?? maxTokens;
  checkSampling(b);
  let messages: ChatMessage[] | null = null;
  let prompt: string | number[] | null = null;
  if (endpoint === 'chat') {
    if (!Array.isArray(b.messages) || b.messages.length === 0) throw bad('"messages" must be a non-empty array');
    for (const [i, m] of b.messages.entries()) {
      if (typeof m !== 'object' || m === null || typeof (m as ChatMessage).role !== 'string') throw bad(`messages[${i}] must be an object with a string "role"`);
    }
    messages = b.messages as ChatMessage[];
  } else {
    const p = b.prompt;
    if (typeof p === 'string') prompt = p;
    else if (isTokenIds(p)) prompt = p;
    else if (Array.isArray(p) && p.length > 0 && p.every((x) => typeof x === 'string' || isTokenIds(x))) prompt = null; // a batch
    else throw bad('"prompt" must be a string, a list of token ids, or a non-empty list of those');
  }
  const salt = cacheSaltOf(b);
  const user = b.user;
  if (user !== undefined && user !== null && typeof user !== 'string') throw bad('"user" must be a string');
  const kwargs = b.chat_template_kwargs;
  if (kwargs !== undefined && kwargs !== null && (typeof kwargs !== 'object' || Array.isArray(kwargs))) throw bad('"chat_template_kwargs" must be an object');
  const render: RenderOptions = {
    addGenerationPrompt: b.add_generation_prompt !== false,
    continueFinalMessage: b.continue_final_message === true,
    tools: Array.isArray(b.tools) ? b.tools : undefined,
    chatTemplateKwargs: (kwargs ?? undefined) as Record<string, unknown> | undefined
  };
  return {
    endpoint, model: b.model, stream: b.stream === true, messages, prompt, maxTokens: max, cacheSalt: salt,
    user: typeof user === 'string' && user !== '' ? user : null, render, hints: requestHints(b, false), ...forwardOf(raw, b), previousResponseId: null, store: false
  };
}

/** An Anthropic Messages, count_tokens or Responses body, as the chat request the engine renders from it. */
function dialectRequest (endpoint: Exclude<Endpoint, 'chat' | 'completions'>, raw: Buffer, b: Record<string, unknown>): ParsedRequest {
  const responses = endpoint === 'responses' ? responsesToChat(b) : null;
  const c = responses ?? anthropicToChat(b, { countTokens: endpoint === 'count_tokens' });
  // vLLM serves its one model to a Responses body without one; a fleet may serve many, and EAR routes by it.
  if (c.model === '') throw bad('"model" is required: EAR routes each request to the engines that serve its model');
  return {
    endpoint, model: c.model, stream: c.stream, messages: c.messages, prompt: null, maxTokens: c.maxTokens, cacheSalt: cacheSaltOf(b), user: c.user,
    render: c.render, hints: requestHints(b, responses === null), ...forwardOf(raw, b), previousResponseId: responses?.previousResponseId ?? null, store: responses?.store ?? false
  };
}

/** vLLM's cache_salt (it salts block 0, so it seeds the block keys too); null when absent. */
function cacheSaltOf (b: Record<string, unknown>): string | null {
  const salt = b.cache_salt;
  if (salt === undefined || salt === null) return null;
  if (typeof salt !== 'string' || salt === '') throw bad("Parameter 'cache_salt' must be a non-empty string if provided.");
  return salt;
}

/** The fields a client may not send an engine: they are EAR's to set. */
const STRIPPED = ['kv_transfer_params', 'priority'];

/**
 * The body engines get: the client's bytes, unless it carried kv_transfer_params, priority or
 * vllm_xargs.agentic_context (dropped, `b` rewritten; vllm_xargs with it when nothing else is left in it); and
 * the client's priority and agentic_context, kept aside. An engine has no use for the hints (vLLM passes
 * vllm_xargs on to its plugins); a vLLM router that asks for them gets them back (request/agentic-field.ts).
 */
export function forwardOf (raw: Buffer, b: Record<string, unknown>): { forward: Buffer; clientPriority: ClientPriority; agenticContext: unknown } {
  const clientPriority = clientPriorityOf(b.priority);
  const hinted = hasAgenticContext(b);
  if (!hinted && !STRIPPED.some((k) => k in b)) return { forward: raw, clientPriority, agenticContext: undefined };
  for (const k of STRIPPED) delete b[k];
  let agenticContext: unknown;
  if (hinted) {
    const x = b.vllm_xargs as Record<string, unknown>;
    agenticContext = x.agentic_context;
    delete x.agentic_context;
    if (Object.keys(x).length === 0) delete b.vllm_xargs;
  }
  return { forward: reserialize(b), clientPriority, agenticContext };
}

/** An integer that JSON carries exactly (vLLM takes int64; beyond 2^53 a double would not round-trip). */
function clientPriorityOf (v: unknown): ClientPriority {
  if (v === undefined || v === null) return null;
  return typeof v === 'number' && Number.isSafeInteger(v) ? v : 'invalid';
}
