// Applies one backend's decoded KV events to the prefix index (docs/architecture.md#block-keys, precise mode).
// Engine hashes are never reproduced: on BlockStored we hash the event's token_ids into EAR's own keys,
// chained from the parent's mapped key (or, at block 0, the root seed of model/LoRA/cache_salt), so they equal
// the keys the gateway computes for a prompt with the same tokens; engine hash → key is kept to apply
// BlockRemoved. Pure logic on one thread: the kv-events thread owns one applier per backend.
//
// Decisions (each counted in ApplierStats):
// - An event whose parent hash has no mapping cannot be placed in the chain: skipped, as llm-d does.
// - block_size different from the gateway's: keys of other-sized blocks can never equal the gateway's, so the
//   event is skipped rather than filling the index with keys nothing will look up.
// - Only KV group 0 (group_idx absent or 0) is followed: other groups of a hybrid model (sliding window,
//   mamba) evict on their own schedule and would remove prefixes the full-attention group still holds.
// - Medium: absent or GPU → kind confirmed; anything else (CPU, disk, ...) → kind offloaded (a slower hit).
// - Extra keys the gateway does not hash (multimodal items, prompt embeds) make a block's engine hash depend
//   on more than its tokens: the event is applied up to that block and the rest skipped. A LoRA adapter sent
//   only as lora_id (no lora_name) cannot be named: its events are skipped.
// - The map is bounded per backend: at the cap the least recently stored mapping goes, and its key leaves the
//   index for this backend (without the mapping its BlockRemoved could never be applied).
import type { BlockHasher } from '../core/block-keys.js';
import type { PrefixIndexWriter } from '../core/prefix-index.js';
import { EngineKeyMap, hi32, join64, lo32 } from './engine-key-map.js';
import type { BlockRemoved, BlockStored, KvEventBatch } from './types.js';

export interface ApplierOptions {
  /** The gateway's block size (config.blockSize): the only size whose keys can match a prompt. */
  blockSize: number;
  /** Engine-hash mappings kept for this backend; at the cap the least recently stored one is dropped. */
  maxMappedBlocks: number;
}

export interface ApplierStats {
  events: number;
  /** Blocks added to the index (BlockStored, including tier-only stores). */
  blocksStored: number;
  /** Block tiers removed from the index (BlockRemoved). */
  blocksRemoved: number;
  /** AllBlocksCleared events applied. */
  cleared: number;
  /** BlockStored events whose parent hash had no mapping (blocks could not be keyed). */
  unplaceable: number;
  /** BlockStored events with a block size other than the gateway's. */
  blockSizeMismatch: number;
  /** Events of KV groups other than 0. */
  otherGroups: number;
  /** Blocks left out because their extra keys hold what the gateway does not hash (multimodal, embeds, unnamed LoRA). */
  unsupportedExtras: number;
  /** Events that contradict themselves (token count ≠ blocks × block size, token id out of u32). */
  malformed: number;
  /** BlockRemoved hashes with no mapping (stored before we joined, or mapping dropped). */
  unknownRemoved: number;
  /** Mappings dropped at the cap. */
  mapDrops: number;
}

export class EventApplier {
  readonly stats: ApplierStats = {
    events: 0, blocksStored: 0, blocksRemoved: 0, cleared: 0, unplaceable: 0, blockSizeMismatch: 0, otherGroups: 0,
    unsupportedExtras: 0, malformed: 0, unknownRemoved: 0, mapDrops: 0
  };

