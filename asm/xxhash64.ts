// xxHash64 (XXH64) exactly as the spec describes it (Cyan4973/xxHash doc/xxhash_spec.md): four 64-bit lanes
// over 32-byte stripes, then the 8-, 4- and 1-byte tails, then the avalanche. Reads raw bytes at a pointer
// with unaligned little-endian loads; keeps everything in locals (no statics, no allocation), so it is safe
// from any thread over the shared memory.

const P1: u64 = 0x9E3779B185EBCA87;
const P2: u64 = 0xC2B2AE3D27D4EB4F;
const P3: u64 = 0x165667B19E3779F9;
const P4: u64 = 0x85EBCA77C2B2AE63;
const P5: u64 = 0x27D4EB2F165667C5;

// @ts-ignore: decorator
@inline function round (acc: u64, lane: u64): u64 {
  return rotl<u64>(acc + lane * P2, 31) * P1;
}

// @ts-ignore: decorator
@inline function merge (acc: u64, lane: u64): u64 {
  return (acc ^ round(0, lane)) * P1 + P4;
}

/** XXH64 of `len` bytes at `ptr` with `seed`. */
export function xxh64 (ptr: usize, len: usize, seed: u64): u64 {
  let p = ptr;
  const end = ptr + len;
  let acc: u64;
  if (len >= 32) {
    let v1 = seed + P1 + P2;
    let v2 = seed + P2;
    let v3 = seed;
    let v4 = seed - P1;
    const limit = end - 32;
    do {
      v1 = round(v1, load<u64>(p));
      v2 = round(v2, load<u64>(p, 8));
      v3 = round(v3, load<u64>(p, 16));
      v4 = round(v4, load<u64>(p, 24));
      p += 32;
    } while (p <= limit);
    acc = rotl<u64>(v1, 1) + rotl<u64>(v2, 7) + rotl<u64>(v3, 12) + rotl<u64>(v4, 18);
    acc = merge(acc, v1);
    acc = merge(acc, v2);
    acc = merge(acc, v3);
    acc = merge(acc, v4);
  } else {
    acc = seed + P5;
  }
  acc += <u64>len;
  while (p + 8 <= end) {
    acc = rotl<u64>(acc ^ round(0, load<u64>(p)), 27) * P1 + P4;
    p += 8;
  }
  if (p + 4 <= end) {
    acc = rotl<u64>(acc ^ (<u64>load<u32>(p) * P1), 23) * P2 + P3;
    p += 4;
  }
  while (p < end) {
    acc = rotl<u64>(acc ^ (<u64>load<u8>(p) * P5), 11) * P1;
    p++;
  }
  acc ^= acc >> 33;
  acc *= P2;
  acc ^= acc >> 29;
  acc *= P3;
  acc ^= acc >> 32;
  return acc;
}

/** XXH64 of `n` u32 tokens at `ptr` (little-endian in memory, so the same bytes the engine hashes). */
export function xxh64Tokens (ptr: usize, n: u32, seed: u64): u64 {
  return xxh64(ptr, <usize>n << 2, seed);
}
