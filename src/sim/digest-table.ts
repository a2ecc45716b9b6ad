// Digest → block id, as an open-addressing hash table over typed arrays (linear probing, backward-shift
// deletion). A prefix lookup walks ~2k digests per 33k-token prompt, so this must not build strings or box
// numbers: each slot keeps the digest's first 128 bits, and a match on all of them is taken as identity
// (sha256 outputs are uniform; a 128-bit collision among a few million blocks has odds ~2^-85).
import type { BlockDigest } from './block-hash.js';

const EMPTY = -1;

export class DigestTable {
  readonly #mask: number;
  readonly #value: Int32Array;
  readonly #words: Int32Array;
  #size = 0;

  /** Holds up to `maxEntries`; the table is twice that (rounded up to a power of two) to keep probes short. */
  constructor (maxEntries: number) {
    let cap = 16;
    while (cap < maxEntries * 2) cap *= 2;
    this.#mask = cap - 1;
    this.#value = new Int32Array(cap).fill(EMPTY);
    this.#words = new Int32Array(cap * 4);
  }

  get size (): number { return this.#size; }

  get (d: BlockDigest): number {
    const w0 = word(d, 0);
    const w1 = word(d, 4);
    const w2 = word(d, 8);
    const w3 = word(d, 12);
    const words = this.#words;
    for (let i = w0 & this.#mask; ; i = (i + 1) & this.#mask) {
      const v = this.#value[i];
      if (v === EMPTY) return EMPTY;
      const k = i * 4;
      if (words[k] === w0 && words[k + 1] === w1 && words[k + 2] === w2 && words[k + 3] === w3) return v;
    }
  }

  /** Inserts d → value; false if d is already present (the table is left unchanged). */
  set (d: BlockDigest, value: number): boolean {
    if (this.#size * 2 >= this.#value.length) throw new Error('digest table is full');
    const w0 = word(d, 0);
    const w1 = word(d, 4);
    const w2 = word(d, 8);
    const w3 = word(d, 12);
    const words = this.#words;
    let i = w0 & this.#mask;
    for (; this.#value[i] !== EMPTY; i = (i + 1) & this.#mask) {
      const k = i * 4;
      if (words[k] === w0 && words[k + 1] === w1 && words[k + 2] === w2 && words[k + 3] === w3) return false;
    }
    this.#value[i] = value;
    const k = i * 4;
    words[k] = w0; words[k + 1] = w1; words[k + 2] = w2; words[k + 3] = w3;
    this.#size++;
    return true;
  }

  delete (d: BlockDigest): boolean {
    const w0 = word(d, 0);
    const w1 = word(d, 4);
    const w2 = word(d, 8);
    const w3 = word(d, 12);
    const words = this.#words;
    const mask = this.#mask;
    let i = w0 & mask;
    for (; ; i = (i + 1) & mask) {
      if (this.#value[i] === EMPTY) return false;
      const k = i * 4;
      if (words[k] === w0 && words[k + 1] === w1 && words[k + 2] === w2 && words[k + 3] === w3) break;
    }
    // Backward shift: pull later entries of the probe run into the hole when their home slot allows it.
    let hole = i;
    for (let j = (i + 1) & mask; this.#value[j] !== EMPTY; j = (j + 1) & mask) {
      const home = words[j * 4] & mask;
      if (((j - home) & mask) >= ((j - hole) & mask)) {
        this.#value[hole] = this.#value[j];
        words.copyWithin(hole * 4, j * 4, j * 4 + 4);
        hole = j;
      }
    }
    this.#value[hole] = EMPTY;
    this.#size--;
    return true;
  }

  clear (): void {
    this.#value.fill(EMPTY);
    this.#size = 0;
  }

  /** Every (value) present, for invariant checks. */
  * values (): IterableIterator<number> {
    for (const v of this.#value) if (v !== EMPTY) yield v;
  }
}

function word (d: Uint8Array, o: number): number {
  return d[o] | (d[o + 1] << 8) | (d[o + 2] << 16) | (d[o + 3] << 24);
}