  readonly #w: PrefixIndexWriter;
  readonly #h: BlockHasher;
  readonly #pod: number;
  readonly #opts: ApplierOptions;
  readonly #map: EngineKeyMap;
  /** Drops at the cap during the current event (its keys then need a check after insertMany). */
  #dropsNow = 0;
  readonly #evict = (kLo: number, kHi: number, tiers: number): void => {
    this.#w.remove(join64(kLo, kHi), this.#pod, tiers);
    this.stats.mapDrops++;
    this.#dropsNow++;
  };
  readonly #seeds = new Map<string, bigint>();
  #model: string;

  constructor (writer: PrefixIndexWriter, hasher: BlockHasher, pod: number, model: string, opts: ApplierOptions) {
    if (!Number.isInteger(opts.maxMappedBlocks) || opts.maxMappedBlocks < 1) throw new RangeError('maxMappedBlocks must be a positive integer');
    this.#w = writer;
    this.#h = hasher;
    this.#pod = pod;
    this.#model = model;
    this.#opts = opts;
    this.#map = new EngineKeyMap(opts.maxMappedBlocks);
  }

  get pod (): number { return this.#pod; }
  get model (): string { return this.#model; }

  /** The served model name changed: keys already mapped stay (they were right when stored), new ones use it. */
  set model (m: string) {
    if (m !== this.#model) this.#seeds.clear();
    this.#model = m;
  }

  /** Blocks this backend holds per the events: mappings and, of them, those in each tier. */
  mapped (): { blocks: number; confirmed: number; offloaded: number } {
    const m = this.#w.mask;
    let confirmed = 0;
    let offloaded = 0;
    this.#map.forEachTiers((t) => {
      if (t & m.confirmed) confirmed++;
      if (t & m.offloaded) offloaded++;
    });
    return { blocks: this.#map.size, confirmed, offloaded };
  }

  /** Applies a batch's events in order; `now` (ms) is the entries' access time. */
  apply (batch: KvEventBatch, now: number): void {
    for (const e of batch.events) {
      this.stats.events++;
      if (e.type === 'BlockStored') this.#stored(e, now);
      else if (e.type === 'BlockRemoved') this.#removed(e);
      else {
        this.stats.cleared++;
        this.#allCleared(now);
      }
    }
  }

  /** Forgets everything engine events told about this backend (resync, backend removed): a sweep of the index. */
  clear (): void {
    const m = this.#w.mask;
    this.#w.clearPod(this.#pod, m.confirmed | m.offloaded);
    this.#map.clear();
  }

  /**
   * AllBlocksCleared: the engine holds nothing. Its confirmed and offloaded keys are exactly the mapped ones (a
   * mapping dropped at the cap takes its key out), so they go one by one, not by a sweep of the whole index (2^21
   * slots by default: long enough that the other engines' events queued behind it and a request routed meanwhile
   * still saw this engine holding its prefixes). What EAR's routing assumed it holds up to now is as stale:
   * voided at once (readers skip it until the TTL expires it); a prompt routed to it afterwards counts again.
   */
  #allCleared (now: number): void {
    const map = this.#map;
    map.forEachLive((s) => { this.#w.remove(join64(map.keyLo[s], map.keyHi[s]), this.#pod, map.tiers[s]); });
    map.clear();
    this.#w.voidAssumed(this.#pod, now);
  }

  #tier (medium: string | null): number {
    const m = this.#w.mask;
    return medium === null || medium.toUpperCase() === 'GPU' ? m.confirmed : m.offloaded;
  }

  #kindOf (tierBit: number): number {
    return tierBit === this.#w.mask.confirmed ? this.#w.kind.confirmed : this.#w.kind.offloaded;
  }

  #seed (model: string, salt: string | null): bigint {
    const id = salt === null ? model : `${model}\u0000${salt}`;
    let s = this.#seeds.get(id);
    if (s === undefined) {
      // Salted seeds are per tenant: keep the cache small (it only saves a short hash).
      if (this.#seeds.size >= 1024) this.#seeds.clear();
      s = this.#h.rootSeed(model, null, salt);
      this.#seeds.set(id, s);
    }
    return s;
  }

  /**
   * How many leading blocks of `e` the gateway can key, and block 0's cache salt. A block's extras may hold
   * the LoRA name (every block) and, on the first block of a request, the salt; anything else stops there.
   */
  #extras (e: BlockStored): { usable: number; salt: string | null } {
    const n = e.blockHashes.length;
    const ek = e.extraKeys;
    if (ek === null) return { usable: n, salt: null };
    let salt: string | null = null;
    for (let i = 0; i < n; i++) {
      const x = ek[i];
      if (x === null || x === undefined || x.length === 0) continue;
      let j = 0;
      if (e.loraName !== null && x[0] === e.loraName) j = 1;
      const rest = x.length - j;
      if (rest === 0) continue;
      if (i === 0 && e.parentBlockHash === null && rest === 1 && typeof x[j] === 'string') {
        salt = x[j] as string;
        continue;
      }
      return { usable: i, salt };
    }
    return { usable: n, salt };
  }

  #stored (e: BlockStored, now: number): void {
    if (e.groupIdx !== null && e.groupIdx !== 0) {
      this.stats.otherGroups++;
      return;
    }
    const tier = this.#tier(e.medium);
    const kind = this.#kindOf(tier);
    const n = e.blockHashes.length;
    if (e.tokenIds.length === 0) {
      // A tier-only store (e.g. offload to CPU): the blocks are already keyed; add the tier.
      const map = this.#map;
      for (const h of e.blockHashes) {
        const s = map.find(lo32(h), hi32());
        if (s < 0) {
          this.stats.unplaceable++;
          return;
        }
        this.#w.insert(join64(map.keyLo[s], map.keyHi[s]), this.#pod, kind, now);
        map.tiers[s] |= tier;
        this.stats.blocksStored++;
      }
      return;
    }
    if (e.blockSize !== this.#opts.blockSize) {
      this.stats.blockSizeMismatch++;
      return;
    }
    if (e.tokenIds.length !== n * e.blockSize) {
      this.stats.malformed++;
      return;
    }
    if (e.loraId !== null && e.loraName === null) {
      // An adapter known only by its id (vLLM before lora_name): its blocks would pass for the base model's.
      this.stats.unsupportedExtras += n;
      return;
    }
    let seed: bigint;
    let salt: string | null = null;
    const { usable, salt: s } = this.#extras(e);
    if (usable < n) this.stats.unsupportedExtras += n - usable;
    if (usable === 0) return;
    if (e.parentBlockHash === null) {
      salt = s;
      seed = this.#seed(e.loraName ?? this.#model, salt);
    } else {
      const p = this.#map.find(lo32(e.parentBlockHash), hi32());
      if (p < 0) {
        this.stats.unplaceable++;
        return;
      }
      seed = join64(this.#map.keyLo[p], this.#map.keyHi[p]);
    }
    let keys;
    try {
      keys = this.#h.hash(usable === n ? e.tokenIds : e.tokenIds.slice(0, usable * e.blockSize), e.blockSize, seed);
    } catch {
      this.stats.malformed++;
      return;
    }
    // Map first, then insert the span: a mapping dropped at the cap takes its key out of the index, and with
    // the inserts after the drops a key of this event cannot be left without its mapping ...
    const u32 = this.#w.region.u32;
    const base = keys.ptr >>> 2;
    const hashes = e.blockHashes;
    this.#dropsNow = 0;
    for (let i = 0; i < usable; i++) {
      this.#map.set(lo32(hashes[i]), hi32(), u32[base + 2 * i], u32[base + 2 * i + 1], tier, this.#evict);
    }
    this.#w.insertMany(usable === keys.count ? keys : { ptr: keys.ptr, count: usable }, this.#pod, kind, now);
    // ... unless the event alone holds more blocks than the cap: then its own first blocks were dropped.
    if (this.#dropsNow > 0) {
      for (let i = 0; i < usable; i++) {
        if (this.#map.find(lo32(hashes[i]), hi32()) < 0) this.#w.remove(join64(u32[base + 2 * i], u32[base + 2 * i + 1]), this.#pod, tier);
      }
    }
    this.stats.blocksStored += usable;
  }

  #removed (e: BlockRemoved): void {
    if (e.groupIdx !== null && e.groupIdx !== 0) {
      this.stats.otherGroups++;
      return;
    }
    const tier = this.#tier(e.medium);
    const map = this.#map;
    for (const h of e.blockHashes) {
      const s = map.find(lo32(h), hi32());
      if (s < 0 || (map.tiers[s] & tier) === 0) {
        this.stats.unknownRemoved++;
        continue;
      }
      this.#w.remove(join64(map.keyLo[s], map.keyHi[s]), this.#pod, tier);
      this.stats.blocksRemoved++;
      map.tiers[s] &= ~tier;
      if (map.tiers[s] === 0) map.delete(s);
    }
  }
}
