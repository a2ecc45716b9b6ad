// Reference chained block keys (asm/block-hash.ts in plain TypeScript): the oracle and the baseline.
import { lastHi, lastLo, xxh64Limbs } from './xxhash64.js';

/** Key of each full block: XXH64(block tokens as u32 LE, seed = previous key; block 0: `seed`), 0 mapped to 1. */
export function hashBlocksRef (tokens: Uint32Array, blockSize: number, seed: bigint): BigUint64Array {
  const n = blockSize > 0 ? Math.floor(tokens.length / blockSize) : 0;
  const out = new BigUint64Array(n);
  const out32 = new Uint32Array(out.buffer);
  const view = new DataView(tokens.buffer, tokens.byteOffset, tokens.byteLength);
  const s = BigInt.asUintN(64, seed);
  let h = Number(s >> 32n);
  let l = Number(s & 0xffffffffn);
  for (let i = 0; i < n; i++) {
    xxh64Limbs(view, i * blockSize * 4, blockSize * 4, h, l);
    h = lastHi();
    l = lastLo();
    if (h === 0 && l === 0) l = 1;
    out32[2 * i] = l; // little-endian u64
    out32[2 * i + 1] = h;
  }
  return out;
}
