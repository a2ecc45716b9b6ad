// An open-addressing hash table from string ranges (UTF-16 code units of text[from..to)) to non-negative ints,
// its keys copied into one char arena: a lookup allocates nothing (no substring, no string hash), which is
// what makes the encoder's per-piece lookups cheap. A slot holds (hash, key length, value, key start) side by
// side, so a probe reads one cache line, and the arena only when hash and length agree.
// Bound: `capacity` entries; set() refuses past it. Keys are non-empty (length 0 marks an empty slot): set()
// refuses an empty key and get() does not find one.

/** A table that is no longer written, on SharedArrayBuffers (PieceTable.freeze), for PieceTable.thaw on any thread. */
export interface FrozenPieceTable {
  capacity: number;
  size: number;
  slots: Int32Array;
  chars: Uint16Array;
}

type Typed = Int32Array | Uint16Array | Uint8Array;

/** A copy of `a` on a SharedArrayBuffer (structured clone passes it by reference), or `a` if it already is on one. */
export function shareArray<T extends Typed> (a: T): T {
  if (a.buffer instanceof SharedArrayBuffer) return a;
  const copy = new (a.constructor as new (b: SharedArrayBuffer) => T)(new SharedArrayBuffer(a.byteLength));
  copy.set(a as never);
  return copy;
}

export class PieceTable {
  readonly capacity: number;
  #size = 0;
  readonly #slots: Int32Array; // fours (key hash; key length, 0 = empty; value; key start in #chars)
  readonly #mask: number;
  #chars: Uint16Array;
  #charsUsed = 0;
  /** Frozen (or thawed from frozen arrays): its arrays may be other threads' too, so nothing writes them. */
  #frozen = false;

  constructor (capacity: number, frozen?: FrozenPieceTable) {
    this.capacity = capacity;
    if (frozen !== undefined) {
      this.#slots = frozen.slots;
      this.#mask = frozen.slots.length / 4 - 1;
      this.#chars = frozen.chars;
      this.#charsUsed = frozen.chars.length;
      this.#size = frozen.size;
      this.#frozen = true;
      return;
    }
    let slots = 1;
    while (slots < capacity * 2) slots *= 2;
    this.#slots = new Int32Array(slots * 4);
    this.#mask = slots - 1;
    this.#chars = new Uint16Array(Math.max(1024, capacity * 4));
  }

  /** A table over frozen arrays, for lookups only: a set() on it would write the other threads' tables. */
  static thaw (frozen: FrozenPieceTable): PieceTable {
    return new PieceTable(frozen.capacity, frozen);
  }

  /** The table as it is, on SharedArrayBuffers (its keys' arena trimmed to what is used); set() refuses after this. */
  freeze (): FrozenPieceTable {
    this.#frozen = true;
    return { capacity: this.capacity, size: this.#size, slots: shareArray(this.#slots), chars: shareArray(this.#chars.subarray(0, this.#charsUsed)) };
  }

  get size (): number {
    return this.#size;
  }

  /** The value of text[from..to), or -1. */
  get (text: string, from: number, to: number): number {
    const len = to - from;
    const chars = this.#chars;
    const slots = this.#slots;
    const h = hash(text, from, to);
    for (let slot = h & this.#mask; ; slot = (slot + 1) & this.#mask) {
      const n = slots[4 * slot + 1];
      if (n === 0) return -1;
      if (slots[4 * slot] !== h || n !== len) continue;
      const s = slots[4 * slot + 3];
      let i = 0;
      while (i < len && chars[s + i] === text.charCodeAt(from + i)) i++;
      if (i === len) return slots[4 * slot + 2];
    }
  }

  /** Adds text[from..to) → value (the caller knows it is absent); false when the table is full. */
  set (text: string, from: number, to: number, value: number): boolean {
    const at = this.#reserve(to - from);
    if (at < 0) return false;
    for (let i = from; i < to; i++) this.#chars[at + i - from] = text.charCodeAt(i);
    this.#link(at, to - from, value, hash(text, from, to));
    return true;
  }

  /** set() for a key given as code units[0..len). */
  setCodes (units: Uint16Array, len: number, value: number): boolean {
    const at = this.#reserve(len);
    if (at < 0) return false;
    this.#chars.set(units.subarray(0, len), at);
    let h = 0x811c9dc5;
    for (let i = 0; i < len; i++) h = Math.imul(h ^ units[i], 0x01000193);
    this.#link(at, len, value, h ^ (h >>> 15));
    return true;
  }

  /** Room for a key of len code units in the arena: its offset, or -1 when the table is full or the key empty. */
  #reserve (len: number): number {
    if (this.#size >= this.capacity || len === 0 || this.#frozen) return -1;
    if (this.#charsUsed + len > this.#chars.length) {
      const grown = new Uint16Array(Math.max(this.#chars.length * 2, this.#charsUsed + len));
      grown.set(this.#chars.subarray(0, this.#charsUsed));
      this.#chars = grown;
    }
    const at = this.#charsUsed;
    this.#charsUsed += len;
    return at;
  }

  #link (at: number, len: number, value: number, h: number): void {
    this.#size++;
    let slot = h & this.#mask;
    while (this.#slots[4 * slot + 1] !== 0) slot = (slot + 1) & this.#mask;
    this.#slots[4 * slot] = h;
    this.#slots[4 * slot + 1] = len;
    this.#slots[4 * slot + 2] = value;
    this.#slots[4 * slot + 3] = at;
  }

  clear (): void {
    if (this.#frozen) throw new Error('a frozen piece table is not cleared: other threads read it');
    this.#slots.fill(0);
    this.#size = 0;
    this.#charsUsed = 0;
  }
}

/** FNV-1a over the code units, with the high bits folded into the low ones the table indexes by (as setCodes). */
function hash (text: string, from: number, to: number): number {
  let h = 0x811c9dc5;
  for (let i = from; i < to; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h ^ (h >>> 15);
}
