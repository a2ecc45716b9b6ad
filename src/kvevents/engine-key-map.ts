// Engine block hash → EAR key (and the tiers the backend holds it in), for one backend, on typed arrays: a JS
// Map keyed by BigInt costs ~0.5 µs per set+delete (BigInt hashing), which alone would cap the kv-events
// thread below its 2M blocks/s target. Hashes and keys travel as (lo, hi) u32 halves, never as BigInt.
//
// Open addressing with linear probing and backward-shift deletion (no tombstones), at most half full.
// Bound: `cap` entries; at the cap the oldest stored entry goes (insertion order is kept in a ring of 2·cap
// (hash, serial) pairs: removals leave stale pairs behind, and a full ring is compacted, which frees at least
// half of it, so every operation stays O(1) amortised).

const EMPTY = 0;

/** Splits a u64 BigInt into u32 halves without allocating. */
const split64 = new BigUint64Array(1);
const split32 = new Uint32Array(split64.buffer);

export function lo32 (h: bigint): number {
  split64[0] = h;
  return split32[0];
}

/** The high half of the value last given to lo32. */
export function hi32 (): number {
  return split32[1];
}

export function join64 (lo: number, hi: number): bigint {
  split32[0] = lo;
  split32[1] = hi;
  return split64[0];
}

export class EngineKeyMap {
  readonly cap: number;
  /** Per slot: the engine hash, the EAR key, the tier bits (0 = empty slot) and the insertion serial. */
  readonly hashLo: Uint32Array;
  readonly hashHi: Uint32Array;
  readonly keyLo: Uint32Array;
  readonly keyHi: Uint32Array;
  readonly tiers: Uint8Array;
  readonly #serial: Uint32Array;
  readonly #mask: number;
  #size = 0;
  #nextSerial = 1;
  /** Insertion order: ring of (hashLo, hashHi, serial), 2·cap long. */
  readonly #ringLo: Uint32Array;
  readonly #ringHi: Uint32Array;
  readonly #ringSerial: Uint32Array;
  #head = 0;
  #count = 0;

  constructor (cap: number) {
    if (!Number.isInteger(cap) || cap < 1 || cap > 1 << 28) throw new RangeError(`map capacity must be an integer in [1, 2^28], got ${cap}`);
    this.cap = cap;
    let slots = 16;
    while (slots < cap * 2) slots *= 2;
    this.#mask = slots - 1;
    this.hashLo = new Uint32Array(slots);
    this.hashHi = new Uint32Array(slots);
    this.keyLo = new Uint32Array(slots);
    this.keyHi = new Uint32Array(slots);
    this.tiers = new Uint8Array(slots);
    this.#serial = new Uint32Array(slots);
    this.#ringLo = new Uint32Array(cap * 2);
    this.#ringHi = new Uint32Array(cap * 2);
    this.#ringSerial = new Uint32Array(cap * 2);
  }

  get size (): number { return this.#size; }

  #home (lo: number, hi: number): number {
    // Engine hashes are digests already; one multiply spreads sequential test hashes too.
    return (Math.imul(lo ^ Math.imul(hi, 0x9e3779b1), 0x85ebca6b) >>> 0) & this.#mask;
  }

  /** The slot holding this hash, or -1. */
  find (lo: number, hi: number): number {
    const m = this.#mask;
    for (let s = this.#home(lo, hi); ; s = (s + 1) & m) {
      if (this.tiers[s] === EMPTY) return -1;
      if (this.hashLo[s] === lo && this.hashHi[s] === hi) return s;
    }
  }

