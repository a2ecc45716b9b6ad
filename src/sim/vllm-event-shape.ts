// The engine core's events in the shape current vLLM puts on the wire (vllm-wire.md §1.4, Ex. A/B and the
// v0.26 capture): BlockStored carries one extra_keys entry per block (null when a block has none), group_idx 0
// and kv_cache_spec_kind "full_attention"; BlockRemoved carries group_idx 0.
import type { KvEvent } from '../kvevents/types.js';

export function asVllmEvents (events: ReadonlyArray<KvEvent<Uint8Array>>): Array<KvEvent<Uint8Array>> {
  return events.map((e) => {
    if (e.type === 'BlockStored') {
      return {
        ...e,
        extraKeys: e.extraKeys ?? e.blockHashes.map(() => null),
        groupIdx: e.groupIdx ?? 0,
        kvCacheSpecKind: e.kvCacheSpecKind ?? 'full_attention'
      };
    }
    if (e.type === 'BlockRemoved') return { ...e, groupIdx: e.groupIdx ?? 0 };
    return e;
  });
}
