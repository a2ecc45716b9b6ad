import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createTokenizer, createTokenizerSync, TokenizeError, TOKENIZER_NAMES } from '../../src/tokenize/index.js';

test('unknown names are refused with the list of valid names', async () => {
  for (const name of ['gpt2', 'tiktoken:p50k_base', 'hf:', '']) {
    await assert.rejects(createTokenizer(name), (e: unknown) =>
      e instanceof TokenizeError && e.code === 'EAR_ERR_TOKENIZER_UNKNOWN' &&
      e.message.includes('character') && e.message.includes('tiktoken:o200k_base') && e.message.includes('hf:qwen3'));
  }
  assert.ok(TOKENIZER_NAMES.includes('tiktoken:cl100k_base'));
});

test('one instance per name per process', async () => {
  const a = await createTokenizer('character');
  assert.equal(createTokenizerSync('character'), a);
  assert.equal(a.name, 'character');
  const b = createTokenizerSync('character', { chatTemplate: 'llama3' });
  assert.notEqual(b, a);
  assert.equal(b.chatTemplate.name, 'llama3');
  assert.throws(() => createTokenizerSync('character', { chatTemplate: 'nope' }), /unknown chat template/);
});

test('a leading U+FEFF is text: every tokenizer decodes it back (a TextDecoder drops it as a byte-order mark by default)', () => {
  for (const spec of ['character', 'tiktoken:cl100k_base', 'hf:qwen3']) {
    const t = createTokenizerSync(spec);
    for (const s of ['\uFEFF', '\uFEFFhello', 'a\uFEFF']) assert.equal(t.decode(t.encode(s)), s, `${spec}: ${JSON.stringify(s)}`);
  }
});
