// The APIs EAR serves, each a dialect of one request path: where the engine serves it, in which shape its errors
// go back, how its stream shows output and usage, and whether the engine computes the prompt's KV for it.
// Parsing a body into what routing reads is request-body.ts's (with anthropic-request.ts and
// responses-request.ts, which convert as vLLM does).
import { ANTHROPIC_STREAM, OPENAI_STREAM, RESPONSES_STREAM, type StreamShape } from './stream-shapes.js';

export type Endpoint = 'chat' | 'completions' | 'messages' | 'count_tokens' | 'responses';

export type EnginePath = '/v1/chat/completions' | '/v1/completions' | '/v1/messages' | '/v1/messages/count_tokens' | '/v1/responses';

export interface Dialect {
  readonly endpoint: Endpoint;
  /** The path the engine serves it at (vLLM's), and the route label of its metrics and spans. */
  readonly path: EnginePath;
  /** The shape of the errors EAR answers it with: OpenAI's `{"error":{…}}` or Anthropic's `{"type":"error",…}`. */
  readonly errors: 'openai' | 'anthropic';
  readonly stream: StreamShape;
  /**
   * Whether the engine computes (and caches) the prompt's KV. count_tokens only tokenizes: it is routed by load
   * alone, outside its session, and leaves no trace in the prefix index.
   */
  readonly fillsCache: boolean;
  /**
   * Whether the engine's API takes kv_transfer_params (vLLM: chat, completions and Anthropic Messages; not
   * Responses). Without them a KV connector cannot move the request's prompt: a migration recomputes it, and
   * the session's bodies are not kept for proactive moves.
   */
  readonly kvTransfer: boolean;
  /**
   * Whether the engine's API takes a request `priority` (vLLM: chat, completions and Responses bodies). vLLM's
   * Anthropic Messages protocol (vllm/entrypoints/anthropic/protocol.py) has no such field and ignores unknown
   * ones: EAR writes none there, and the engine runs such a request at its default 0, which is where EAR's
   * mapping puts a normal-class request at level 0 (src/core/engine-priority.ts). count_tokens is not scheduled.
   */
  readonly enginePriority: boolean;
  /**
   * Whether it is charged tokens against a client's tokensPerMinute. count_tokens generates nothing and computes no
   * KV: it is limited by requests alone (as Anthropic limits it), never charged nor refused for token debt.
   */
  readonly costsTokens: boolean;
}

export const DIALECTS: Readonly<Record<Endpoint, Dialect>> = {
  chat: { endpoint: 'chat', path: '/v1/chat/completions', errors: 'openai', stream: OPENAI_STREAM, fillsCache: true, kvTransfer: true, enginePriority: true, costsTokens: true },
  completions: { endpoint: 'completions', path: '/v1/completions', errors: 'openai', stream: OPENAI_STREAM, fillsCache: true, kvTransfer: true, enginePriority: true, costsTokens: true },
  messages: { endpoint: 'messages', path: '/v1/messages', errors: 'anthropic', stream: ANTHROPIC_STREAM, fillsCache: true, kvTransfer: true, enginePriority: false, costsTokens: true },
  count_tokens: { endpoint: 'count_tokens', path: '/v1/messages/count_tokens', errors: 'anthropic', stream: ANTHROPIC_STREAM, fillsCache: false, kvTransfer: false, enginePriority: false, costsTokens: false },
  responses: { endpoint: 'responses', path: '/v1/responses', errors: 'openai', stream: RESPONSES_STREAM, fillsCache: true, kvTransfer: false, enginePriority: true, costsTokens: true }
};

const BY_PATH = new Map<string, Dialect>(Object.values(DIALECTS).map((d) => [d.path, d]));

/** The dialect served at `path` (no query string); null for any other path. */
export function dialectAt (path: string): Dialect | null {
  return BY_PATH.get(path) ?? null;
}

/** Whether the engine's API at `path` (a dialect's engine path, with or without a query string) takes `priority`. */
export function takesEnginePriority (path: string): boolean {
  const q = path.indexOf('?');
  return dialectAt(q < 0 ? path : path.slice(0, q))?.enginePriority ?? false;
}
