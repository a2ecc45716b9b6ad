// The request path of POST /v1/context: validate the body, then run it through the request pipeline as any
// request (features, admission, routing, retries, the events metrics and traces keep), with a transport that
// prefills it on the chosen engine with a non-streaming `max_tokens: 1` request that warms the engine's prefix
// cache. Connect errors and 5xx are retried on another backend as completions are; an engine's 4xx (a prompt too
// long for it) goes back to the client with the engine's status and body.
import { DEFAULT_CLASS } from '../core/admission.js';
import { MAX_CONTEXT_TTL_SECONDS } from '../store/session-store.js';
import type { Backend } from '../fleet/backends.js';
import type { ContextEntry } from './contexts.js';
import { RequestContext, type Abortable } from '../request/context.js';
import { runPipeline, type Pipeline } from '../request/pipeline.js';
import type { Send, SendResult, Transport } from '../request/transport.js';
import { EarError, openAiError } from '../errors/errors.js';
import { badJson, isTokenIds, reserialize } from '../features/request-body.js';
import { bad } from '../dialects/chat-request.js';
import type { Endpoint } from '../dialects/dialect.js';
import type { Usage } from '../upstream/stream-observer.js';
import { post, type Answer } from '../upstream/buffered-post.js';
import type { ClientLimits } from '../request/client-gate.js';

/** Fields of the client's body that are the context's own, or that a one-token, non-streaming prefill must not carry. */
const DROPPED = ['ttl_seconds', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'min_tokens', 'n', 'best_of', 'kv_transfer_params'];

/** The route a context's prefill is counted and traced under. */
const CONTEXT_ROUTE = '/v1/context';

export interface ContextRequest {
  endpoint: Endpoint;
  model: string;
  ttlSeconds: number;
  /** The prefill body: the client's fields (messages or prompt and rendering options) with max_tokens 1. */
  body: Buffer;
}

/** Checks a POST /v1/context body; throws OpenAI-style 400s that name the field and the rule. */
export function parseContextRequest (raw: Buffer, defaultTtlSeconds: number): ContextRequest {
  let doc: unknown;
  try {
    doc = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw badJson(err);
  }
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw bad('request body must be a JSON object');
  const b = doc as Record<string, unknown>;
  if (b.model === undefined || b.model === null) throw bad('"model" is required');
  if (typeof b.model !== 'string' || b.model === '') throw bad('"model" must be a non-empty string');
  const hasMessages = b.messages !== undefined && b.messages !== null;
  const hasPrompt = b.prompt !== undefined && b.prompt !== null;
  if (hasMessages === hasPrompt) throw bad('exactly one of "messages" and "prompt" is required');
  if (hasMessages) {
    if (!Array.isArray(b.messages) || b.messages.length === 0) throw bad('"messages" must be a non-empty array');
    for (const [i, m] of b.messages.entries()) {
      if (typeof m !== 'object' || m === null || Array.isArray(m) || typeof (m as { role?: unknown }).role !== 'string') {
        throw bad(`messages[${i}] must be an object with a string "role"`);
      }
    }
  } else if (!(typeof b.prompt === 'string' && b.prompt !== '') && !isTokenIds(b.prompt)) {
    throw bad('"prompt" must be a non-empty string or a non-empty list of token ids (one prompt, not a batch)');
  }
  let ttlSeconds = defaultTtlSeconds;
  if (b.ttl_seconds !== undefined && b.ttl_seconds !== null) {
    const t = b.ttl_seconds;
    if (typeof t !== 'number' || !Number.isInteger(t)) throw bad('"ttl_seconds" must be an integer');
    if (t < 1 || t > MAX_CONTEXT_TTL_SECONDS) throw bad(`"ttl_seconds" must be in [1, ${MAX_CONTEXT_TTL_SECONDS}], got ${t}`);
    ttlSeconds = t;
  }
  for (const k of DROPPED) delete b[k];
  b.max_tokens = 1;
  b.stream = false;
  return { endpoint: hasMessages ? 'chat' : 'completions', model: b.model, ttlSeconds, body: reserialize(b) };
}

export type PrefillResult =
  | { kind: 'ok'; entry: ContextEntry; backend: Backend }
  /** The engine refused the prompt (4xx, or a 5xx on the last attempt): its answer goes to the client as is. */
  | { kind: 'engine'; status: number; contentType: string; body: Buffer; backend: Backend };

