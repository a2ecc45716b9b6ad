// The prefix index's hints and the engine-hash map of the kv-events thread (src/kvevents/).
import { checkBool, checkInt, type FieldCheck } from './checks.js';
import { MAX_MAPPED_BLOCKS, PREFIX_INDEX_KEYS, PREFIX_INDEX_KEYS_MAX } from '../core/defaults.js';

export interface PrefixIndexConfig {
  /**
   * Keys the index holds: a block of a prompt for the pods of one group of 256 rows. At the bound CLOCK evicts one with
   * each new key. The default, 1 Mi, is 16M tokens at 16 a block and 256 MiB of slots; up to 3 Mi (512 MiB).
   */
  prefixIndexKeys: number;
  /**
   * How long a routing decision's assumed presence stays in the prefix index (ms). null: 5 s when any backend
   * publishes KV events (precise mode: the engine's events are the truth, hints only bridge their delay),
   * else 20 min (approximate mode: the index learns only from routing).
   */
  assumedTtlMs: number | null;
  /** Engine block hashes mapped to EAR keys, per backend with KV events; at the bound the oldest go. */
  kvMaxMappedBlocks: number;
  /**
   * Make the index's memory resident at start (256 MB at the default capacity, ~1 s of the kv-events thread's CPU),
   * so that no new key pays a page fault later. Off: pages come as keys land (lower RSS while the index is sparse).
   */
  prefixIndexWarm: boolean;
}

export const PREFIX_INDEX_DEFAULTS: Readonly<PrefixIndexConfig> = Object.freeze({
  prefixIndexKeys: PREFIX_INDEX_KEYS,
  assumedTtlMs: null,
  kvMaxMappedBlocks: MAX_MAPPED_BLOCKS,
  prefixIndexWarm: false
});

export const PREFIX_INDEX_FIELDS: Record<keyof PrefixIndexConfig, FieldCheck> = {
  prefixIndexKeys: (p, v) => checkInt(p, v, 4096, PREFIX_INDEX_KEYS_MAX),
  assumedTtlMs: (p, v) => (v === null ? null : checkInt(p, v, 0, 2 ** 31 - 1)),
  kvMaxMappedBlocks: (p, v) => checkInt(p, v, 1024, 1 << 26),
  prefixIndexWarm: (p, v) => checkBool(p, v)
};
