// POST /v1/messages, /v1/messages/count_tokens, /v1/responses and GET /v1/responses/{id}: each body is
// converted by src/dialects/ to the chat request vLLM builds from it, then run by the chat completion path
// (runGeneration: same template rendering, engine, KV events and usage) and answered in the API's own shape.
// Errors as vLLM answers them: a body pydantic rejects is the OpenAI-shaped 400 of vLLM's validation handler;
// an error the serving returns is Anthropic-shaped on the Anthropic routes (translate_error_response).
import type { IncomingMessage, ServerResponse } from 'node:http';
import { anthropicToChat } from '../dialects/anthropic-request.js';
import type { ChatRequest } from '../dialects/chat-request.js';
import { continueConversation, responsesToChat } from '../dialects/responses-request.js';
import { EarError } from '../errors/errors.js';
import { AnthropicFormat, countTokensBody } from './anthropic-response.js';
import { renderPrompts, resolveModelName, runGeneration } from './generation-handler.js';
import { HttpError, anthropicErrorJson, badRequest } from './http-errors.js';
import { parsePriority, type GenerationRequest } from './openai-request.js';
import { ResponsesFormat, randomHex, responseEcho } from './responses-response.js';
import type { ResponseStore } from './response-store.js';
import type { SimContext } from './sim-context.js';

const JSON_HEADERS = { 'content-type': 'application/json' };

/** A dialect's validation failure as vLLM's request-validation 400. */
function converted<T> (convert: () => T): T {
  try {
    return convert();
  } catch (err) {
    if (err instanceof EarError) throw badRequest(err.message);
    throw err;
  }
}

interface Sampling {
  stop: string[];
  seed: number | null;
  cacheSalt: string | null;
  kvTransferParams: Record<string, unknown> | null;
  /** Streamed chat options the dialect's serving sets (Anthropic: include_usage and continuous_usage_stats). */
  includeUsage: boolean;
  /** vLLM's request priority: the Responses body's `priority`; Anthropic's protocol has none (0). */
  priority: number;
}

/** The chat completion request a dialect runs as. */
function chatGeneration (chat: ChatRequest, s: Sampling): GenerationRequest {
  return {
    endpoint: 'chat',
    model: chat.model === '' ? null : chat.model,
    messages: chat.messages,
    addGenerationPrompt: chat.render.addGenerationPrompt,
    continueFinalMessage: chat.render.continueFinalMessage === true,
    tools: chat.render.tools,
    chatTemplateKwargs: chat.render.chatTemplateKwargs,
    prompts: [],
    echo: false,
    addSpecialTokens: false,
    n: 1,
    stream: chat.stream,
    includeUsage: s.includeUsage,
    continuousUsage: s.includeUsage,
    maxTokens: chat.maxTokens,
    minTokens: 0,
    ignoreEos: false,
    stop: s.stop.filter((x) => x !== ''),
    stopTokenIds: [],
    seed: s.seed,
    cacheSalt: s.cacheSalt,
    kvTransferParams: s.kvTransferParams,
    requestId: null,
    priority: s.priority
  };
}

/** Writes an error not yet answered in the Anthropic shape; anything without a status is vLLM's 500 internal_error. */
async function anthropicErrors (res: ServerResponse, run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (err) {
    if (res.headersSent || res.destroyed) throw err;
    const e = err instanceof HttpError ? err : new HttpError(500, (err as Error)?.message ?? String(err), null, 'internal_error');
    res.writeHead(e.status, JSON_HEADERS).end(anthropicErrorJson(e));
    if (e.status >= 500) throw err;
  }
}

export async function handleMessages (ctx: SimContext, body: unknown, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chat = converted(() => anthropicToChat(body, { nowMs: Date.now() }));
  const g = chatGeneration(chat, { stop: chat.stopSequences, seed: null, cacheSalt: null, kvTransferParams: chat.kvTransferParams, includeUsage: chat.stream, priority: 0 });
  await anthropicErrors(res, () => runGeneration(ctx, g, req, res, new AnthropicFormat()));
}