  /**
   * Maps the hash to the key in `tier`. A hash mapped to the same key gains the tier; mapped to another key,
   * it is replaced and `replaced` gets the old key's slot values. At the cap the oldest entry is evicted
   * first and handed to `onEvict` (its key must leave the index). Returns the slot.
   */
  set (lo: number, hi: number, kLo: number, kHi: number, tier: number, onEvict: (kLo: number, kHi: number, tiers: number) => void): number {
    let s = this.find(lo, hi);
    if (s >= 0) {
      if (this.keyLo[s] === kLo && this.keyHi[s] === kHi) {
        this.tiers[s] |= tier;
      } else {
        onEvict(this.keyLo[s], this.keyHi[s], this.tiers[s]);
        this.keyLo[s] = kLo;
        this.keyHi[s] = kHi;
        this.tiers[s] = tier;
      }
      return s;
    }
    if (this.#size >= this.cap) this.#evictOldest(onEvict);
    const m = this.#mask;
    for (s = this.#home(lo, hi); this.tiers[s] !== EMPTY; s = (s + 1) & m);
    const serial = this.#nextSerial;
    this.#nextSerial = (serial + 1) >>> 0 || 1;
    this.hashLo[s] = lo;
    this.hashHi[s] = hi;
    this.keyLo[s] = kLo;
    this.keyHi[s] = kHi;
    this.tiers[s] = tier;
    this.#serial[s] = serial;
    this.#size++;
    this.#push(lo, hi, serial);
    return s;
  }

  /** Empties a slot (backward-shift deletion keeps every other key reachable). */
  delete (slot: number): void {
    const m = this.#mask;
    let hole = slot;
    for (let s = (slot + 1) & m; this.tiers[s] !== EMPTY; s = (s + 1) & m) {
      const home = this.#home(this.hashLo[s], this.hashHi[s]);
      // Move s into the hole if its home is not in (hole, s] cyclically.
      if (((s - home) & m) >= ((s - hole) & m)) {
        this.hashLo[hole] = this.hashLo[s];
        this.hashHi[hole] = this.hashHi[s];
        this.keyLo[hole] = this.keyLo[s];
        this.keyHi[hole] = this.keyHi[s];
        this.tiers[hole] = this.tiers[s];
        this.#serial[hole] = this.#serial[s];
        hole = s;
      }
    }
    this.tiers[hole] = EMPTY;
    this.#size--;
  }

  clear (): void {
    this.tiers.fill(EMPTY);
    this.#size = 0;
    this.#head = 0;
    this.#count = 0;
  }

  /** Calls fn with every live entry's slot (keyLo, keyHi and tiers at that index). */
  forEachLive (fn: (slot: number) => void): void {
    const t = this.tiers;
    for (let s = 0; s < t.length; s++) if (t[s] !== EMPTY) fn(s);
  }

  /** Calls fn for every entry's tiers (counting per tier). */
  forEachTiers (fn: (tiers: number) => void): void {
    const t = this.tiers;
    for (let s = 0; s < t.length; s++) if (t[s] !== EMPTY) fn(t[s]);
  }

  #live (i: number): number {
    const s = this.find(this.#ringLo[i], this.#ringHi[i]);
    return s >= 0 && this.#serial[s] === this.#ringSerial[i] ? s : -1;
  }

  #evictOldest (onEvict: (kLo: number, kHi: number, tiers: number) => void): void {
    const n = this.#ringLo.length;
    while (this.#count > 0) {
      const i = this.#head;
      this.#head = (i + 1) % n;
      this.#count--;
      const s = this.#live(i);
      if (s < 0) continue;
      onEvict(this.keyLo[s], this.keyHi[s], this.tiers[s]);
      this.delete(s);
      return;
    }
  }

  #push (lo: number, hi: number, serial: number): void {
    const n = this.#ringLo.length;
    if (this.#count === n) this.#compact();
    const i = (this.#head + this.#count) % n;
    this.#ringLo[i] = lo;
    this.#ringHi[i] = hi;
    this.#ringSerial[i] = serial;
    this.#count++;
  }

  /** Drops stale ring entries, keeping order; at most cap of 2·cap are live, so at least half is freed. */
  #compact (): void {
    const n = this.#ringLo.length;
    const lo = new Uint32Array(this.#count);
    const hi = new Uint32Array(this.#count);
    const se = new Uint32Array(this.#count);
    let k = 0;
    for (let j = 0; j < this.#count; j++) {
      const i = (this.#head + j) % n;
      if (this.#live(i) < 0) continue;
      lo[k] = this.#ringLo[i];
      hi[k] = this.#ringHi[i];
      se[k] = this.#ringSerial[i];
      k++;
    }
    this.#ringLo.set(lo.subarray(0, k));
    this.#ringHi.set(hi.subarray(0, k));
    this.#ringSerial.set(se.subarray(0, k));
    this.#head = 0;
    this.#count = k;
  }
}
