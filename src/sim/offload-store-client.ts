// A shared offload store reached over HTTP, for `ear sim` processes that point at another sim's store
// (--kv-offload-store URL; the host runs --kv-offload-serve, offload-store-routes.ts). The engine core is
// synchronous, so the two halves of OffloadTier are split in time:
// - lookup: the HTTP handler awaits prefetch() before it submits the request; the engine's lookup() then answers
//   from that reply. Replies are keyed by the request's own first digest object (each request hashes its own
//   prompt), so one request's answer never serves another;
// - save: the engine's save() only queues digests; the host calls flush() at the end of each step (the blocks
//   are computed by then), which POSTs them in the background, a bounded number of batches in flight.
import type { BlockDigest } from './block-hash.js';
import type { OffloadTier } from './offload-store.js';

export const KV_STORE_LOOKUP_PATH = '/ear/v1/kv/store/lookup';
export const KV_STORE_SAVE_PATH = '/ear/v1/kv/store/save';
export const KV_STORE_STATS_PATH = '/ear/v1/kv/store/stats';

export interface OffloadClientStats {
  url: string;
  prefetches: number;
  /** Prefetches that failed (store unreachable, bad answer): those requests prefilled everything. */
  prefetchErrors: number;
  savedBlocks: number;
  saveBatches: number;
  saveErrors: number;
  /** Queued blocks dropped because the store fell behind by more than maxPending blocks. */
  droppedBlocks: number;
}

export interface OffloadClientOptions {
  lookupTimeoutMs?: number;
  saveTimeoutMs?: number;
  /** Most save batches in flight at once. Default 2. */
  maxInFlight?: number;
  /** Most blocks queued for saving; the oldest are dropped beyond it. Default 65536. */
  maxPending?: number;
  /** Told about failures (the server logs them). */
  onError?: (what: 'lookup' | 'save', err: string) => void;
}

export class RemoteOffloadStore implements OffloadTier {
  readonly url: string;
  readonly #answers = new WeakMap<BlockDigest, number>();
  #pending: BlockDigest[] = [];
  #inFlight = 0;
  #closed = false;
  readonly #lookupTimeoutMs: number;
  readonly #saveTimeoutMs: number;
  readonly #maxInFlight: number;
  readonly #maxPending: number;
  readonly #onError: (what: 'lookup' | 'save', err: string) => void;
  readonly counters = { prefetches: 0, prefetchErrors: 0, savedBlocks: 0, saveBatches: 0, saveErrors: 0, droppedBlocks: 0 };

  constructor (url: string, opts: OffloadClientOptions = {}) {
    this.url = parseStoreUrl(url);
    this.#lookupTimeoutMs = opts.lookupTimeoutMs ?? 2000;
    this.#saveTimeoutMs = opts.saveTimeoutMs ?? 10_000;
    this.#maxInFlight = opts.maxInFlight ?? 2;
    this.#maxPending = opts.maxPending ?? 65536;
    this.#onError = opts.onError ?? (() => {});
  }

  /**
   * Asks the store how many leading blocks of `digests` it holds and remembers the answer for lookup(). A failure
   * answers 0: the request prefills, as vLLM's kv_load_failure_policy=recompute would.
   */
  async prefetch (digests: readonly BlockDigest[]): Promise<number> {
    if (digests.length === 0) return 0;
    this.counters.prefetches++;
    let n = 0;
    try {
      const res = await fetch(this.url + KV_STORE_LOOKUP_PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ block_hashes: digests.map((d) => d.toString('hex')) }),
        signal: AbortSignal.timeout(this.#lookupTimeoutMs)
      });
      const body = await res.json() as { hits?: unknown };
      if (res.status !== 200 || !Number.isSafeInteger(body.hits) || (body.hits as number) < 0) throw new Error(`store answered ${res.status}: ${JSON.stringify(body).slice(0, 200)}`);
      n = Math.min(body.hits as number, digests.length);
    } catch (err) {
      this.counters.prefetchErrors++;
      this.#onError('lookup', (err as Error).message);
    }
    this.#answers.set(digests[0], n);
    return n;
  }

  lookup (digests: readonly BlockDigest[], maxBlocks: number): number {
    if (digests.length === 0) return 0;
    return Math.min(this.#answers.get(digests[0]) ?? 0, maxBlocks);
  }

  save (digests: readonly BlockDigest[]): void {
    if (this.#closed) return;
    for (const d of digests) this.#pending.push(d);
    const over = this.#pending.length - this.#maxPending;
    if (over > 0) {
      this.#pending.splice(0, over);
      this.counters.droppedBlocks += over;
    }
  }

  /** Sends what the finished step computed; called by the host at each step's end. */
  flush (): void {
    while (!this.#closed && this.#pending.length > 0 && this.#inFlight < this.#maxInFlight) {
      const batch = this.#pending;
      this.#pending = [];
      this.#inFlight++;
      this.#send(batch).finally(() => {
        this.#inFlight--;
        this.flush();
      });
    }
  }

  stats (): OffloadClientStats {
    return { url: this.url, ...this.counters };
  }

  close (): void {
    this.#closed = true;
    this.#pending = [];
  }

  async #send (batch: BlockDigest[]): Promise<void> {
    try {
      const res = await fetch(this.url + KV_STORE_SAVE_PATH, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ block_hashes: batch.map((d) => d.toString('hex')) }),
        signal: AbortSignal.timeout(this.#saveTimeoutMs)
      });
      await res.arrayBuffer();
      if (res.status !== 200) throw new Error(`store answered ${res.status}`);
      this.counters.saveBatches++;
      this.counters.savedBlocks += batch.length;
    } catch (err) {
      this.counters.saveErrors++;
      this.#onError('save', (err as Error).message);
    }
  }
}

/** http(s)://host:port with no path (a trailing slash is dropped); throws a RangeError naming the rule. */
export function parseStoreUrl (url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new RangeError(`offload store URL must be http://host:port, got ${JSON.stringify(url)}`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.pathname !== '/' || u.search !== '' || u.hash !== '') {
    throw new RangeError(`offload store URL must be http://host:port with no path, got ${JSON.stringify(url)}`);
  }
  return `${u.protocol}//${u.host}`;
}
