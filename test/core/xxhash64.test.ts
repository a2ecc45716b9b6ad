import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import xxhash from 'xxhash-wasm';
import { createAndAttach } from '../../src/core/region.js';
import { xxh64Ref } from '../../src/core/reference/xxhash64.js';

const { h64Raw } = await xxhash();
const region = createAndAttach({ prefixIndexKeys: 16, scratchSlots: 2, scratchBytes: 4 << 20 });
const scratch = region.claimScratch();
const xxh64 = region.fn<(ptr: number, len: number, seed: bigint) => bigint>('xxh64');
const xxh64Tokens = region.fn<(ptr: number, n: number, seed: bigint) => bigint>('xxh64Tokens');

/** WASM XXH64 of `bytes` placed at `shift` bytes past an aligned pointer (unaligned lanes are legal). */
function wasm (bytes: Uint8Array, seed: bigint, shift = 0): bigint {
  region.u8.set(bytes, scratch.ptr + shift);
  return BigInt.asUintN(64, xxh64(scratch.ptr + shift, bytes.length, seed));
}

const seedArb = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });

test('known answers from the spec: empty input', () => {
  assert.equal(wasm(new Uint8Array(0), 0n), 0xEF46DB3751D8E999n);
  assert.equal(xxh64Ref(new Uint8Array(0), 0n), 0xEF46DB3751D8E999n);
});

test('every length 0..100 (all tail paths and the 32-byte stripes) agrees with xxhash-wasm, WASM and reference', () => {
  fc.assert(fc.property(fc.uint8Array({ minLength: 100, maxLength: 100 }), seedArb, fc.integer({ min: 0, max: 7 }), (buf, seed, shift) => {
    for (let len = 0; len <= 100; len++) {
      const bytes = buf.subarray(0, len);
      const expected = h64Raw(bytes, seed);
      assert.equal(wasm(bytes, seed, shift), expected, `wasm, length ${len}`);
      assert.equal(xxh64Ref(bytes, seed), expected, `reference, length ${len}`);
    }
  }), { numRuns: 60 });
});

test('random and large inputs agree with xxhash-wasm', () => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 5000 }), seedArb, (bytes, seed) => {
    const expected = h64Raw(bytes, seed);
    assert.equal(wasm(bytes, seed, 3), expected);
    assert.equal(xxh64Ref(bytes, seed), expected);
  }), { numRuns: 200 });
  const big = new Uint8Array((3 << 20) + 13);
  for (let i = 0; i < big.length; i++) big[i] = (i * 2654435761) >>> 24;
  for (const seed of [0n, 1n, 0xFFFFFFFFFFFFFFFFn, 0x9E3779B97F4A7C15n]) {
    const expected = h64Raw(big, seed);
    assert.equal(wasm(big, seed), expected);
    assert.equal(xxh64Ref(big, seed), expected);
  }
});

test('the token form hashes the u32 ids as little-endian bytes', () => {
  fc.assert(fc.property(fc.array(fc.nat({ max: 0xffffffff }), { maxLength: 300 }), seedArb, (ids, seed) => {
    const tokens = Uint32Array.from(ids);
    region.u32.set(tokens, scratch.ptr >>> 2);
    const bytes = new Uint8Array(tokens.buffer);
    assert.equal(BigInt.asUintN(64, xxh64Tokens(scratch.ptr, tokens.length, seed)), h64Raw(bytes, seed));
  }), { numRuns: 100 });
});
