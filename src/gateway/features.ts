// A request's routing features, computed where the work is proportional to the prompt (the route pool):
// parse the body, render chat messages with the engine's template, tokenize, and hash full blocks into keys.
import type { BlockHasher } from '../core/block-keys.js';
import type { Tokenizer } from '../tokenize/types.js';
import { GatewayError } from './errors.js';
import { parseRequestBody, type Endpoint } from './request-body.js';

export interface Features {
  model: string;
  stream: boolean;
  promptTokens: number;
  /** Chained keys of the prompt's full blocks (a copy, owned by the caller). */
  blockKeys: BigUint64Array;
  maxTokens: number | null;
  /** The body to forward when it differs from the client's (client kv_transfer_params stripped); null = forward as received. */
  forward: Uint8Array | null;
}

export interface FeatureContext {
  tokenizer: Tokenizer;
  hasher: BlockHasher;
  blockSize: number;
}

export function computeFeatures (ctx: FeatureContext, endpoint: Endpoint, body: Buffer): Features {
  const p = parseRequestBody(endpoint, body);
  let tokens: readonly number[] | null = null;
  try {
    if (p.messages) tokens = ctx.tokenizer.encode(ctx.tokenizer.chatTemplate.render(p.messages, p.render), { addSpecialTokens: false });
    else if (typeof p.prompt === 'string') tokens = ctx.tokenizer.encode(p.prompt);
    else if (p.prompt) tokens = p.prompt;
  } catch (err) {
    // A template the messages do not fit is the client's problem, as the engine would also say.
    throw new GatewayError('EAR_ERR_BAD_REQUEST', `cannot render the request: ${(err as Error).message}`);
  }
  let blockKeys = new BigUint64Array(0);
  if (tokens && tokens.length >= ctx.blockSize) {
    const keys = ctx.hasher.hash(tokens, ctx.blockSize, ctx.hasher.rootSeed(p.model, null, p.cacheSalt));
    blockKeys = keys.keys.slice();
  }
  return {
    model: p.model,
    stream: p.stream,
    promptTokens: tokens?.length ?? Math.ceil(body.length / 4),
    blockKeys,
    maxTokens: p.maxTokens,
    forward: p.forward === body ? null : p.forward
  };
}
