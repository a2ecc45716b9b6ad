// Where a request's features are computed. With the `character` tokenizer a small body costs less on the main
// thread (parse, ChatML render, byte tokens, a few block hashes: ~35 µs) than the route-pool round trip it
// replaces (a structured clone each way and two thread wake-ups: ~150 µs of CPU and ~150 µs of latency,
// measured with `npm run bench:gateway`). Larger bodies, and every real tokenizer (whose templates and BPE cost
// hundreds of µs even for a short chat), stay in the pool, which is for work proportional to the prompt.
// Measured on 2 cores (bench/RESULTS.md, "Features in the data-plane thread: choosing by size"), the round trip costs
// more than that estimate: an 18 KB body, with a session id or without, cost the main thread's process ~30% less CPU
// a request inline (and lower p50 and p99), a sessionless 24 KB body cost it 5–8% more, a 32 KB one ~10% more (the
// pool's cold encode runs on the other core): the main thread computes up to 20 KB. A data-plane thread (httpThreads ≥ 2) computes up to
// 32 KB: its loop serves only its own connections, and the pool's round trip there wakes two more threads beside
// the owner (25–40% less CPU a request inline up to 32 KB; 64 KB the same either way).
import { BlockHasher } from '../core/block-keys.js';
import type { Region } from '../core/region.js';
import { createTokenizerSync } from '../tokenize/index.js';

import { computeFeatures, type FeatureContext, type Features } from './features.js';
import type { Endpoint } from '../dialects/dialect.js';
import type { RoutePool } from './route-pool.js';

export const INLINE_FEATURES_MAX_BYTES = 20 << 10;
/** The same on a data-plane thread. */
export const THREAD_INLINE_FEATURES_MAX_BYTES = 32 << 10;
/**
 * The part of a data-plane thread's scratch area its inline hasher takes: a 32 KB body's tokens (4 bytes each) and
 * keys with room to spare (a longer prompt would be hashed in chunks; only its keys must fit).
 */
export const INLINE_HASH_BYTES = 1 << 20;

/** `sessionId` lets the pool send a session's turns to the thread that holds its previous tokens. */
export type FeatureSource = (endpoint: Endpoint, body: Buffer, sessionId?: string | null) => Promise<Features>;

/**
 * When the calling thread will hash inline (bodies up to `inlineMaxBytes`), it does so in `area`, or in a scratch area
 * of `region` it claims.
 */
export function featureSource (region: Region, opts: { tokenizer: string; blockSize: number }, pool: RoutePool, inlineMaxBytes = INLINE_FEATURES_MAX_BYTES,
  area?: { ptr: number; bytes: number }): FeatureSource {
  if (opts.tokenizer !== 'character') return (endpoint, body, sessionId = null) => pool.features(endpoint, body, sessionId);
  const ctx: FeatureContext = { tokenizer: createTokenizerSync(opts.tokenizer), hasher: new BlockHasher(region, area), blockSize: opts.blockSize };
  return (endpoint, body, sessionId = null) => {
    // Small bodies are computed cold here (cheap either way); their session's state in the pool is only refreshed by larger turns.
    if (body.length > inlineMaxBytes) return pool.features(endpoint, body, sessionId);
    try {
      return Promise.resolve(computeFeatures(ctx, endpoint, body));
    } catch (err) {
      return Promise.reject(err); // an EarError keeps its code at the edge, anything else is internal there
    }
  };
}
