// Micro benchmark of the KV-event decoder on realistic BlockStored batches (one engine step: several requests'
// newly full blocks, 16 blocks × 16 tokens per event). Baseline: @msgpack/msgpack's generic decode of the same
// bytes, i.e. what normalisation into typed events costs on top of parsing.
// Run: npm run build && node dist/bench/kv-decode.js
import { cpus, totalmem } from 'node:os';
import { pathToFileURL } from 'node:url';
import { Decoder } from '@msgpack/msgpack';
import { decodeBatch, encodeBatch } from '../src/kvevents/codec.js';
import type { BlockStored, KvWireFormat } from '../src/kvevents/types.js';

export interface KvDecodeFigures {
  layout: string;
  eventsPerBatch: number;
  blocksPerEvent: number;
  payloadBytes: number;
  eventsPerSec: number;
  blocksPerSec: number;
  megabytesPerSec: number;
  /** Generic msgpack decode of the same payload (no normalisation), events/s. */
  baselineEventsPerSec: number;
}

function lcg (seed: number): () => number {
  let s = seed >>> 0;
  return () => (s = (Math.imul(s, 1664525) + 1013904223) >>> 0);
}

function batchPayload (format: KvWireFormat, eventsPerBatch: number, blocksPerEvent: number, blockSize: number): Uint8Array {
  const rnd = lcg(42);
  const u64 = (): bigint => (BigInt(rnd()) << 32n) | BigInt(rnd());
  const events: BlockStored[] = [];
  for (let e = 0; e < eventsPerBatch; e++) {
    events.push({
      type: 'BlockStored', blockHashes: Array.from({ length: blocksPerEvent }, u64), parentBlockHash: e % 2 ? u64() : null,
      tokenIds: Array.from({ length: blocksPerEvent * blockSize }, () => rnd() % 151_000), blockSize, loraId: null, medium: 'GPU',
      loraName: null, extraKeys: Array.from({ length: blocksPerEvent }, () => null), groupIdx: 0, kvCacheSpecKind: 'full_attention',
    });
  }
  return encodeBatch({ ts: Date.now() / 1000, events, dataParallelRank: 0 }, format);
}

/** Calls per second of fn over about `ms` milliseconds. */
function rate (fn: () => void, ms: number): number {
  let n = 0;
  const t0 = process.hrtime.bigint();
  const stop = t0 + BigInt(Math.round(ms * 1e6));
  let t = t0;
  while (t < stop) {
    for (let i = 0; i < 20; i++) fn();
    n += 20;
    t = process.hrtime.bigint();
  }
  return n / (Number(t - t0) / 1e9);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/**
 * The machine is shared, so the two decoders run in alternating short rounds and each figure is the median
 * round: a burst of load from elsewhere hits both sides instead of skewing one.
 */
function compare (a: () => void, b: () => void, ms: number, rounds = 9): [number, number] {
  for (let i = 0; i < 300; i++) { a(); b(); }
  const ra: number[] = [];
  const rb: number[] = [];
  for (let r = 0; r < rounds; r++) {
    ra.push(rate(a, ms / rounds));
    rb.push(rate(b, ms / rounds));
  }
  return [median(ra), median(rb)];
}

export function measureKvDecode (opts: { ms?: number; eventsPerBatch?: number; blocksPerEvent?: number; blockSize?: number } = {}): KvDecodeFigures[] {
  const ms = opts.ms ?? 1800;
  const eventsPerBatch = opts.eventsPerBatch ?? 8;
  const blocksPerEvent = opts.blocksPerEvent ?? 16;
  const blockSize = opts.blockSize ?? 16;
  const generic = new Decoder({ useBigInt64: true });
  const layouts: Array<[string, KvWireFormat]> = [
    ['map events, int hashes (vLLM ≥ #42892)', { batchLayout: 'array', eventLayout: 'map', hashFormat: 'int' }],
    ['array events, int hashes (legacy)', { batchLayout: 'array', eventLayout: 'array', hashFormat: 'int' }],
    ['map events, bytes hashes (sha256 digests)', { batchLayout: 'array', eventLayout: 'map', hashFormat: 'bytes' }],
  ];
  return layouts.map(([layout, format]) => {
    const payload = batchPayload(format, eventsPerBatch, blocksPerEvent, blockSize);
    const [batches, baseline] = compare(() => { decodeBatch(payload); }, () => { generic.decode(payload); }, ms);
    return {
      layout, eventsPerBatch, blocksPerEvent, payloadBytes: payload.length,
      eventsPerSec: batches * eventsPerBatch, blocksPerSec: batches * eventsPerBatch * blocksPerEvent,
      megabytesPerSec: (batches * payload.length) / 1e6, baselineEventsPerSec: baseline * eventsPerBatch,
    };
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const cpu = cpus();
  console.log(`machine: ${cpu[0]?.model ?? 'unknown'} × ${cpu.length}, ${(totalmem() / 2 ** 30).toFixed(1)} GiB, node ${process.version}`);
  console.log('command: node dist/bench/kv-decode.js  (8 BlockStored events per batch, 16 blocks × 16 tokens each)');
  const fmt = (x: number): string => Math.round(x).toLocaleString('en-US');
  console.log('(median of 9 alternating rounds per figure; the generic decode is the parsing floor, ours adds validation and BigInt hashes)');
  console.log('| layout | payload B | events/s | blocks/s | MB/s | generic msgpack events/s |');
  console.log('|---|---:|---:|---:|---:|---:|');
  for (const f of measureKvDecode()) {
    console.log(`| ${f.layout} | ${f.payloadBytes} | ${fmt(f.eventsPerSec)} | ${fmt(f.blocksPerSec)} | ${f.megabytesPerSec.toFixed(1)} | ${fmt(f.baselineEventsPerSec)} |`);
  }
}
