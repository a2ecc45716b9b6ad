// The request path of POST /v1/context: validate the body, compute its routing features as any request's,
// place it (the injected `place`: RoutingState.route today, the admission queue later), and prefill it on the
// chosen engine with a non-streaming `max_tokens: 1` request that warms the engine's prefix cache. The
// bookkeeping is the completion path's (started → firstToken → finished), so load and session tables see it;
// connect errors and 5xx are retried on another backend as completions are; an engine's 4xx (a prompt too long
// for it) goes back to the client with the engine's status and body.
import { NoCandidateError } from '../core/policy.js';
import { MAX_CONTEXT_TTL_SECONDS } from '../store/session-store.js';
import type { Backend } from '../fleet/backends.js';
import type { ContextEntry, Place } from './contexts.js';
import type { RoutingInput, RoutingState } from '../fleet/routing-port.js';
import { EarError } from '../request/errors.js';
import { badJson, reserialize, type Endpoint } from '../features/request-body.js';
import type { Features } from '../features/features.js';
import type { Usage } from '../upstream/stream-observer.js';
import { post, type Answer } from '../upstream/buffered-post.js';

/** Fields of the client's body that are the context's own, or that a one-token, non-streaming prefill must not carry. */
const DROPPED = ['ttl_seconds', 'stream', 'stream_options', 'max_tokens', 'max_completion_tokens', 'min_tokens', 'n', 'best_of', 'kv_transfer_params'];

export interface ContextRequest {
  endpoint: Endpoint;
  model: string;
  ttlSeconds: number;
  /** The prefill body: the client's fields (messages or prompt and rendering options) with max_tokens 1. */
  body: Buffer;
}

function bad (message: string): EarError {
  return new EarError('EAR_ERR_BAD_REQUEST', message);
}

function isTokenIds (v: unknown): boolean {
  return Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'number' && Number.isInteger(x) && x >= 0 && x <= 0xffffffff);
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

export interface PrefillDeps {
  place: Place;
  state: RoutingState;
  features: (endpoint: Endpoint, body: Buffer, sessionId: string | null) => Promise<Features>;
  backends: readonly Backend[];
  maxAttempts: number;
  now: () => number;
  /** Wall clock (ms) for created/expires. */
  clock: () => number;
  /** A request starts / ends on a backend (its in-flight count; a draining backend leaves when idle). */
  enter: (b: Backend) => void;
  leave: (b: Backend) => void;
  /** Called for every placement (metrics: decisions, retries). */
  placed?: (b: Backend, reason: string, attempt: number, decisionSeconds: number) => void;
}

export type PrefillResult =
  | { kind: 'ok'; entry: ContextEntry; backend: Backend }
  /** The engine refused the prompt (4xx, or a 5xx on the last attempt): its answer goes to the client as is. */
  | { kind: 'engine'; status: number; contentType: string; body: Buffer; backend: Backend };

const PATH: Record<Endpoint, string> = { chat: '/v1/chat/completions', completions: '/v1/completions' };

/** Routes and prefills the context `id`; throws EarError (404 model, 502, 503) when it cannot. */
export async function prefill (deps: PrefillDeps, id: string, req: ContextRequest, rid: string, signal: { aborted: boolean; onAbort: (() => void) | null }): Promise<PrefillResult> {
  const f = await deps.features(req.endpoint, req.body, id);
  if (!deps.backends.some((b) => b.models.has(f.model))) throw new EarError('EAR_ERR_MODEL_NOT_FOUND', `The model \`${f.model}\` does not exist.`);
  const body = f.forward ? Buffer.from(f.forward.buffer, f.forward.byteOffset, f.forward.byteLength) : req.body;
  const input: RoutingInput = { model: f.model, sessionId: id, parentSessionId: null, promptTokens: f.promptTokens, blockKeys: f.blockKeys, maxTokens: 1, user: f.user };
  const exclude = new Set<number>();
  let lastStatus: number | null | undefined;
  for (let n = 0; n < deps.maxAttempts; n++) {
    if (signal.aborted) throw new EarError('EAR_ERR_INTERNAL', 'the client went away');
    const d0 = deps.now();
    let placement;
    try {
      placement = await deps.place(input, exclude, d0, n, signal);
    } catch (err) {
      if (!(err instanceof NoCandidateError)) throw err;
      break;
    }
    if (placement === null) throw new EarError('EAR_ERR_INTERNAL', 'the client went away');
    const b = placement.backend;
    deps.placed?.(b, placement.reason, n, (deps.now() - d0) / 1000);
    exclude.add(b.index);
    const final = n === deps.maxAttempts - 1 || !deps.state.hasCandidate(f.model, exclude);
    deps.enter(b);
    let a: Answer;
    try {
      a = await post(b.pool, PATH[req.endpoint], body, rid, signal);
    } finally {
      deps.leave(b);
    }
    const ok = a.status !== null && a.status >= 200 && a.status < 300;
    let usage: Usage | null = null;
    if (ok) {
      deps.state.firstToken(placement, deps.now());
      usage = usageOf(a.body);
    }
    deps.state.finished(placement, input, usage, ok, deps.now());
    if (signal.aborted) throw new EarError('EAR_ERR_INTERNAL', 'the client went away');
    if (ok) {
      if (usage === null) throw new EarError('EAR_ERR_UPSTREAM', `backend ${b.id} answered the prefill without usage`);
      const createdAt = deps.clock();
      const entry: ContextEntry = {
        // vLLM leaves prompt_tokens_details out (null) when nothing was cached: that is 0.
        id, model: f.model, backendId: b.id, promptTokens: usage.promptTokens, cachedTokens: usage.cachedTokens ?? 0,
        blockKeys: f.blockKeys, createdAt, expiresAt: createdAt + req.ttlSeconds * 1000
      };
      return { kind: 'ok', entry, backend: b };
    }
    const retryable = a.status === null || (a.status >= 500 && !final);
    if (!retryable) return { kind: 'engine', status: a.status!, contentType: a.contentType, body: a.body, backend: b };
    lastStatus = a.status;
  }
  if (lastStatus !== undefined) {
    throw new EarError('EAR_ERR_UPSTREAM', `no backend could prefill the context (last: ${lastStatus === null ? 'connection failed' : `status ${lastStatus}`})`);
  }
  throw new EarError('EAR_ERR_NO_BACKEND', `no healthy backend serves the model \`${f.model}\``);
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
