import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createAndAttach } from '../../src/core/region.js';
import { BlockHasher, ROOT_SEPARATOR } from '../../src/core/block-keys.js';
import { hashBlocksRef } from '../../src/core/reference/block-hash.js';
import { xxh64Ref } from '../../src/core/reference/xxhash64.js';

const region = createAndAttach({ prefixIndexKeys: 16, scratchSlots: 3, scratchBytes: 1 << 20 });
const hasher = new BlockHasher(region);
const seedArb = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const tokensArb = fc.array(fc.nat({ max: 0xffffffff }), { maxLength: 2000 }).map((a) => Uint32Array.from(a));

test('hashBlocks (WASM) equals the reference chain: full blocks only, seeded by the previous key', () => {
  fc.assert(fc.property(tokensArb, fc.integer({ min: 1, max: 64 }), seedArb, (tokens, blockSize, seed) => {
    const got = hasher.hash(tokens, blockSize, seed);
    const want = hashBlocksRef(tokens, blockSize, seed);
    assert.equal(got.count, Math.floor(tokens.length / blockSize));
    assert.deepEqual([...got.keys], [...want]);
    assert.deepEqual([...hasher.hash([...tokens], blockSize, seed).keys], [...want], 'number[] input');
  }), { numRuns: 150 });
});

test('a key chains from its parent: hashing the tail from the last key of the head gives the same keys', () => {
  const tokens = Uint32Array.from({ length: 16 * 40 }, (_, i) => (i * 7919) >>> 0);
  const all = [...hasher.hash(tokens, 16, 42n).keys];
  const tail = [...hasher.hash(tokens.subarray(16 * 10), 16, all[9]).keys];
  assert.deepEqual(tail, all.slice(10));
  assert.ok(all.every((k) => k !== 0n));
});

test('a prompt larger than the scratch area is hashed in chunks with the same keys', () => {
  const small = createAndAttach({ prefixIndexKeys: 16, scratchSlots: 1, scratchBytes: 4096 });
  const h = new BlockHasher(small);
  const tokens = Uint32Array.from({ length: 16 * 200 + 5 }, (_, i) => (i * 2654435761) >>> 0);
  const got = h.hash(tokens, 16, 7n);
  assert.equal(got.count, 200);
  assert.deepEqual([...got.keys], [...hashBlocksRef(tokens, 16, 7n)]);
  assert.throws(() => h.hash(new Uint32Array(16 * 600), 16, 7n), /raise scratchBytes/);
});

test('the root seed hashes model, adapter and salt with a separator no UTF-8 name contains', () => {
  const utf8 = (s: string): number[] => [...new TextEncoder().encode(s)];
  const bytes = Uint8Array.from([...utf8('Qwen/Qwen3-8B'), ROOT_SEPARATOR, ...utf8('sql-lora'), ROOT_SEPARATOR, ...utf8('sälz')]);
  assert.equal(hasher.rootSeed('Qwen/Qwen3-8B', 'sql-lora', 'sälz'), xxh64Ref(bytes, 0n));
  assert.equal(hasher.rootSeed('m'), hasher.rootSeed('m', '', ''));
  assert.notEqual(hasher.rootSeed('ab', 'c'), hasher.rootSeed('a', 'bc'));
  assert.notEqual(hasher.rootSeed('m', null, 's'), hasher.rootSeed('m', 's', null));
});

test('bad input gets a clear error', () => {
  assert.throws(() => hasher.hash([1, 2, -3, 4], 2, 0n), /not a u32 id/);
  assert.throws(() => hasher.hash([1, 2, 3.5, 4], 2, 0n), /not a u32 id/);
  assert.throws(() => hasher.hash([1, 2], 0, 0n), /block size/);
  assert.equal(hasher.hash([1, 2, 3], 4, 0n).count, 0);
});

test('a remembered root seed is the computed one, for more models than are kept, and never stands in for a salted one', () => {
  const ref = (model: string, salt = ''): bigint => {
    const enc = new TextEncoder();
    return xxh64Ref(Uint8Array.from([...enc.encode(model), ROOT_SEPARATOR, ROOT_SEPARATOR, ...enc.encode(salt)]), 0n);
  };
  const h = new BlockHasher(region);
  // Twice round 200 models (past the 64 kept): every answer, remembered or not, is the reference's.
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < 200; i++) assert.equal(h.rootSeed(`model-${i % 70}-${i}`), ref(`model-${i % 70}-${i}`));
  }
  assert.equal(h.rootSeed('m'), ref('m'));
  assert.equal(h.rootSeed('m', null, 'salt'), ref('m', 'salt'));
  assert.equal(h.rootSeed('m'), ref('m'));
});

test('hashText is XXH64 of the text\'s UTF-8 (lone surrogates as U+FFFD), and text past the scratch area throws as bytes do', () => {
  const utf8 = new TextEncoder();
  fc.assert(fc.property(fc.oneof(fc.string(), fc.string({ unit: 'binary' }), fc.string({ unit: fc.integer({ min: 0, max: 0xFFFF }).map((c) => String.fromCharCode(c)) })), fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }), (text, seed) => {
    assert.equal(hasher.hashText(text, seed), xxh64Ref(utf8.encode(text), seed));
  }));
  const small = new BlockHasher(createAndAttach({ prefixIndexKeys: 16, scratchSlots: 1, scratchBytes: 4096 }));
  assert.equal(small.hashText('é'.repeat(2048), 3n), xxh64Ref(utf8.encode('é'.repeat(2048)), 3n));
  assert.throws(() => small.hashText('é'.repeat(2049), 3n), /do not fit the 4096-byte scratch area/);
  // A character that would straddle the end of the area: encodeInto stops before it, and the text does not fit.
  assert.equal(small.hashText('x'.repeat(4092) + '😀', 5n), xxh64Ref(utf8.encode('x'.repeat(4092) + '😀'), 5n));
  assert.throws(() => small.hashText('x'.repeat(4094) + '😀', 5n), /do not fit the 4096-byte scratch area/);
});
