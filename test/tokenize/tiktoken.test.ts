import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTokenizerSync, TokenizeError } from '../../src/tokenize/index.js';

const o200k = createTokenizerSync('tiktoken:o200k_base');
const cl100k = createTokenizerSync('tiktoken:cl100k_base');

test('tiktoken: known ids', () => {
  assert.deepEqual(o200k.encode('hello world'), [24912, 2375]);
  assert.deepEqual(cl100k.encode('hello world'), [15339, 1917]);
  assert.deepEqual(o200k.encode('<|endoftext|>'), [199999]);
  assert.deepEqual(cl100k.encode('<|endoftext|>'), [100257]);
});

test('tiktoken: ChatML markers are single special ids (EAR\'s choice) and the chat round-trips', () => {
  for (const [tok, start, end] of [[o200k, 200264, 200265], [cl100k, 100264, 100265]] as const) {
    const prompt = tok.chatTemplate.render([{ role: 'user', content: 'hello world' }], { addGenerationPrompt: true });
    const ids = tok.encode(prompt, { addSpecialTokens: false });
    assert.equal(ids[0], start);
    assert.equal(ids.filter((x) => x === start).length, 2);
    assert.equal(ids.filter((x) => x === end).length, 1);
    assert.equal(tok.decode(ids), prompt);
    assert.deepEqual(tok.encode(prompt, { addSpecialTokens: true }), ids, 'no BOS in these encodings');
    assert.ok(tok.eosTokenIds.includes(end));
    assert.ok(tok.vocabSize > end);
  }
  assert.deepEqual(cl100k.eosTokenIds, [100257, 100265]);
});

test('tiktoken: decode(encode(s)) === s for any unicode text', () => {
  fc.assert(fc.property(fc.string({ unit: 'binary', maxLength: 200 }), (s) => {
    assert.equal(o200k.decode(o200k.encode(s)), s);
    assert.equal(cl100k.decode(cl100k.encode(s)), s);
  }), { numRuns: 300 });
});

test('tiktoken: out-of-range and unassigned ids are refused', () => {
  assert.throws(() => cl100k.decode([100277]), (e: unknown) => e instanceof TokenizeError && e.code === 'EAR_ERR_TOKEN_ID');
  assert.throws(() => cl100k.decode([100262]), (e: unknown) => e instanceof TokenizeError && e.code === 'EAR_ERR_TOKEN_ID');
  assert.equal(cl100k.decode([15339, 1917]), 'hello world', 'still usable after an error');
});
