// A small seeded PRNG (sfc32 state seeded through splitmix32): same seed, same workload, on any machine.

/** splitmix32 finaliser: a well-mixed 32-bit hash of a 32-bit input. */
export function mix32 (x: number): number {
  x = (x + 0x9e3779b9) | 0;
  x = Math.imul(x ^ (x >>> 16), 0x21f0aaad);
  x = Math.imul(x ^ (x >>> 15), 0x735a2d97);
  return (x ^ (x >>> 15)) >>> 0;
}

export class Rng {
  #a: number; #b: number; #c: number; #d: number;
  #spare: number | null = null;

  constructor (seed: number, stream = 0) {
    const s = mix32((seed | 0) ^ mix32(stream));
    this.#a = mix32(s); this.#b = mix32(s + 1); this.#c = mix32(s + 2); this.#d = 1;
    for (let i = 0; i < 12; i++) this.nextU32();
  }

  nextU32 (): number {
    const t = (((this.#a + this.#b) | 0) + this.#d) | 0;
    this.#d = (this.#d + 1) | 0;
    this.#a = this.#b ^ (this.#b >>> 9);
    this.#b = (this.#c + (this.#c << 3)) | 0;
    this.#c = (this.#c << 21) | (this.#c >>> 11);
    this.#c = (this.#c + t) | 0;
    return t >>> 0;
  }

  /** Uniform in [0, 1). */
  next (): number { return this.nextU32() / 4294967296; }

  /** Uniform integer in [0, n). */
  int (n: number): number { return Math.floor(this.next() * n); }

  /** Standard normal (Box–Muller, the second value kept for the next call). */
  normal (): number {
    if (this.#spare !== null) { const v = this.#spare; this.#spare = null; return v; }
    let u = 0;
    while (u === 0) u = this.next();
    const r = Math.sqrt(-2 * Math.log(u));
    const th = 2 * Math.PI * this.next();
    this.#spare = r * Math.sin(th);
    return r * Math.cos(th);
  }

  /** Log-normal with the given median and shape σ (of the underlying normal). */
  logNormal (median: number, sigma: number): number { return median * Math.exp(sigma * this.normal()); }

  /** Exponential with the given rate (mean 1/rate). */
  exponential (rate: number): number { return -Math.log(1 - this.next()) / rate; }
}