export async function handleCountTokens (ctx: SimContext, body: unknown, res: ServerResponse): Promise<void> {
  const chat = converted(() => anthropicToChat(body, { countTokens: true }));
  const g = chatGeneration(chat, { stop: [], seed: null, cacheSalt: null, kvTransferParams: null, includeUsage: false, priority: 0 });
  await anthropicErrors(res, async () => {
    resolveModelName(ctx, g.model);
    const [prompt] = renderPrompts(ctx, g);
    res.writeHead(200, JSON_HEADERS).end(countTokensBody(prompt.ids.length));
  });
}

const notFound = (id: string): HttpError => new HttpError(404, `Response with id '${id}' not found.`, 'response_id', 'invalid_request_error');

export async function handleResponses (ctx: SimContext, store: ResponseStore, body: unknown, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const chat = converted(() => responsesToChat(body));
  const b = body as Record<string, unknown>;
  const seed = b.seed;
  const salt = b.cache_salt;
  if (seed !== undefined && seed !== null && !(typeof seed === 'number' && Number.isSafeInteger(seed))) throw badRequest('seed: Input should be a valid integer', 'seed');
  if (salt !== undefined && salt !== null && (typeof salt !== 'string' || salt === '')) throw badRequest("Parameter 'cache_salt' must be a non-empty string if provided.", 'cache_salt');
  if (b.background === true) throw badRequest('ear sim does not run background responses', 'background');
  resolveModelName(ctx, chat.model === '' ? null : chat.model);
  // vLLM answers an unknown previous_response_id before it renders anything; with the store off every id is unknown.
  let messages = chat.messages;
  if (chat.previousResponseId !== null) {
    const prev = store.get(chat.previousResponseId);
    if (prev === undefined) throw notFound(chat.previousResponseId);
    messages = continueConversation(chat, { messages: prev.messages, output: prev.response.output as unknown[] });
  }
  const g = chatGeneration({ ...chat, messages }, {
    stop: chat.stop,
    seed: typeof seed === 'number' ? seed : null,
    cacheSalt: typeof salt === 'string' ? salt : null,
    kvTransferParams: null,
    includeUsage: false,
    priority: parsePriority(b)
  });
  const prompts = renderPrompts(ctx, g);
  if (prompts[0].ids.length >= ctx.maxModelLen) {
    throw new HttpError(400, `The engine prompt length ${prompts[0].ids.length} exceeds the max_model_len ${ctx.maxModelLen}. Please reduce prompt.`, 'input', 'invalid_request_error');
  }
  const id = `resp_${randomHex()}`;
  const keep = chat.store && store.capacity > 0;
  const format = new ResponsesFormat(responseEcho(b), (response) => { if (keep) store.put(id, { response, messages }); });
  await runGeneration(ctx, g, req, res, format, { id, prompts });
}

/** GET /v1/responses/{id}: the stored response, or vLLM's 404. */
export function handleGetResponse (store: ResponseStore, id: string, res: ServerResponse): void {
  const found = store.get(id);
  if (found === undefined) throw notFound(id);
  res.writeHead(200, JSON_HEADERS).end(JSON.stringify(found.response));
}

/** POST /v1/responses/{id}/cancel: only background responses can be cancelled, and the sim runs none. */
export function handleCancelResponse (store: ResponseStore, id: string): never {
  if (store.get(id) === undefined) throw notFound(id);
  throw new HttpError(400, 'Cannot cancel a synchronous response.', 'response_id', 'invalid_request_error');
}

/** A response id in a path, percent-decoded; a bad escape is a 400, not a crash. */
export function responseIdFromPath (rest: string): string {
  try {
    return decodeURIComponent(rest);
  } catch {
    throw badRequest(`response id is not valid percent-encoding: ${JSON.stringify(rest.slice(0, 64))}`);
  }
}
