// A small msgpack writer that makes the same choices as msgspec (vllm-wire.md §1.2), which @msgpack/msgpack
// cannot be told to make: floats always float64 (0xcb), the smallest int form (unsigned forms for n ≥ 0,
// so a 64-bit hash goes out as 0xcf), str8 for 32..255-byte strings, bin for bytes.

const textEncoder = new TextEncoder();
const U64_MAX = (1n << 64n) - 1n;
const I64_MIN = -(1n << 63n);

export class MsgpackWriter {
  #buf: Uint8Array;
  #view: DataView;
  #pos = 0;

  constructor (initialBytes = 1024) {
    this.#buf = new Uint8Array(initialBytes);
    this.#view = new DataView(this.#buf.buffer);
  }

  /** The bytes written so far (a copy, so the writer can be reused). */
  bytes (): Uint8Array {
    return this.#buf.slice(0, this.#pos);
  }

  #ensure (n: number): void {
    if (this.#pos + n <= this.#buf.length) return;
    let size = this.#buf.length * 2;
    while (size < this.#pos + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.#buf.subarray(0, this.#pos));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }

  #u8 (b: number): void {
    this.#ensure(1);
    this.#buf[this.#pos++] = b;
  }

  #head (marker: number, width: 1 | 2 | 4, n: number): void {
    this.#ensure(1 + width);
    this.#buf[this.#pos++] = marker;
    if (width === 1) this.#view.setUint8(this.#pos, n);
    else if (width === 2) this.#view.setUint16(this.#pos, n);
    else this.#view.setUint32(this.#pos, n);
    this.#pos += width;
  }

  nil (): void { this.#u8(0xc0); }

  bool (b: boolean): void { this.#u8(b ? 0xc3 : 0xc2); }

  float64 (x: number): void {
    this.#ensure(9);
    this.#buf[this.#pos++] = 0xcb;
    this.#view.setFloat64(this.#pos, x);
    this.#pos += 8;
  }

  /** An integer in the smallest msgpack form; a number must be a safe integer, a bigint within int64/uint64. */
  int (n: number | bigint): void {
    if (typeof n === 'number') {
      if (!Number.isSafeInteger(n)) throw new RangeError(`not a safe integer: ${n}`);
      if (n >= 0) {
        if (n < 0x80) this.#u8(n);
        else if (n < 0x100) this.#head(0xcc, 1, n);
        else if (n < 0x10000) this.#head(0xcd, 2, n);
        else if (n < 0x100000000) this.#head(0xce, 4, n);
        else this.#int64(0xcf, BigInt(n));
      } else {
        if (n >= -32) this.#u8(n & 0xff);
        else if (n >= -0x80) { this.#ensure(2); this.#buf[this.#pos++] = 0xd0; this.#view.setInt8(this.#pos++, n); }
        else if (n >= -0x8000) { this.#ensure(3); this.#buf[this.#pos++] = 0xd1; this.#view.setInt16(this.#pos, n); this.#pos += 2; }
        else if (n >= -0x80000000) { this.#ensure(5); this.#buf[this.#pos++] = 0xd2; this.#view.setInt32(this.#pos, n); this.#pos += 4; }
        else this.#int64(0xd3, BigInt(n));
      }
      return;
    }
    if (n > U64_MAX || n < I64_MIN) throw new RangeError(`integer out of 64-bit range: ${n}`);
    if (n >= -0x80000000n && n < 0x100000000n) this.int(Number(n));
    else this.#int64(n >= 0n ? 0xcf : 0xd3, n);
  }

  #int64 (marker: 0xcf | 0xd3, n: bigint): void {
    this.#ensure(9);
    this.#buf[this.#pos++] = marker;
    if (marker === 0xcf) this.#view.setBigUint64(this.#pos, n);
    else this.#view.setBigInt64(this.#pos, n);
    this.#pos += 8;
  }

  str (s: string): void {
    const bytes = textEncoder.encode(s);
    const n = bytes.length;
    if (n < 32) this.#u8(0xa0 | n);
    else if (n < 0x100) this.#head(0xd9, 1, n);
    else if (n < 0x10000) this.#head(0xda, 2, n);
    else this.#head(0xdb, 4, n);
    this.#raw(bytes);
  }

  bin (bytes: Uint8Array): void {
    const n = bytes.length;
    if (n < 0x100) this.#head(0xc4, 1, n);
    else if (n < 0x10000) this.#head(0xc5, 2, n);
    else this.#head(0xc6, 4, n);
    this.#raw(bytes);
  }

  #raw (bytes: Uint8Array): void {
    this.#ensure(bytes.length);
    this.#buf.set(bytes, this.#pos);
    this.#pos += bytes.length;
  }

  arrayHeader (n: number): void {
    if (n < 16) this.#u8(0x90 | n);
    else if (n < 0x10000) this.#head(0xdc, 2, n);
    else this.#head(0xdd, 4, n);
  }

  mapHeader (n: number): void {
    if (n < 16) this.#u8(0x80 | n);
    else if (n < 0x10000) this.#head(0xde, 2, n);
    else this.#head(0xdf, 4, n);
  }

  /**
   * Any plain value, as msgspec would write its Python counterpart: null, booleans, integers (a JS number that
   * is an integer is written as an int), other numbers as float64, strings, bytes as bin, arrays as arrays.
   */
  value (v: unknown): void {
    if (v === null || v === undefined) this.nil();
    else if (typeof v === 'boolean') this.bool(v);
    else if (typeof v === 'number') Number.isSafeInteger(v) ? this.int(v) : this.float64(v);
    else if (typeof v === 'bigint') this.int(v);
    else if (typeof v === 'string') this.str(v);
    else if (v instanceof Uint8Array) this.bin(v);
    else if (Array.isArray(v)) {
      this.arrayHeader(v.length);
      for (const x of v) this.value(x);
    } else throw new TypeError(`cannot encode a ${typeof v} as msgpack here`);
  }
}
