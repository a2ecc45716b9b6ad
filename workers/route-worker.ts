// The route pool's worker: attaches to the shared region, then computes each request's features
// (src/gateway/features.ts). Piscina runs one task at a time per worker, so one scratch area suffices.
import { workerData } from 'piscina';
import { Region, type SharedRegion } from '../src/core/region.js';
import { BlockHasher } from '../src/core/block-keys.js';
import { createTokenizerSync } from '../src/tokenize/index.js';
import { computeFeatures, type Features } from '../src/gateway/features.js';
import type { Endpoint } from '../src/gateway/request-body.js';
import { errorBody, GatewayError } from '../src/gateway/errors.js';

export interface RouteWorkerData {
  shared: SharedRegion;
  tokenizer: string;
  blockSize: number;
}

export interface RouteTask {
  endpoint: Endpoint;
  body: Uint8Array;
}

/** Errors cross the thread boundary as data, so the main thread can answer with the right status. */
export type RouteResult = { ok: true; features: Features } | { ok: false; status: number; code: string; message: string };

const data = workerData as RouteWorkerData;
const region = new Region(data.shared);
const ctx = { tokenizer: createTokenizerSync(data.tokenizer), hasher: new BlockHasher(region), blockSize: data.blockSize };

export default function routeTask (task: RouteTask): RouteResult {
  try {
    const body = Buffer.from(task.body.buffer, task.body.byteOffset, task.body.byteLength);
    const features = computeFeatures(ctx, task.endpoint, body);
    // Structured clone copies the keys (8 bytes a block: ~17 KB for a 33.6k-token prompt), cheaper than a transfer's bookkeeping.
    return { ok: true, features };
  } catch (err) {
    const e = err instanceof GatewayError ? err : new GatewayError('EAR_ERR_INTERNAL', 'internal error');
    const { status } = errorBody(e);
    return { ok: false, status, code: e.code, message: e.message };
  }
}
