// Chained block keys: key i = XXH64(block i's tokens as u32 LE bytes, seed = key i-1), block 0 seeded with the
// root seed (the hash of model, LoRA adapter and cache_salt; src/core/block-keys.ts). Only full blocks count.
// 0 marks an empty prefix-index slot, so a 0 result becomes 1 and the chain continues from the mapped value.
import { xxh64 } from './xxhash64';

/** Writes the u64 key of each full block to `outPtr` and returns how many it wrote (nTokens / blockSize). */
export function hashBlocks (tokensPtr: usize, nTokens: u32, blockSize: u32, seed: u64, outPtr: usize): u32 {
  if (blockSize == 0) return 0;
  const n = nTokens / blockSize;
  const bytes = <usize>blockSize << 2;
  let prev = seed;
  let p = tokensPtr;
  for (let i: u32 = 0; i < n; i++) {
    let h = xxh64(p, bytes, prev);
    if (h == 0) h = 1;
    store<u64>(outPtr + (<usize>i << 3), h);
    prev = h;
    p += bytes;
  }
  return n;
}