/** Who asks for the context, and when (the request's arrival, on the pipeline's clock). */
export interface PrefillClient {
  requestId: string;
  keyUser: string | null;
  /** Its client's rate limits (its tokens are charged for the prefill); null: none applies. */
  limits: ClientLimits | null;
  startedAt: number;
  traceparent: string;
  tracestate: string;
}

/**
 * Routes and prefills the context `id` through the request pipeline (admitted at normal priority, retried on
 * another backend as a completion is); throws EarError (404 model, 502, 503) when it cannot.
 */
export async function prefill (pipeline: Pipeline, id: string, req: ContextRequest, client: PrefillClient, signal: Abortable, clock: () => number): Promise<PrefillResult> {
  const ctx = new RequestContext(pipeline, {
    id: client.requestId, endpoint: req.endpoint, route: CONTEXT_ROUTE, via: 'http', startedAt: client.startedAt, keyUser: client.keyUser,
    priorityClass: DEFAULT_CLASS, sessionId: id, parentSessionId: null, body: req.body, traceparent: client.traceparent, tracestate: client.tracestate, abort: signal,
    limits: client.limits,
    // A context is put in place ahead of the turns that will use it: a priority engine runs it first.
    kvLeg: true
  });
  const t = new PrefillTransport();
  await runPipeline(ctx, t);
  if (t.error !== null) throw t.error;
  const a = t.answer;
  const b = ctx.placement?.backend;
  if (a === null || b === undefined || signal.aborted) throw new EarError('EAR_ERR_INTERNAL', 'the client went away');
  if (!t.ok) return { kind: 'engine', status: a.status!, contentType: a.contentType, body: a.body, backend: b };
  const usage = ctx.usage;
  if (usage === null) throw new EarError('EAR_ERR_UPSTREAM', `backend ${b.id} answered the prefill without usage`);
  const createdAt = clock();
  const entry: ContextEntry = {
    // vLLM leaves prompt_tokens_details out (null) when nothing was cached: that is 0.
    id, model: ctx.input!.model, backendId: b.id, promptTokens: usage.promptTokens, cachedTokens: usage.cachedTokens ?? 0,
    blockKeys: ctx.features!.blockKeys, createdAt, expiresAt: createdAt + req.ttlSeconds * 1000
  };
  return { kind: 'ok', entry, backend: b };
}

/** The prefill's transport: one buffered POST per attempt; the last answer (or error) is kept for the caller. */
class PrefillTransport implements Transport {
  answer: Answer | null = null;
  ok = false;
  error: unknown = null;

  async send (ctx: RequestContext, s: Send): Promise<SendResult> {
    const a = await post(s.backend.pool, ctx.path, s.body, ctx.id, ctx.abort, s.headers);
    this.answer = a;
    this.ok = a.status !== null && a.status >= 200 && a.status < 300;
    if (a.status === null) return { result: { kind: 'retryable', status: null, error: new Error('connection failed') }, usage: null, contentEvents: 0 };
    if (a.status >= 500 && !s.final) return { result: { kind: 'retryable', status: a.status, error: new Error(`upstream answered ${a.status}`) }, usage: null, contentEvents: 0 };
    // Its one token is its first: the engine has the prompt.
    if (this.ok) s.firstToken();
    return { result: { kind: 'done', status: a.status, ok: this.ok }, usage: this.ok ? usageOf(a.body) : null, contentEvents: 0 };
  }

  fail (_ctx: RequestContext, err: unknown): void {
    this.error = err;
  }

  settle (ctx: RequestContext): { status: number; aborted: boolean } {
    const status = this.error !== null ? openAiError(this.error).status : this.answer?.status ?? 0;
    return { status, aborted: ctx.abort.aborted };
  }
}
function usageOf (body: Buffer): Usage | null {
  try {
    const u = (JSON.parse(body.toString('utf8')) as { usage?: { prompt_tokens?: unknown; completion_tokens?: unknown; prompt_tokens_details?: { cached_tokens?: unknown } | null } }).usage;
    if (u === undefined || typeof u.prompt_tokens !== 'number') return null;
    const cached = u.prompt_tokens_details?.cached_tokens;
    return { promptTokens: u.prompt_tokens, completionTokens: typeof u.completion_tokens === 'number' ? u.completion_tokens : 0, cachedTokens: typeof cached === 'number' ? cached : null };
  } catch {
    return null;
  }
}
