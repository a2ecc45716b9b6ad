// The HTTP face of a shared offload store hosted by one `ear sim` (--kv-offload-serve), for the sims that point
// at it (offload-store-client.ts). Bodies carry block digests as 64-character hex strings:
//   POST /ear/v1/kv/store/lookup {"block_hashes":[...]} → {"hits":n}  n leading blocks held (they become recent)
//   POST /ear/v1/kv/store/save   {"block_hashes":[...]} → {"stored":n} n blocks newly inserted
//   GET  /ear/v1/kv/store/stats  → this engine's load/save counters, and the store's or the client's
import type { BlockDigest } from './block-hash.js';
import type { SimEngine } from './engine.js';
import { badRequest } from './http-errors.js';
import type { RemoteOffloadStore } from './offload-store-client.js';
import type { OffloadStore } from './offload-store.js';

const HEX_DIGEST = /^[0-9a-f]{64}$/;

/** block_hashes of a lookup or save body, as digests; a 400 naming the first bad entry otherwise. */
export function parseBlockHashes (raw: unknown): BlockDigest[] {
  const list = (typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>).block_hashes : undefined);
  if (!Array.isArray(list)) throw badRequest('block_hashes: a list of 64-character hex digests is required', 'block_hashes');
  const out: BlockDigest[] = new Array(list.length);
  for (let i = 0; i < list.length; i++) {
    const h = list[i];
    if (typeof h !== 'string' || !HEX_DIGEST.test(h)) throw badRequest(`block_hashes[${i}] must be a 64-character lower-case hex digest`, 'block_hashes');
    out[i] = Buffer.from(h, 'hex');
  }
  return out;
}

export function handleStoreLookup (store: OffloadStore, raw: unknown, now: number): string {
  const digests = parseBlockHashes(raw);
  return JSON.stringify({ hits: store.lookup(digests, digests.length, now) });
}

export function handleStoreSave (store: OffloadStore, raw: unknown, now: number): string {
  const digests = parseBlockHashes(raw);
  const before = store.stores;
  // A client sends a step's blocks once the step has ended: they are readable from now on.
  store.save(digests, now);
  return JSON.stringify({ stored: store.stores - before });
}

export function storeStatsJson (engine: SimEngine, tier: { store: OffloadStore } | { client: RemoteOffloadStore }): string {
  const e = {
    loads: engine.offloadLoads,
    loaded_tokens: engine.offloadLoadedTokens,
    loaded_bytes: engine.offloadLoadedBytes,
    saved_blocks: engine.offloadSavedBlocks
  };
  return JSON.stringify('store' in tier ? { role: 'host', engine: e, store: tier.store.stats() } : { role: 'client', engine: e, client: tier.client.stats() });
}
