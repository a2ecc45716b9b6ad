// Reference prefix index in plain TypeScript (one thread): the oracle for asm/prefix-index.ts and the
// benchmark baseline. Same semantics and return codes; a Map keyed by (block key, pod group) as the kernel's
// entries are (a group is REF_GROUP_PODS pods), presence as 8 u32 words per kind. Its CLOCK runs over the Map's insertion order (a referenced entry is moved to the back and loses its
// bit), so at the capacity bound it may pick a different victim than the slot-ordered CLOCK of the kernel;
// expiry is always a full sweep.

export const REF_KINDS = 3;
/** Pods per group, and the default pod rows. */
export const REF_GROUP_PODS = 256;
export const REF_MAX_PODS = REF_GROUP_PODS;
const WORDS = REF_GROUP_PODS / 32;
const ASSUMED = 1;

/** The map key of block `key` for pod group `g`. */
const entryKey = (key: bigint, g: number): bigint => ((key === 0n ? 1n : key) << 16n) | BigInt(g);

interface RefEntry {
  bits: Uint32Array; // kind k, pod p of the group: bit p % 32 of word k * WORDS + (p % 256) / 32
  assumedAt: number;
  ref: boolean;
}

export class PrefixIndexRef {
  readonly capacity: number;
  /** Pod rows: pods are in [0, pods). */
  readonly pods: number;
  readonly #groups: number;
  readonly #map = new Map<bigint, RefEntry>();
  inserts = 0;
  removes = 0;
  evictions = 0;
  expirations = 0;
  /** The TTL of the last expiry sweep (the kernel's IX_H_ASSUMED_TTL): 0 until one ran. */
  #ttl = 0;

  constructor (capacity: number, pods = REF_MAX_PODS) {
    this.capacity = Math.max(1, capacity);
    this.pods = pods;
    this.#groups = Math.ceil(pods / REF_GROUP_PODS);
  }

