import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { BlockHasher, digestToU64, blockExtraKeys } from '../../src/sim/block-hash.js';
import { range } from './helpers.js';

test('sha256_cbor matches the vllm-wire.md §2 vectors (PYTHONHASHSEED="0", 16-token blocks)', () => {
  const h = new BlockHasher(16, '0');
  assert.equal(h.noneHash.toString('hex'), '4e1195df020de59e0d65a33a4279f1183e7ae4e5d980e309f8b55adff2e61c3e');
  const d = h.extend([], range(1, 32), null, null);
  assert.equal(d.length, 2);
  assert.ok(d[0].toString('hex').startsWith('202da172') && d[0].toString('hex').endsWith('d332ea'));
  assert.equal(digestToU64(d[0]), 3236607068019569386n);
  assert.equal(digestToU64(d[1]), 2758186210834249151n);
  const salted = h.hashBlock(null, range(1, 16), 0, blockExtraKeys(0, null, 'tenant-a'));
  assert.equal(digestToU64(salted), 10934782661253773923n);
});

test('the hashed CBOR is the canonical encoding of (parent, tuple(tokens), extras)', () => {
  // Large token ids take the 1-, 2- and 4-byte argument forms; extras are an array of text strings.
  const h = new BlockHasher(4, 'seed');
  const tokens = [5, 200, 70000, 23];
  const parent = Buffer.alloc(32, 7);
  const cbor = Buffer.concat([
    Buffer.from([0x83, 0x58, 0x20]), parent,
    Buffer.from([0x84, 0x05, 0x18, 200, 0x1a, 0x00, 0x01, 0x11, 0x70, 0x17]),
    Buffer.from([0x82, 0x64]), Buffer.from('lora'), Buffer.from([0x61]), Buffer.from('s')
  ]);
  assert.deepEqual(h.hashBlock(parent, tokens, 0, ['lora', 's']), createHash('sha256').update(cbor).digest());
  const none = Buffer.concat([Buffer.from([0x83, 0x58, 0x20]), parent, Buffer.from([0x84, 0x05, 0x18, 200, 0x1a, 0x00, 0x01, 0x11, 0x70, 0x17, 0xf6])]);
  assert.deepEqual(h.hashBlock(parent, tokens, 0, null), createHash('sha256').update(none).digest());
  assert.deepEqual(h.noneHash, createHash('sha256').update(Buffer.from([0x64, ...Buffer.from('seed')])).digest());
});

test('extend reuses given digests, hashes only full blocks, and rejects bad tokens', () => {
  const h = new BlockHasher(16);
  const all = h.extend([], range(1, 50), 'l', 'salt');
  assert.equal(all.length, 3);
  const part = h.extend(all.slice(0, 1), range(1, 50), 'l', 'salt');
  assert.deepEqual(part, all);
  assert.equal(h.extend([], range(1, 50), 'l', 'salt', 2).length, 2);
  // The salt changes block 0 directly and every later block through the chain.
  const unsalted = h.extend([], range(1, 50), 'l', null);
  assert.notDeepEqual(unsalted[2], all[2]);
  assert.throws(() => h.hashBlock(null, [-1, ...range(1, 15)], 0, null), /non-negative/);
  assert.throws(() => h.hashBlock(null, range(1, 8), 0, null), /full blocks/);
});
