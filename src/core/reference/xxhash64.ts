// Reference XXH64 in plain TypeScript: the test oracle's second opinion and the benchmark baseline.
// 64-bit values are carried as two u32 limbs (hi, lo) in numbers, multiplied with Math.imul plus 16-bit
// partial products for the high half: no BigInt in the loop, so it is about as fast as plain JS gets.
// Results of the limb helpers land in the module-level registers rh/rl (no allocation per operation).

const P1H = 0x9E3779B1, P1L = 0x85EBCA87;
const P2H = 0xC2B2AE3D, P2L = 0x27D4EB4F;
const P3H = 0x165667B1, P3L = 0x9E3779F9;
const P4H = 0x85EBCA77, P4L = 0xC2B2AE63;
const P5H = 0x27D4EB2F, P5L = 0x165667C5;

let rh = 0;
let rl = 0;

function mul (ah: number, al: number, bh: number, bl: number): void {
  const a1 = al >>> 16, a0 = al & 0xffff, b1 = bl >>> 16, b0 = bl & 0xffff;
  const a0b0 = a0 * b0, a1b0 = a1 * b0, a0b1 = a0 * b1;
  const mid = (a0b0 >>> 16) + (a1b0 & 0xffff) + (a0b1 & 0xffff);
  const hiOfLo = a1 * b1 + (a1b0 >>> 16) + (a0b1 >>> 16) + (mid >>> 16);
  rl = Math.imul(al, bl) >>> 0;
  rh = (hiOfLo + Math.imul(ah, bl) + Math.imul(al, bh)) >>> 0;
}

function add (ah: number, al: number, bh: number, bl: number): void {
  const l = al + bl;
  rl = l >>> 0;
  rh = (ah + bh + (l > 0xffffffff ? 1 : 0)) >>> 0;
}

function rotl (h: number, l: number, r: number): void {
  if (r >= 32) { const t = h; h = l; l = t; r -= 32; }
  if (r === 0) { rh = h; rl = l; return; }
  rh = ((h << r) | (l >>> (32 - r))) >>> 0;
  rl = ((l << r) | (h >>> (32 - r))) >>> 0;
}

/** round(acc, lane) = rotl(acc + lane * P2, 31) * P1 */
function round (ah: number, al: number, lh: number, ll: number): void {
  mul(lh, ll, P2H, P2L);
  add(ah, al, rh, rl);
  rotl(rh, rl, 31);
  mul(rh, rl, P1H, P1L);
}

/** merge(acc, v) = (acc ^ round(0, v)) * P1 + P4 */
function merge (ah: number, al: number, vh: number, vl: number): void {
  round(0, 0, vh, vl);
  mul((ah ^ rh) >>> 0, (al ^ rl) >>> 0, P1H, P1L);
  add(rh, rl, P4H, P4L);
}

/** XXH64 of `len` bytes of `view` from `off`, seed (hi, lo); the result is left in rh/rl. */
export function xxh64Limbs (view: DataView, off: number, len: number, sh: number, sl: number): void {
  let p = off;
  const end = off + len;
  let h: number, l: number;
  if (len >= 32) {
    add(sh, sl, P1H, P1L); add(rh, rl, P2H, P2L);
    let v1h = rh, v1l = rl;
    add(sh, sl, P2H, P2L);
    let v2h = rh, v2l = rl;
    let v3h = sh, v3l = sl;
    // seed - P1 = seed + (2^64 - P1)
    add(sh, sl, ~P1H >>> 0, (-P1L) >>> 0); // P1L != 0, so no carry into the high limb
    let v4h = rh, v4l = rl;
    const limit = end - 32;
    while (p <= limit) {
      round(v1h, v1l, view.getUint32(p + 4, true), view.getUint32(p, true)); v1h = rh; v1l = rl;
      round(v2h, v2l, view.getUint32(p + 12, true), view.getUint32(p + 8, true)); v2h = rh; v2l = rl;
      round(v3h, v3l, view.getUint32(p + 20, true), view.getUint32(p + 16, true)); v3h = rh; v3l = rl;
      round(v4h, v4l, view.getUint32(p + 28, true), view.getUint32(p + 24, true)); v4h = rh; v4l = rl;
      p += 32;
    }
    rotl(v1h, v1l, 1); h = rh; l = rl;
    rotl(v2h, v2l, 7); add(h, l, rh, rl); h = rh; l = rl;
    rotl(v3h, v3l, 12); add(h, l, rh, rl); h = rh; l = rl;
    rotl(v4h, v4l, 18); add(h, l, rh, rl); h = rh; l = rl;
    merge(h, l, v1h, v1l); merge(rh, rl, v2h, v2l); merge(rh, rl, v3h, v3l); merge(rh, rl, v4h, v4l);
    h = rh; l = rl;
  } else {
    add(sh, sl, P5H, P5L); h = rh; l = rl;
  }
  add(h, l, Math.floor(len / 0x100000000), len >>> 0); h = rh; l = rl;
  while (p + 8 <= end) {
    round(0, 0, view.getUint32(p + 4, true), view.getUint32(p, true));
    rotl((h ^ rh) >>> 0, (l ^ rl) >>> 0, 27);
    mul(rh, rl, P1H, P1L); add(rh, rl, P4H, P4L); h = rh; l = rl;
    p += 8;
  }
  if (p + 4 <= end) {
    mul(0, view.getUint32(p, true), P1H, P1L);
    rotl((h ^ rh) >>> 0, (l ^ rl) >>> 0, 23);
    mul(rh, rl, P2H, P2L); add(rh, rl, P3H, P3L); h = rh; l = rl;
    p += 4;
  }
  while (p < end) {
    mul(0, view.getUint8(p), P5H, P5L);
    rotl((h ^ rh) >>> 0, (l ^ rl) >>> 0, 11);
    mul(rh, rl, P1H, P1L); h = rh; l = rl;
    p++;
  }
  // avalanche: x ^= x >> 33; x *= P2; x ^= x >> 29; x *= P3; x ^= x >> 32
  l = (l ^ (h >>> 1)) >>> 0;
  mul(h, l, P2H, P2L); h = rh; l = rl;
  l = (l ^ ((l >>> 29) | (h << 3))) >>> 0; h = (h ^ (h >>> 29)) >>> 0;
  mul(h, l, P3H, P3L); h = rh; l = rl;
  rh = h; rl = (l ^ h) >>> 0;
}

/** The (hi, lo) limbs of the last xxh64Limbs result. */
export function lastHi (): number { return rh; }
export function lastLo (): number { return rl; }

/** XXH64 of `bytes` with a u64 seed. */
export function xxh64Ref (bytes: Uint8Array, seed: bigint = 0n): bigint {
  const s = BigInt.asUintN(64, seed);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  xxh64Limbs(view, 0, bytes.byteLength, Number(s >> 32n), Number(s & 0xffffffffn));
  return (BigInt(rh) << 32n) | BigInt(rl);
}
