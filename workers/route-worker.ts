// The route pool's worker: attaches to the shared region, then computes each request's features
// (src/gateway/features.ts). Piscina runs one task at a time per worker (also while a remote tokenization is
// awaited), so one scratch area suffices. The pool sends a session's requests to the same worker, whose
// SessionFeatures keeps each session's previous body, render, tokens and keys so a turn costs O(new messages).
import { workerData } from 'piscina';
import { Region, type SharedRegion } from '../src/core/region.js';
import { BlockHasher } from '../src/core/block-keys.js';
import { createTokenizerSync } from '../src/tokenize/index.js';
import { RemoteTokenizer, remoteTokenizerUrl, type RemoteTokenizerOptions } from '../src/tokenize/remote.js';
import { computeFeatures, featuresFromTokens, type FeatureContext, type Features } from '../src/features/features.js';
import { parseRequestBody, type Endpoint } from '../src/features/request-body.js';
import { SessionFeatures } from '../src/features/session-features.js';
import { EarError, type ErrorCode } from '../src/request/errors.js';

export interface RouteWorkerData {
  shared: SharedRegion;
  tokenizer: string;
  blockSize: number;
  /** Sessions kept per worker for incremental turns. */
  sessions: number;
  /** A session idle this long loses its state here (the gateway's session expiry). */
  sessionIdleMs: number;
  remote: Partial<RemoteTokenizerOptions>;
}

export interface RouteTask {
  endpoint: Endpoint;
  body: Uint8Array;
  sessionId: string | null;
}

/**
 * Errors cross the thread boundary as data (a code and its message), so the main thread can answer with the
 * right status. `fallback`: the remote tokenizer was not used for this request (counted by the pool).
 */
export type RouteResult = ({ ok: true; features: Features } | { ok: false; code: ErrorCode; message: string }) & {
  fallback?: boolean;
  /** When this thread took the task (epoch ms, sub-ms precision), for the pool's queue-wait histogram. */
  startedAt: number;
};

const data = workerData as RouteWorkerData;
const region = new Region(data.shared);
const remote = remoteTokenizerUrl(data.tokenizer) === null ? null : new RemoteTokenizer(data.tokenizer, createTokenizerSync('character'), data.remote);
const local = remote?.fallback ?? createTokenizerSync(data.tokenizer);
const ctx: FeatureContext = {
  tokenizer: local,
  hasher: new BlockHasher(region),
  blockSize: data.blockSize,
  // The engine renders and tokenizes remote prompts, so there is nothing to reuse locally.
  sessions: remote === null ? new SessionFeatures(local, { maxSessions: data.sessions, idleMs: data.sessionIdleMs }) : undefined
};

async function remoteFeatures (r: RemoteTokenizer, endpoint: Endpoint, body: Buffer): Promise<{ features: Features; fallback: boolean }> {
  const p = parseRequestBody(endpoint, body);
  let t: { ids: number[]; fallback: boolean } | null = null;
  try {
    if (p.messages) t = await r.encodeChat(p.model, p.messages, p.render);
    else if (typeof p.prompt === 'string') t = await r.encodePrompt(p.model, p.prompt);
  } catch (err) {
    // Only the local fallback can throw (a chat its template cannot render).
    throw new EarError('EAR_ERR_BAD_REQUEST', `cannot render the request: ${(err as Error).message}`);
  }
  const tokens = t?.ids ?? (Array.isArray(p.prompt) ? p.prompt : null);
  return { features: featuresFromTokens(ctx, p, body, tokens), fallback: t?.fallback ?? false };
}

export default async function routeTask (task: RouteTask): Promise<RouteResult> {
  const startedAt = performance.timeOrigin + performance.now();
  try {
    const body = Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength);
    if (remote !== null) {
      const r = await remoteFeatures(remote, task.endpoint, body);
      return { ok: true, features: r.features, fallback: r.fallback, startedAt };
    }
    // Structured clone copies the keys (8 bytes a block: ~17 KB for a 33.6k-token prompt), cheaper than a transfer's bookkeeping.
    return { ok: true, features: computeFeatures(ctx, task.endpoint, body, task.sessionId), startedAt };
  } catch (err) {
    // Anything without a code is internal, and its message is not shown.
    if (err instanceof EarError) return { ok: false, code: err.code, message: err.message, startedAt };
    return { ok: false, code: 'EAR_ERR_INTERNAL', message: 'internal error', startedAt };
  }
}
