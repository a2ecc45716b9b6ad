// Precise mode in the discrete-event driver: the engines' KV events reach the prefix index the way they reach
// the gateway's (docs/architecture.md#the-lab: same code, same delays). Each engine batch the DesHost
// raises is encoded to the PUB payload bytes exactly as `ear sim` publishes them (encodeEngineBatch), held for
// a delivery delay on the virtual clock, then decoded with the gateway's decodeBatch and applied by one
// EventApplier per engine, the class the kv-events thread uses. Nothing here reads a wall clock: a batch's ts
// and the applier's `now` are virtual, so a run stays a pure function of its seed.
import { BlockHasher } from '../../core/block-keys.js';
import { MAX_MAPPED_BLOCKS } from '../../core/defaults.js';
import type { PrefixIndexWriter } from '../../core/prefix-index.js';
import { decodeBatch, KvDecodeError } from '../../kvevents/codec.js';
import { EventApplier, type ApplierStats } from '../../kvevents/event-applier.js';
import type { KvWireFormat } from '../../kvevents/types.js';
import type { DesHost, KvEventListener } from '../../sim/des.js';
import { encodeEngineBatch, simWireFormat } from '../../sim/vllm-event-shape.js';

/**
 * Default delivery delay (ms) from the end of an engine step to its events being in the index. The gateway's
 * measured apply lag over loopback ZeroMQ is 0.32 ms p50 and 3.62 ms p99 (bench/RESULTS.md, kv-apply); a real
 * fleet adds a network hop and vLLM's publisher queue. 5 ms sits above that p99, so the lab never credits
 * precise mode with knowing sooner than the gateway would.
 */
export const DEFAULT_KV_DELIVERY_DELAY_MS = 5;

export interface DesKvEventFeedOptions {
  /** The driver's prefix index writer (one writer per thread: the feed writes through the driver's). */
  writer: PrefixIndexWriter;
  /**
   * Re-keys stored blocks. Default: a new BlockHasher over a scratch area of its own (one more claimed from the
   * writer's region). Passing the driver's prompt hasher works only if the driver holds no prompt keys across
   * DES events: every apply overwrites the hasher's scratch, and with it the last keys it returned.
   */
  hasher?: BlockHasher;
  /** The gateway's block size (the keys the router matches); events of other sizes are counted and skipped. */
  blockSize: number;
  /** Engine-hash mappings kept per engine (default the gateway's, MAX_MAPPED_BLOCKS). */
  maxMappedBlocks?: number;
  /**
   * The model name requests are routed with: the root of the keys of blocks that carry no LoRA name or salt,
   * rootSeed(model, null, null), the seed the driver hashes prompts with. Default 'des'.
   */
  model?: string;
  /** Wire layout the engines publish in. Default: `ear sim`'s default (simWireFormat()). */
  wire?: KvWireFormat;
  /** Virtual ms from an engine step's end to its events being applied (default DEFAULT_KV_DELIVERY_DELAY_MS). */
  deliveryDelayMs?: number;
  /** Pod row of engine i (default i). */
  podOf?: (engine: number) => number;
}

/** One engine's stream: what was published, delivered, and what its applier did. */
export interface DesKvEngineStats extends ApplierStats {
  engine: number;
  pod: number;
  /** Batches the engine raised (encoded and scheduled). */
  published: number;
  /** Batches delivered and decoded. */
  batches: number;
  /** Payload bytes published. */
  bytes: number;
  /** Payloads decodeBatch refused (KvDecodeError): 0 unless encoder and decoder disagree. */
  decodeErrors: number;
  /** Events of a tag the decoder does not know. */
  skippedEvents: number;
  /** Published, not yet delivered. */
  pending: number;
  /** Blocks the events say the engine holds now, and of them per tier. */
  indexedBlocks: number;
  confirmedBlocks: number;
  offloadedBlocks: number;
}

/** All engines summed, with the settings a report should name. */
export interface DesKvFeedStats extends Omit<DesKvEngineStats, 'engine' | 'pod'> {
  mode: 'precise';
  deliveryDelayMs: number;
  wire: KvWireFormat;
  engines: DesKvEngineStats[];
}

interface Stream {
  engine: number;
  applier: EventApplier;
  /** Payloads in publish order; due times never decrease (one fixed delay, a monotone clock). */
  queue: Array<{ due: number; bytes: Uint8Array }>;
  head: number;
  published: number;
  batches: number;
  bytes: number;
  decodeErrors: number;
  skippedEvents: number;
}

