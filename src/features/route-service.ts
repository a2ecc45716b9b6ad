// A route pool thread's work (started by workers/route-worker.ts): attaches to the shared region, then computes
// each request's features (src/features/features.ts). Piscina runs one task at a time per worker (also while a
// remote tokenization is awaited), so one scratch area suffices. The pool sends a session's requests to the same
// worker, whose SessionFeatures keeps each session's previous body, render, tokens and keys so a turn costs
// O(new messages). Messages: src/features/route-protocol.ts.
import { Region } from '../core/region.js';
import { BlockHasher } from '../core/block-keys.js';
import { createTokenizerSync, thawTokenizer } from '../tokenize/index.js';
import { RemoteTokenizer, remoteTokenizerUrl } from '../tokenize/remote.js';
import { toWireError } from '../threads/outcome.js';
import { computeFeatures, featuresFromTokens, type FeatureContext, type Features } from './features.js';
import { parseRequestBody } from './request-body.js';
import type { Endpoint } from '../dialects/dialect.js';
import { SessionFeatures } from './session-features.js';
import { EarError } from '../errors/errors.js';
import type { RouteResult, RouteTask, RouteWorkerData } from './route-protocol.js';

async function remoteFeatures (ctx: FeatureContext, r: RemoteTokenizer, endpoint: Endpoint, body: Buffer): Promise<{ features: Features; fallback: boolean }> {
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

/** The task function of one route pool thread. */
export function createRouteService (data: RouteWorkerData): (task: RouteTask) => Promise<RouteResult> {
  const region = new Region(data.shared);
  if (data.frozenTokenizer !== null) thawTokenizer(data.frozenTokenizer);
  const remote = remoteTokenizerUrl(data.tokenizer) === null ? null : new RemoteTokenizer(data.tokenizer, createTokenizerSync('character'), data.remote);
  const local = remote?.fallback ?? createTokenizerSync(data.tokenizer);
  const ctx: FeatureContext = {
    tokenizer: local,
    hasher: new BlockHasher(region),
    blockSize: data.blockSize,
    // The engine renders and tokenizes remote prompts, so there is nothing to reuse locally.
    sessions: remote === null ? new SessionFeatures(local, { maxSessions: data.sessions, idleMs: data.sessionIdleMs }) : undefined
  };

  return async function routeTask (task) {
    const startedAt = performance.timeOrigin + performance.now();
    try {
      const body = Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength);
      if (remote !== null) {
        const r = await remoteFeatures(ctx, remote, task.endpoint, body);
        return { ok: true, value: r.features, fallback: r.fallback, startedAt };
      }
      // Structured clone copies the keys (8 bytes a block: ~17 KB for a 33.6k-token prompt), cheaper than a transfer's bookkeeping.
      return { ok: true, value: computeFeatures(ctx, task.endpoint, body, task.sessionId), startedAt };
    } catch (err) {
      // What the client may read: an EarError's code and message, else nothing of the cause.
      const e = err instanceof EarError ? err : new EarError('EAR_ERR_INTERNAL', 'internal error');
      return { ok: false, error: toWireError(e), startedAt };
    }
  };
}
