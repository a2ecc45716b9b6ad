import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTokenizerSync, TokenizeError } from '../../src/tokenize/index.js';

const tok = createTokenizerSync('character');

test('character: UTF-8 bytes, ChatML markers as ids 256..258', () => {
  assert.deepEqual(tok.encode('aé€😀'), [0x61, 0xc3, 0xa9, 0xe2, 0x82, 0xac, 0xf0, 0x9f, 0x98, 0x80]);
  assert.deepEqual(tok.encode('<|im_start|>u\n<|im_end|><|endoftext|>'), [256, 117, 10, 257, 258]);
  assert.deepEqual(tok.encode('<|im_start'), [...Buffer.from('<|im_start')], 'an incomplete marker is plain text');
  assert.equal(tok.vocabSize, 259);
  assert.deepEqual(tok.eosTokenIds, [257, 258]);
  assert.deepEqual(tok.encode(''), []);
  assert.equal(tok.decode([]), '');
});

test('character: rendered chat round-trips', () => {
  const prompt = tok.chatTemplate.render([{ role: 'system', content: 'S' }, { role: 'user', content: 'héllo' }], { addGenerationPrompt: true });
  assert.equal(prompt, '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhéllo<|im_end|>\n<|im_start|>assistant\n');
  const ids = tok.encode(prompt);
  assert.equal(ids.filter((id) => id === 256).length, 3);
  assert.equal(tok.decode(ids), prompt);
});

test('character: decode(encode(s)) === s for any unicode text with markers mixed in', () => {
  const piece = fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom('<|im_start|>', '<|im_end|>', '<|endoftext|>', '<|', '\n'));
  fc.assert(fc.property(fc.array(piece, { maxLength: 12 }), (parts) => {
    const s = parts.join('');
    assert.equal(tok.decode(tok.encode(s)), s);
  }), { numRuns: 500 });
});

test('character: encodeIds gives encode\'s ids in a Uint32Array, for any text with markers mixed in', () => {
  const piece = fc.oneof(fc.string({ unit: 'binary' }), fc.constantFrom('<|im_start|>', '<|im_end|>', '<|endoftext|>', '<|', '\n'));
  fc.assert(fc.property(fc.array(piece, { maxLength: 12 }), (parts) => {
    const s = parts.join('');
    const ids = tok.encodeIds!(s);
    assert.ok(ids instanceof Uint32Array);
    assert.deepEqual(Array.from(ids), tok.encode(s));
  }), { numRuns: 500 });
});

test('character: ids outside the vocabulary are refused', () => {
  for (const bad of [[259], [-1], [1.5], [Number.NaN]]) {
    assert.throws(() => tok.decode(bad), (e: unknown) => e instanceof TokenizeError && e.code === 'EAR_ERR_TOKEN_ID');
  }
});
