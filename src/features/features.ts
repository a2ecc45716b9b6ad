// A request's routing features, computed where the work is proportional to the prompt (the route pool):
// parse the body, render chat messages with the engine's template, tokenize, and hash full blocks into keys.
// With a session id and per-session state (SessionFeatures), a chat turn that extends the session's previous
// turn parses, renders, encodes and hashes only what is new; the result equals a cold computation. With a
// session, the body is copied for the next turn; parsed messages may be shared with it (nothing modifies them).
import { copyKeys, type BlockHasher } from '../core/block-keys.js';
import type { Tokenizer } from '../tokenize/types.js';
import { renderPieces, type RenderedPieces } from '../tokenize/chat-template.js';
import { EarError } from '../errors/errors.js';
import { parseRequestBody, type ClientPriority, type ParsedRequest } from './request-body.js';
import { DIALECTS, type Endpoint } from '../dialects/dialect.js';
import type { SessionFeatures } from './session-features.js';
import type { RequestHints } from '../dialects/request-hints.js';

export interface Features {
  model: string;
  stream: boolean;
  promptTokens: number;
  /** Chained keys of the prompt's full blocks (a copy, owned by the caller). */
  blockKeys: BigUint64Array;
  maxTokens: number | null;
  /** The OpenAI `user` field, if the body has one (not empty). */
  user: string | null;
  /** The body to forward when it differs from the client's (client kv_transfer_params stripped); null = forward as received. */
  forward: Uint8Array | null;
  /** Responses API: the response this one continues (its engine holds it), and whether the engine stores this one. */
  previousResponseId: string | null;
  store: boolean;
  /** The client's own `priority` field, stripped from what is forwarded (request-body.ts). */
  clientPriority: ClientPriority;
  /** The agent's hints (src/dialects/request-hints.ts); null when it sent none. */
  hints: RequestHints | null;
  /** The client's vllm_xargs.agentic_context, stripped from the forwarded body; undefined when absent. */
  agenticContext: unknown;
}

export interface FeatureContext {
  tokenizer: Tokenizer;
  hasher: BlockHasher;
  blockSize: number;
  /** Per-session tokens and keys for incremental turns; absent = every request is computed cold. */
  sessions?: SessionFeatures;
}

export function computeFeatures (ctx: FeatureContext, endpoint: Endpoint, body: Buffer, sessionId: string | null = null): Features {
  const sessions = sessionId !== null ? ctx.sessions : undefined;
  const p = sessions !== undefined && endpoint === 'chat' ? sessions.parseChat(sessionId!, body) : parseRequestBody(endpoint, body);
  let text: string | null = null;
  let pieces: RenderedPieces | null = null;
  let tokens: readonly number[] | Uint32Array | null = null;
  try {
    // A session's chat is rendered in pieces where the template allows, so the next turn can keep its leading ones.
    if (p.messages && sessions !== undefined) pieces = renderPieces(ctx.tokenizer.chatTemplate, p.messages, p.render);
    if (p.messages && pieces === null) text = ctx.tokenizer.chatTemplate.render(p.messages, p.render);
    if (text !== null && sessions === undefined) tokens = ctx.tokenizer.encodeIds?.(text) ?? ctx.tokenizer.encode(text, { addSpecialTokens: false });
    else if (typeof p.prompt === 'string') tokens = ctx.tokenizer.encode(p.prompt);
    else if (p.prompt) tokens = p.prompt;
  } catch (err) {
    // A template the messages do not fit is the client's problem, as the engine would also say.
    throw new EarError('EAR_ERR_BAD_REQUEST', `cannot render the request: ${(err as Error).message}`);
  }
  if (p.messages && sessions !== undefined) {
    const seed = ctx.hasher.rootSeed(p.model, null, p.cacheSalt);
    const r = pieces !== null
      ? sessions.tokensAndKeysOfPieces(sessionId!, p.messages, pieces, ctx.hasher, ctx.blockSize, seed)
      : sessions.tokensAndKeys(sessionId!, text!, ctx.hasher, ctx.blockSize, seed);
    return featuresOf(p, body, r.tokens.length, r.keys);
  }
  return featuresFromTokens(ctx, p, body, tokens);
}

/** Features of a parsed request whose prompt is `tokens` (null: no tokens known, estimated from the body size). */
export function featuresFromTokens (ctx: FeatureContext, p: ParsedRequest, body: Buffer, tokens: readonly number[] | Uint32Array | null): Features {
  let blockKeys = new BigUint64Array(0);
  if (tokens && tokens.length >= ctx.blockSize) {
    const keys = ctx.hasher.hash(tokens, ctx.blockSize, ctx.hasher.rootSeed(p.model, null, p.cacheSalt));
    blockKeys = copyKeys(keys.keys);
  }
  return featuresOf(p, body, tokens?.length ?? Math.ceil(body.length / 4), blockKeys);
}

const NO_KEYS = new BigUint64Array(0);

export function featuresOf (p: ParsedRequest, body: Buffer, promptTokens: number, blockKeys: BigUint64Array): Features {
  return {
    // A request that computes no KV (count_tokens) leaves no keys to match or record.
    model: p.model, stream: p.stream, promptTokens, blockKeys: DIALECTS[p.endpoint].fillsCache ? blockKeys : NO_KEYS, maxTokens: p.maxTokens, user: p.user, forward: p.forward === body ? null : p.forward,
    previousResponseId: p.previousResponseId, store: p.store, clientPriority: p.clientPriority,
    hints: p.hints, agenticContext: p.agenticContext
  };
}