/** Feeds a DesHost's engine KV events, through bytes, into the prefix index (precise mode). */
export class DesKvEventFeed {
  readonly deliveryDelayMs: number;
  readonly wire: KvWireFormat;
  readonly model: string;
  readonly #writer: PrefixIndexWriter;
  readonly #hasher: BlockHasher;
  readonly #blockSize: number;
  readonly #maxMapped: number;
  readonly #podOf: (engine: number) => number;
  readonly #streams: Stream[] = [];
  #des: DesHost | null = null;
  #previous: KvEventListener | null = null;
  readonly #listener: KvEventListener = (engine, t, events) => {
    this.#previous?.(engine, t, events);
    this.publish(engine, t, events);
  };

  constructor (o: DesKvEventFeedOptions) {
    const delay = o.deliveryDelayMs ?? DEFAULT_KV_DELIVERY_DELAY_MS;
    if (!(Number.isFinite(delay) && delay >= 0)) throw new RangeError(`deliveryDelayMs must be a finite number ≥ 0, got ${delay}`);
    if (!(Number.isInteger(o.blockSize) && o.blockSize >= 1)) throw new RangeError(`blockSize must be a positive integer, got ${o.blockSize}`);
    const maxMapped = o.maxMappedBlocks ?? MAX_MAPPED_BLOCKS;
    if (!(Number.isInteger(maxMapped) && maxMapped >= 1)) throw new RangeError(`maxMappedBlocks must be a positive integer, got ${maxMapped}`);
    this.deliveryDelayMs = delay;
    this.wire = { ...(o.wire ?? simWireFormat()) };
    this.model = o.model ?? 'des';
    this.#writer = o.writer;
    this.#hasher = o.hasher ?? new BlockHasher(o.writer.region);
    this.#blockSize = o.blockSize;
    this.#maxMapped = maxMapped;
    this.#podOf = o.podOf ?? ((i) => i);
  }

  /**
   * Follows `des`'s engines from now on: installs itself as des.onKvEvents, after any listener already there
   * (which still sees every batch first). One host per feed.
   */
  attach (des: DesHost): this {
    if (this.#des !== null) throw new Error('this feed is already attached to a DesHost');
    this.#des = des;
    this.#previous = des.onKvEvents;
    des.onKvEvents = this.#listener;
    return this;
  }

  /** Stops following (attach may follow again): the earlier listener is put back. Batches already published are still delivered. */
  detach (): void {
    const des = this.#des;
    if (des === null) return;
    if (des.onKvEvents === this.#listener) des.onKvEvents = this.#previous;
    this.#previous = null;
    this.#des = null;
  }

  /**
   * One engine batch at virtual time `t` (seconds), as the DesHost raises it: encoded now, as the engine's
   * publisher would, applied at t + deliveryDelayMs. attach() calls it; a driver composing its own listener
   * may call it instead (after attach, which gives the clock).
   */
  publish (engine: number, t: number, events: Parameters<KvEventListener>[2]): void {
    const des = this.#des;
    if (des === null) throw new Error('attach(des) first: delivery runs on its clock');
    if (events.length === 0) return;
    const s = this.#stream(engine);
    // ts is the virtual clock in seconds, where vLLM puts time.time() at the step's end.
    const bytes = encodeEngineBatch(events, t, engine, this.wire);
    const due = t + this.deliveryDelayMs / 1000;
    s.queue.push({ due, bytes });
    s.published++;
    s.bytes += bytes.length;
    des.at(due, (now) => this.#deliver(s, now));
  }

  /** Counters per engine (every engine of the host) and summed. */
  stats (): DesKvFeedStats {
    // Every engine of the host, those that have published nothing yet too.
    const n = Math.max(this.#streams.length, this.#des?.engines.length ?? 0);
    const engines: DesKvEngineStats[] = [];
    for (let i = 0; i < n; i++) engines.push(this.#engineStats(this.#stream(i)));
    const total: Omit<DesKvEngineStats, 'engine' | 'pod'> = {
      published: 0, batches: 0, bytes: 0, decodeErrors: 0, skippedEvents: 0, pending: 0, indexedBlocks: 0, confirmedBlocks: 0,
      offloadedBlocks: 0, events: 0, blocksStored: 0, blocksRemoved: 0, cleared: 0, unplaceable: 0, blockSizeMismatch: 0, otherGroups: 0,
      unsupportedExtras: 0, malformed: 0, unknownRemoved: 0, mapDrops: 0
    };
    for (const e of engines) for (const k of Object.keys(total) as Array<keyof typeof total>) total[k] += e[k];
    return { mode: 'precise', deliveryDelayMs: this.deliveryDelayMs, wire: { ...this.wire }, ...total, engines };
  }

  #stream (engine: number): Stream {
    let s = this.#streams[engine];
    if (s === undefined) {
      if (!(Number.isInteger(engine) && engine >= 0)) throw new RangeError(`engine must be an index ≥ 0, got ${engine}`);
      const applier = new EventApplier(this.#writer, this.#hasher, this.#podOf(engine), this.model,
        { blockSize: this.#blockSize, maxMappedBlocks: this.#maxMapped });
      s = { engine, applier, queue: [], head: 0, published: 0, batches: 0, bytes: 0, decodeErrors: 0, skippedEvents: 0 };
      this.#streams[engine] = s;
    }
    return s;
  }

  /** Applies, in publish order, every payload of the stream that is due by `now` (seconds). */
  #deliver (s: Stream, now: number): void {
    const q = s.queue;
    while (s.head < q.length && q[s.head].due <= now) {
      const { bytes } = q[s.head++];
      let batch;
      try {
        batch = decodeBatch(bytes);
      } catch (err) {
        if (!(err instanceof KvDecodeError)) throw err;
        s.decodeErrors++;
        continue;
      }
      s.batches++;
      s.skippedEvents += batch.skippedEvents;
      s.applier.apply(batch, now * 1000);
    }
    if (s.head === q.length) {
      q.length = 0;
      s.head = 0;
    } else if (s.head > 1024 && s.head * 2 > q.length) {
      q.splice(0, s.head);
      s.head = 0;
    }
  }

  #engineStats (s: Stream): DesKvEngineStats {
    const m = s.applier.mapped();
    return {
      ...s.applier.stats, engine: s.engine, pod: s.applier.pod, published: s.published, batches: s.batches, bytes: s.bytes,
      decodeErrors: s.decodeErrors, skippedEvents: s.skippedEvents, pending: s.queue.length - s.head,
      indexedBlocks: m.blocks, confirmedBlocks: m.confirmed, offloadedBlocks: m.offloaded
    };
  }
}
