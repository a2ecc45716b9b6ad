// A tokenizer frozen on one thread (freezeTokenizer: its tables on SharedArrayBuffers) and thawed on another
// (thawTokenizer) encodes, renders and decodes exactly as the one built from its files, without a copy of the tables.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import { createChatTemplate, createTokenizerSync, freezeTokenizer, type FrozenTokenizer, type Tokenizer } from '../../src/tokenize/index.js';
import { TiktokenTokenizer } from '../../src/tokenize/tiktoken.js';
import { HfTokenizer, qwen3Files } from '../../src/tokenize/hf.js';
import { PieceTable } from '../../src/tokenize/piece-table.js';

const REGISTRY = new URL('../../src/tokenize/index.js', import.meta.url).href;
const TEXT = 'The router\'s cache holds 1,024 sessions — 每个会话 ~33.6k tokens 🚀\n```ts\nconst x = { "a": [1, 2] };\n```\n' +
  '<|im_start|>user\nhi<|im_end|>   \t\n\n!!!!!!!!  naïve café';
const CHAT = [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: TEXT }];

interface Seen { ids: number[]; decoded: string; chatIds: number[]; vocabSize: number; eos: number[] }

/** What a fresh thread that thaws `frozen` computes (its own registry: nothing built there before). */
function onAnotherThread (frozen: FrozenTokenizer): Promise<Seen> {
  const code = `const { parentPort, workerData } = require('node:worker_threads');
import(${JSON.stringify(REGISTRY)}).then((m) => {
  m.thawTokenizer(workerData.frozen);
  const t = m.createTokenizerSync(workerData.frozen.name);
  const ids = t.encode(workerData.text);
  const chat = t.chatTemplate.render(workerData.chat, { addGenerationPrompt: true });
  parentPort.postMessage({ ids, decoded: t.decode(ids), chatIds: t.encode(chat), vocabSize: t.vocabSize, eos: [...t.eosTokenIds] });
});`;
  return new Promise((resolve, reject) => {
    const w = new Worker(code, { eval: true, workerData: { frozen, text: TEXT, chat: CHAT } });
    w.once('message', (m: Seen) => { resolve(m); void w.terminate(); });
    w.once('error', reject);
  });
}

for (const name of ['tiktoken:o200k_base', 'hf:qwen3']) {
  test(`${name} frozen here and thawed on another thread: the same ids, text and chat, over shared tables`, async () => {
    const f = freezeTokenizer(name);
    assert.ok(f !== null);
    assert.equal(freezeTokenizer(name), f, 'frozen once per name');
    const bpe = f.kind === 'tiktoken' ? f.bpe : f.hf.fast.bpe;
    for (const a of [bpe.table, bpe.byteToken, bpe.twoByte, bpe.bytes, bpe.offsets, bpe.whole.slots, bpe.whole.chars]) {
      assert.ok(a.buffer instanceof SharedArrayBuffer, 'every table is on shared memory');
    }
    // The tokenizer as built from its files (the registry's is thawed from the frozen tables once they exist).
    const here: Tokenizer = f.kind === 'tiktoken' ? new TiktokenTokenizer(f.encoding, createChatTemplate('chatml')) : new HfTokenizer(name, qwen3Files());
    const ids = here.encode(TEXT);
    assert.deepEqual(createTokenizerSync(name).encode(TEXT), ids, 'this thread\'s own, thawed too');
    const there = await onAnotherThread(f);
    assert.deepEqual(there.ids, ids);
    assert.equal(there.decoded, here.decode(ids));
    assert.deepEqual(there.chatIds, here.encode(here.chatTemplate.render(CHAT, { addGenerationPrompt: true })));
    assert.equal(there.vocabSize, here.vocabSize);
    assert.deepEqual(there.eos, [...here.eosTokenIds]);
  });
}

test('nothing is frozen where nothing is worth sharing: character, remote:', () => {
  assert.equal(freezeTokenizer('character'), null);
  assert.equal(freezeTokenizer('remote:http://127.0.0.1:9'), null);
});

test('a frozen piece table is read-only: set() refuses, clear() throws', () => {
  const t = new PieceTable(8);
  assert.ok(t.set('abc', 0, 3, 7));
  const thawed = PieceTable.thaw(t.freeze());
  assert.equal(thawed.get('xabcx', 1, 4), 7);
  assert.equal(thawed.set('def', 0, 3, 1), false);
  assert.equal(t.set('def', 0, 3, 1), false, 'nor the original, once frozen');
  assert.throws(() => thawed.clear(), /frozen/);
});
