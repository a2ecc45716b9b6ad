// The prefix index seen from one thread (asm/prefix-index.ts holds the layout and the protocol).
// PrefixIndex: the reader methods, safe on any thread at any time (lock-free).
// PrefixIndexWriter: adds the mutating methods; exactly one thread per region may hold it (the kv-events
// thread), enforced by a claim word in the table header.
import { threadId } from 'node:worker_threads';
import type { KeySpan } from './block-keys.js';
import type { Region } from './region.js';
import type { RingConsumer } from './ring.js';

/** Kind ids and kind masks (bit 1 << kind), read from the kernels module. */
export interface IndexKinds {
  readonly confirmed: number;
  readonly assumed: number;
  readonly offloaded: number;
}
export interface IndexMasks extends IndexKinds {
  readonly all: number;
}

export interface IndexStats {
  slots: number;
  capacity: number;
  size: number;
  /** Keys added. */
  inserts: number;
  /** Keys deleted by remove / clearPod (their last pod went). */
  removes: number;
  /** Keys deleted by CLOCK at the capacity bound. */
  evictions: number;
  /** Keys deleted because their assumed presence expired. */
  expirations: number;
}

export interface ProbeStats {
  occupied: number;
  maxProbe: number;
  meanProbe: number;
  /** Total distance of keys from their home slots: for linear probing it depends only on the set of keys. */
  sumProbe: number;
  /** Slots left unclean (key 0 with presence, or a write left half done): always 0 in a correct table. */
  junk: number;
}

type Fn<A extends unknown[], R = number> = (...args: A) => R;

/** Reader view over the region's prefix index. One per thread; its output buffers are this object's own. */
export class PrefixIndex {
  readonly region: Region;
  readonly base: number;
  /** Pod rows the index covers (the region's, set at start): pods are in [0, maxPods). */
  readonly maxPods: number;
  readonly kind: IndexKinds;
  readonly mask: IndexMasks;
  /** Per-pod matched blocks of the last longestPrefix call (a view into shared memory). */
  readonly counts: Uint32Array;
  /** Whether longestPrefixFrom takes its second hint: on an index of one pod group (up to 256 rows) only. */
  readonly takesSecondHint: boolean;
  protected readonly area: number;
  /** Where in the area: the presence words (lookup, and clearPods' pod bitset), and the probe stats. */
  protected readonly presenceAt: number;
  protected readonly statsAt: number;
  readonly #presence: Uint32Array;
  readonly #h: Record<'slots' | 'capacity' | 'size' | 'inserts' | 'removes' | 'evictions' | 'expirations', number>;
  readonly #longest: Fn<[number, number, number, number, number, number, number, number, number, number, number]>;
  /** u32 word index of pod 0's loss epoch in region.u32, and a view of all of them. */
  readonly #lossEpochs: number;
  readonly #lossEpochView: Uint32Array;
  readonly #assumedTtl: number;
  readonly #lookup: Fn<[number, bigint, number, number, number, number]>;
  readonly #heldSince: Fn<[number, number, number, number, number, number, number]>;
  /** heldSince's set of lost keys: where in the area, and its u64 slots (a power of two, or 0). */
  readonly #heldSetAt: number;
  readonly #heldSetSlots: number;

  /** Bytes of output area a PrefixIndex needs (counts, presence words, probe stats, the ring drain's counts). */
  static areaBytes (region: Region): number {
    return areaLayout(region).heldSet;
  }

  /**
   * Bytes past areaBytes that let heldSince follow every loss a pod's ring keeps (16 per ring entry: a set at most
   * half full). A smaller area (a scratch slot of scratchBytes by default) follows fewer: past them its walks are whole.
   */
  static heldSetBytes (region: Region): number {
    return 16 * region.u32[(region.base('TABLE_PREFIX_INDEX') + region.const('IX_H_RING')) >>> 2];
  }