  #bad (pod: number): boolean {
    return !(pod >= 0 && pod < this.pods);
  }

  get size (): number { return this.#map.size; }

  #evict (): void {
    for (;;) {
      const [key, e] = this.#map.entries().next().value as [bigint, RefEntry];
      this.#map.delete(key);
      if (!e.ref) break;
      e.ref = false;
      this.#map.set(key, e);
    }
    this.evictions++;
  }

  insert (key: bigint, pod: number, kind: number, now: number): number {
    if (this.#bad(pod) || kind < 0 || kind >= REF_KINDS) return -1;
    key = entryKey(key, Math.floor(pod / REF_GROUP_PODS));
    let e = this.#map.get(key);
    let added = 0;
    if (e === undefined) {
      if (this.#map.size >= this.capacity) this.#evict();
      e = { bits: new Uint32Array(REF_KINDS * WORDS), assumedAt: 0, ref: false };
      this.#map.set(key, e);
      this.inserts++;
      added = 1;
    } else if (this.#unchanged(e, pod, kind, now)) {
      return 0;
    } else if (kind === ASSUMED && this.#expired(now, e)) {
      // One assumed-at time for every pod of the entry: an insert that refreshes it first drops the expired bits.
      e.bits.fill(0, ASSUMED * WORDS, (ASSUMED + 1) * WORDS);
    }
    e.bits[kind * WORDS + ((pod % REF_GROUP_PODS) >>> 5)] |= 1 << (pod & 31);
    e.ref = true;
    if (kind === ASSUMED) e.assumedAt = now >>> 0;
    return added;
  }

  #clear (key: bigint, e: RefEntry, pod: number, kindMask: number): number {
    let hit = false;
    const bit = 1 << (pod & 31);
    for (let k = 0; k < REF_KINDS; k++) {
      const w = k * WORDS + ((pod % REF_GROUP_PODS) >>> 5);
      if ((kindMask & (1 << k)) !== 0 && (e.bits[w] & bit) !== 0) {
        e.bits[w] &= ~bit;
        hit = true;
      }
    }
    if (!hit) return 0;
    if (e.bits.some((w) => w !== 0)) return 1;
    this.#map.delete(key);
    this.removes++;
    return 2;
  }

  remove (key: bigint, pod: number, kindMask: number): number {
    if (this.#bad(pod)) return -1;
    key = entryKey(key, Math.floor(pod / REF_GROUP_PODS));
    const e = this.#map.get(key);
    return e === undefined ? 0 : this.#clear(key, e, pod, kindMask);
  }

  clearPod (pod: number, kindMask: number): number {
    if (this.#bad(pod)) return -1;
    let changed = 0;
    const g = BigInt(Math.floor(pod / REF_GROUP_PODS));
    for (const [key, e] of [...this.#map]) if ((key & 0xffffn) === g && this.#clear(key, e, pod, kindMask) > 0) changed++;
    return changed;
  }

  /** clearPod for every pod of `pods` at once: keys changed, each counted once. */
  clearPods (pods: readonly number[], kindMask: number): number {
    if (pods.some((p) => this.#bad(p))) return -1;
    let changed = 0;
    for (const [key, e] of [...this.#map]) {
      let hit = false;
      for (const pod of pods) {
        if (BigInt(Math.floor(pod / REF_GROUP_PODS)) !== (key & 0xffffn)) continue;
        const r = this.#clear(key, e, pod, kindMask);
        if (r > 0) hit = true;
        if (r === 2) break; // the key is gone
      }
      if (hit) changed++;
    }
    return changed;
  }

  /** The kernel's rule: the bit and the reference bit set and, for assumed presence, its time younger than TTL/64. */
  #unchanged (e: RefEntry, pod: number, kind: number, now: number): boolean {
    if ((e.bits[kind * WORDS + ((pod % REF_GROUP_PODS) >>> 5)] & (1 << (pod & 31))) === 0 || !e.ref) return false;
    return kind !== ASSUMED || (this.#ttl !== 0 && ((now - e.assumedAt) >>> 0) < (this.#ttl >>> 6));
  }

  /** Whether e's assumed presence is past the last sweep's TTL at `now` (signed: a clock a little behind is not). */
  #expired (now: number, e: RefEntry): boolean {
    return this.#ttl !== 0 && ((now - e.assumedAt) | 0) >= this.#ttl;
  }

  /** The kinds of `kindMask` entry e counts for: without ASSUMED past the TTL when a time is given. */
  #kinds (e: RefEntry, kindMask: number, now: number | undefined): number {
    return now !== undefined && this.#expired(now >>> 0, e) ? kindMask & ~(1 << ASSUMED) : kindMask;
  }

  /** Full sweep: entries whose assumed-at is `ttl` ms old (wrapping u32 ms) lose every pod's ASSUMED bit. */
  expireAssumed (now: number, ttl: number): number {
    this.#ttl = ttl;
    let expired = 0;
    for (const [key, e] of [...this.#map]) {
      if (((now - e.assumedAt) >>> 0) < ttl) continue;
      const a = e.bits.subarray(ASSUMED * WORDS, (ASSUMED + 1) * WORDS);
      if (a.every((w) => w === 0)) continue;
      a.fill(0);
      expired++;
      if (e.bits.every((w) => w === 0)) {
        this.#map.delete(key);
        this.expirations++;
      }
    }
    return expired;
  }

  /**
   * Pods holding `key` in the kinds of `kindMask`, ascending; null if the key is absent (in every group). Given
   * `now`, assumed presence past the last sweep's TTL does not count.
   */
  lookup (key: bigint, kindMask: number, now?: number): number[] | null {
    let found = false;
    const pods: number[] = [];
    for (let g = 0; g < this.#groups; g++) {
      const e = this.#map.get(entryKey(key, g));
      if (e === undefined) continue;
      found = true;
      const km = this.#kinds(e, kindMask, now);
      for (let q = 0; q < REF_GROUP_PODS; q++) {
        for (let k = 0; k < REF_KINDS; k++) {
          if ((km & (1 << k)) !== 0 && (e.bits[k * WORDS + (q >>> 5)] & (1 << (q & 31))) !== 0) {
            pods.push(g * REF_GROUP_PODS + q);
            break;
          }
        }
      }
    }
    return found ? pods : null;
  }

  /** Per-pod matched leading blocks into `counts` (length ≥ pods); returns the deepest match. `now`: as lookup. */
  longestPrefix (keys: BigUint64Array, kindMask: number, counts: Uint32Array, now?: number): number {
    counts.fill(0);
    const words = this.#groups * WORDS;
    const alive = new Uint32Array(words).fill(0xffffffff);
    const present = new Uint32Array(words);
    let depth = 0;
    for (let i = 0; i < keys.length; i++) {
      present.fill(0);
      for (let g = 0; g < this.#groups; g++) {
        const e = this.#map.get(entryKey(keys[i], g));
        if (e === undefined) continue;
        const km = this.#kinds(e, kindMask, now);
        for (let k = 0; k < REF_KINDS; k++) {
          if ((km & (1 << k)) === 0) continue;
          for (let w = 0; w < WORDS; w++) present[g * WORDS + w] |= e.bits[k * WORDS + w];
        }
      }
      let any = 0;
      for (let w = 0; w < words; w++) {
        let dropped = (alive[w] & ~present[w]) >>> 0;
        if (i > 0) {
          while (dropped !== 0) {
            const b = 31 - Math.clz32(dropped & -dropped);
            counts[w * 32 + b] = i;
            dropped &= dropped - 1;
          }
        }
        alive[w] &= present[w];
        any |= alive[w];
      }
      if (any === 0) return depth;
      depth = i + 1;
    }
    for (let w = 0; w < words; w++) {
      for (let b = 0; b < 32; b++) if ((alive[w] & (1 << b)) !== 0 && w * 32 + b < counts.length) counts[w * 32 + b] = depth;
    }
    return depth;
  }
}
