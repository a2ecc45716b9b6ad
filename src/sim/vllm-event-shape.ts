// The engine core's events in the shape current vLLM puts on the wire (vllm-wire.md §1.4, Ex. A/B and the
// v0.26 capture): BlockStored carries one extra_keys entry per block (null when a block has none), group_idx 0
// and kv_cache_spec_kind "full_attention"; BlockRemoved carries group_idx 0. encodeEngineBatch is the one
// path from an engine step's events to the bytes of a PUB payload: the server publishes them over ZMQ, the
// discrete-event driver hands them to the gateway's decoder (src/eval/drivers/des-kv-events.ts).
import { encodeBatch } from '../kvevents/codec.js';
import type { KvEvent, KvWireFormat } from '../kvevents/types.js';
import { defaultSimOptions, type SimOptions } from './sim-options.js';

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

/** The wire format of a simulator with these options: an outer array (every vLLM release), events and hashes as configured. */
export function simWireFormat (o: Pick<SimOptions, 'kvEventFormat' | 'kvHashFormat'> = defaultSimOptions): KvWireFormat {
  return { batchLayout: 'array', eventLayout: o.kvEventFormat, hashFormat: o.kvHashFormat };
}

/** One engine step's events as the PUB payload bytes: `ts` in epoch seconds (vLLM's time.time()), `dpRank` the engine index. */
export function encodeEngineBatch (events: ReadonlyArray<KvEvent<Uint8Array>>, ts: number, dpRank: number, wire: KvWireFormat): Uint8Array {
  return encodeBatch({ ts, events: asVllmEvents(events), dataParallelRank: dpRank }, wire);
}