  /** `area` (≥ areaBytes, 8-aligned) defaults to a newly claimed scratch area; pass a slice of one to share it. */
  constructor (region: Region, area: { ptr: number; bytes: number } = region.claimScratch()) {
    if (area.ptr % 8 !== 0 || area.bytes < PrefixIndex.areaBytes(region)) {
      throw new RangeError(`prefix index area must be 8-aligned and hold ${PrefixIndex.areaBytes(region)} bytes`);
    }
    const c = (n: string): number => region.const(n);
    this.region = region;
    this.base = region.base('TABLE_PREFIX_INDEX');
    this.area = area.ptr;
    this.maxPods = region.u32[(this.base + c('IX_H_PODS')) >>> 2];
    const layout = areaLayout(region);
    this.presenceAt = area.ptr + layout.presence;
    this.statsAt = area.ptr + layout.probeStats;
    this.kind = { confirmed: c('IX_KIND_CONFIRMED'), assumed: c('IX_KIND_ASSUMED'), offloaded: c('IX_KIND_OFFLOADED') };
    this.mask = {
      confirmed: c('IX_MASK_CONFIRMED'), assumed: c('IX_MASK_ASSUMED'), offloaded: c('IX_MASK_OFFLOADED'), all: c('IX_MASK_ALL')
    };
    const buf = region.memory.buffer;
    this.counts = new Uint32Array(buf, area.ptr, this.maxPods);
    this.takesSecondHint = region.u32[(this.base + c('IX_H_GROUPS')) >>> 2] === 1;
    this.#presence = new Uint32Array(buf, this.presenceAt, (layout.probeStats - layout.presence) / 4);
    this.#h = {
      slots: c('IX_H_SLOTS'),
      capacity: c('IX_H_CAPACITY'),
      size: c('IX_H_SIZE'),
      inserts: c('IX_H_INSERTS'),
      removes: c('IX_H_REMOVES'),
      evictions: c('IX_H_EVICTIONS'),
      expirations: c('IX_H_EXPIRATIONS')
    };
    this.#longest = region.fn('ixLongestPrefixFrom');
    const lossAt = this.base + region.u32[(this.base + c('IX_H_LOSS_AT')) >>> 2];
    this.#lossEpochs = lossAt >>> 2;
    this.#lossEpochView = new Uint32Array(buf, lossAt, this.maxPods);
    this.#assumedTtl = (this.base + c('IX_H_ASSUMED_TTL')) >>> 2;
    this.#lookup = region.fn('ixLookup');
    this.#heldSince = region.fn('ixHeldSince');
    this.#heldSetAt = area.ptr + layout.heldSet;
    const setBytes = Math.min(PrefixIndex.heldSetBytes(region), area.bytes - layout.heldSet);
    this.#heldSetSlots = setBytes >= 16 ? 2 ** Math.floor(Math.log2(setBytes / 8)) : 0;
  }

  /**
   * Any thread. Walks the keys from block 0 and fills `counts` with each pod's matched leading blocks in the
   * kinds of `kindMask`; returns the deepest match in blocks. Given `now` (ms, the writer's clock: the times its
   * assumed presence was recorded at), assumed presence older than the writer's TTL does not count, whether or
   * not the writer's expiry sweep has reached it; without, every bit present counts.
   */
  longestPrefix (keys: KeySpan, kindMask: number = this.mask.all, now?: number): number {
    return this.#longest(this.base, keys.ptr, keys.count, kindMask, this.area, this.maxPods, 0, now === undefined ? 0 : now >>> 0, now === undefined ? 0 : 1, this.maxPods, 0) >>> 0;
  }

  /**
   * Any thread. longestPrefix, told that `pod` holds the first `from` blocks: while no other pod still matches,
   * those blocks are not looked up. Exact whenever that is true; it is when a walk found it after reading the
   * pod's lossEpoch and the epoch has not moved since, or for as many blocks as heldSince then says
   * (asm/prefix-index.ts ixLongestPrefixFrom). `pod2` holding the first `from2` blocks is a second such hint (a moved
   * session's old host), taken on an index of up to 256 rows; −1: none.
   */
  longestPrefixFrom (keys: KeySpan, kindMask: number, pod: number, from: number, now?: number, pod2 = -1, from2 = 0): number {
    return this.#longest(this.base, keys.ptr, keys.count, kindMask, this.area, pod, from, now === undefined ? 0 : now >>> 0, now === undefined ? 0 : 1,
      pod2 < 0 ? this.maxPods : pod2, pod2 < 0 ? 0 : from2) >>> 0;
  }

  /**
   * Any thread. Of the first `count` blocks of `keys`, which `pod` held when its lossEpoch read `epoch`, how many it
   * still holds for sure: all of them if it lost none since, else up to the first it lost; 0 once it lost more
   * since than its loss ring keeps (or this object's area follows: heldSetBytes), or lost blocks with no list
   * (clearPod(s), voidAssumed).
   */
  heldSince (keys: KeySpan, pod: number, count: number, epoch: number): number {
    return this.#heldSince(this.base, keys.ptr, count, pod, epoch >>> 0, this.#heldSetAt, this.#heldSetSlots) >>> 0;
  }

  /** Any thread. Moves (after the fact) whenever the writer clears any presence bit of `pod`. */
  lossEpoch (pod: number): number {
    return Atomics.load(this.region.u32, this.#lossEpochs + pod);
  }

  /** Any thread. Every pod's loss epoch into `out` (maxPods u32), as of one moment per pod. */
  lossEpochsInto (out: Uint32Array): void {
    out.set(this.#lossEpochView);
  }

  /** Any thread. The assumed TTL (ms) of the writer's last expiry sweep; 0 before the first. */
  assumedTtlMs (): number {
    return Atomics.load(this.region.u32, this.#assumedTtl);
  }

  /**
   * Any thread. Pods holding `key` in the kinds of `kindMask` (ascending), or null if the key is absent. Given
   * `now`, assumed presence past the writer's TTL does not count (as longestPrefix).
   */
  lookup (key: bigint, kindMask: number = this.mask.all, now?: number): number[] | null {
    if (this.#lookup(this.base, key, kindMask, this.#presence.byteOffset, now === undefined ? 0 : now >>> 0, now === undefined ? 0 : 1) === 0) return null;
    const pods: number[] = [];
    const words = this.#presence; // u32 words, little-endian halves of the u64 words: pod p at bit p % 32 of word p / 32
    for (let w = 0; w < words.length; w++) {
      for (let v = words[w]; v !== 0; v &= v - 1) pods.push(w * 32 + 31 - Math.clz32(v & -v));
    }
    return pods;
  }

  /** Any thread. Counters from the header (each read atomically; together they are not one snapshot). */
  stats (): IndexStats {
    const u32 = this.region.u32;
    const u64 = this.region.u64;
    const b = this.base;
    const h = this.#h;
    return {
      slots: u32[(b + h.slots) >>> 2],
      capacity: u32[(b + h.capacity) >>> 2],
      size: Atomics.load(u32, (b + h.size) >>> 2),
      inserts: Number(Atomics.load(u64, (b + h.inserts) >>> 3)),
      removes: Number(Atomics.load(u64, (b + h.removes) >>> 3)),
      evictions: Number(Atomics.load(u64, (b + h.evictions) >>> 3)),
      expirations: Number(Atomics.load(u64, (b + h.expirations) >>> 3))
    };
  }
}

/**
 * The one writer of a region's prefix index. Times are milliseconds on any clock, taken mod 2^32 (only
 * differences matter, see asm/prefix-index.ts). Errors: RangeError for a pod or kind out of range.
 */
export class PrefixIndexWriter extends PrefixIndex {
  readonly #insert: Fn<[number, bigint, number, number, number]>;
  readonly #insertMany: Fn<[number, number, number, number, number, number]>;
  readonly #remove: Fn<[number, bigint, number, number]>;
  readonly #removeMany: Fn<[number, number, number, number, number]>;
  readonly #clearPod: Fn<[number, number, number]>;
  readonly #clearPods: Fn<[number, number, number]>;
  readonly #expire: Fn<[number, number, number, number]>;
  readonly #voidAssumed: Fn<[number, number, number]>;
  readonly #probeStats: Fn<[number, number], void>;
  readonly #applyRing: Fn<[number, number, number, number, number, number, number, number]>;
  readonly #podsBase: number;
  readonly #warm: Fn<[number, number, number]>;

  /** Claims the writer role for this thread; throws if another thread holds it. */
  constructor (region: Region, area?: { ptr: number; bytes: number }) {
    // Claim before super() claims a scratch area, so a refused writer leaks nothing.
    const claim = (region.base('TABLE_PREFIX_INDEX') + region.const('IX_H_WRITER')) >>> 2;
    const me = threadId + 1;
    const held = Atomics.compareExchange(region.u32, claim, 0, me);
    if (held !== 0 && held !== me) throw new Error(`the prefix index already has a writer (thread ${held - 1})`);
    super(region, area);
    this.#insert = region.fn('ixInsert');
    this.#insertMany = region.fn('ixInsertMany');
    this.#remove = region.fn('ixRemove');
    this.#removeMany = region.fn('ixRemoveMany');
    this.#clearPod = region.fn('ixClearPod');
    this.#clearPods = region.fn('ixClearPods');
    this.#expire = region.fn('ixExpireAssumed');
    this.#voidAssumed = region.fn('ixVoidAssumed');
    this.#probeStats = region.fn('ixProbeStats');
    this.#applyRing = region.fn('ixApplyRing');
    this.#warm = region.fn('ixWarm');
    this.#podsBase = region.base('TABLE_PODS');
  }

  /** Gives the writer role up (thread shutdown), so another thread may claim it. */
  release (): void {
    const claim = (this.base + this.region.const('IX_H_WRITER')) >>> 2;
    Atomics.compareExchange(this.region.u32, claim, threadId + 1, 0);
  }

  #pod (pod: number): number {
    if ((pod >>> 0) !== pod || pod >= this.maxPods) throw new RangeError(`pod must be an integer in [0, ${this.maxPods}), got ${pod}`);
    return pod;
  }

  /** Records that `pod` holds block `key` in `kind`. True if the key is new (at capacity, CLOCK evicts one). */
  insert (key: bigint, pod: number, kind: number, now: number): boolean {
    return check(this.#insert(this.base, key, this.#pod(pod), kind, now >>> 0), pod) === 1;
  }

  /** insert over a span of keys (a prompt's blocks for one pod); returns how many keys were new. */
  insertMany (keys: KeySpan, pod: number, kind: number, now: number): number {
    return check(this.#insertMany(this.base, keys.ptr, keys.count, this.#pod(pod), kind, now >>> 0), pod);
  }

  /** Clears `pod` from `key` in the kinds of `kindMask`: 0 not there, 1 cleared, 2 cleared and key deleted. */
  remove (key: bigint, pod: number, kindMask: number): number {
    return check(this.#remove(this.base, key, this.#pod(pod), kindMask), pod);
  }

  /** remove over a span of keys; returns how many keys changed. */
  removeMany (keys: KeySpan, pod: number, kindMask: number): number {
    return check(this.#removeMany(this.base, keys.ptr, keys.count, this.#pod(pod), kindMask), pod);
  }

  /** Clears `pod` from every key (pod gone, AllBlocksCleared): a full sweep. Returns keys changed. */
  clearPod (pod: number, kindMask: number): number {
    return check(this.#clearPod(this.base, this.#pod(pod), kindMask), pod);
  }

  /**
   * clearPod for several pods in one sweep of the table (rows released together). Duplicates count once; an
   * empty list sweeps nothing. Returns keys changed (once each, however many of the pods a key loses).
   */
  clearPods (pods: Iterable<number>, kindMask: number): number {
    // The pod bitset goes in this writer's presence words (its own area; lookup() reuses them afterwards).
    const words = this.presenceAt >>> 2;
    const u32 = this.region.u32;
    u32.fill(0, words, this.statsAt >>> 2);
    let any = false;
    for (const pod of pods) {
      this.#pod(pod);
      u32[words + (pod >>> 5)] |= 1 << (pod & 31);
      any = true;
    }
    if (!any) return 0;
    return this.#clearPods(this.base, words << 2, kindMask);
  }

  /**
   * `pod` holds none of the assumed presence recorded for it up to `now` (its engine cleared its cache): walks and
   * lookups given a time stop counting it at once, with no sweep of the table; it expires by the TTL as any other.
   */
  voidAssumed (pod: number, now: number): void {
    check(this.#voidAssumed(this.base, this.#pod(pod), now >>> 0), pod);
  }

  /**
   * Examines `budget` slots from the header's cursor and drops assumed presence recorded `ttlMs` or more ago
   * (ttlMs < 2^31). Call it regularly with a small budget to amortise; returns entries that lost it.
   */
  /**
   * Makes the pages of up to `pages` × 4 KB of slots from slot `from` resident (asm ixWarm): a fresh index's slots
   * are untouched zero pages, and the first key stored into each costs a page fault. Returns the slot to continue
   * from; `slots` when done.
   */
  warm (from: number, pages: number): number {
    return this.#warm(this.base, from >>> 0, pages >>> 0) >>> 0;
  }

  expireAssumed (now: number, ttlMs: number, budget: number): number {
    if (!(ttlMs >= 0 && ttlMs < 2 ** 31)) throw new RangeError(`assumed TTL must be in [0, 2^31) ms, got ${ttlMs}`);
    return this.#expire(this.base, now >>> 0, ttlMs, budget >>> 0);
  }

  /**
   * Drains up to `limit` record ops from the ring into the index in one kernel call (asm/ring-apply.ts): this
   * thread must also be the ring's one consumer. An op whose lease is not its pod row's lease now (the row was
   * released since) is dropped. Returns the ops taken off the ring, of them those applied and those dropped
   * as stale, and the forgetPod ops among the applied.
   */
  applyRing (ring: RingConsumer, limit: number): { taken: number; applied: number; stale: number; forgotten: number } {
    const r = this.region;
    const counts = this.statsAt + r.const('IX_PS_BYTES');
    const taken = this.#applyRing(this.base, ring.base, this.#podsBase, ring.outPtr, ring.maxOps, Math.min(limit, 0xffffffff) >>> 0, this.presenceAt, counts) >>> 0;
    const at = (name: string) => r.u32[(counts + r.const(name)) >>> 2];
    return { taken, applied: at('RA_OUT_APPLIED'), stale: at('RA_OUT_STALE'), forgotten: at('RA_OUT_FORGOTTEN') };
  }

  /** Diagnostic full scan: probe lengths and a clean-slot check. */
  probeStats (): ProbeStats {
    const r = this.region;
    const out = this.statsAt;
    this.#probeStats(this.base, out);
    const occupied = r.u32[(out + r.const('IX_PS_OCCUPIED')) >>> 2];
    const sumProbe = Number(r.u64[(out + r.const('IX_PS_SUM_PROBE')) >>> 3]);
    return {
      occupied,
      maxProbe: r.u32[(out + r.const('IX_PS_MAX_PROBE')) >>> 2],
      meanProbe: occupied > 0 ? sumProbe / occupied : 0,
      sumProbe,
      junk: r.u32[(out + r.const('IX_PS_JUNK')) >>> 2]
    };
  }
}

/**
 * Byte offsets in a PrefixIndex's area, for the region's pod groups (asm/prefix-index.ts): the walk's counts
 * and its own words at 0, the presence words, then the probe stats and the ring drain's counts.
 */
function areaLayout (region: Region): { presence: number; probeStats: number; heldSet: number } {
  const groups = region.u32[(region.base('TABLE_PREFIX_INDEX') + region.const('IX_H_GROUPS')) >>> 2];
  const presence = groups * region.const('IX_COUNTS_BYTES_PER_GROUP');
  const probeStats = presence + groups * region.const('IX_PRESENCE_BYTES_PER_GROUP');
  const heldSet = Math.ceil((probeStats + region.const('IX_PS_BYTES') + region.const('RA_OUT_BYTES')) / 8) * 8;
  return { presence, probeStats, heldSet };
}

function check (r: number, pod: number): number {
  if (r < 0) throw new RangeError(`kind out of range for pod ${pod}`);
  return r;
}
