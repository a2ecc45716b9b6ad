import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createRegion, Region } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import type { ChatMessage } from '../../src/tokenize/types.js';
import { computeFeatures, type FeatureContext } from '../../src/features/features.js';
import { SessionFeatures } from '../../src/features/session-features.js';

const region = new Region(createRegion({ prefixIndexKeys: 1 << 10, sessions: 16, heapJobs: 16, recordRingOps: 16, scratchSlots: 2 }));
const hasher = new BlockHasher(region);

const text = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'grapheme', maxLength: 60 }) },
  { weight: 1, arbitrary: fc.constantFrom('', '\n', '<|im_start|>', '<|im_end|>', 'fn f() {}\n'.repeat(8), 'é'.repeat(40)) }
);
const message: fc.Arbitrary<ChatMessage> = fc.oneof(
  { weight: 6, arbitrary: fc.record({ role: fc.constantFrom('user', 'assistant', 'tool'), content: text }) },
  { weight: 1, arbitrary: fc.record({ role: fc.constant('assistant'), content: text, reasoning: text }) },
  { weight: 1, arbitrary: fc.record({ role: fc.constant('user'), content: fc.constantFrom('<tool_response>\nx\n</tool_response>', '<think>a</think>b') }) },
  { weight: 1, arbitrary: fc.record({ role: fc.constant('assistant'), content: fc.constant(null), tool_calls: fc.constant([{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{"p": 1}' } }]) }) }
) as fc.Arbitrary<ChatMessage>;
const TOOLS = [{ type: 'function', function: { name: 'read', description: 'Reads a file', parameters: { type: 'object' } } }];
// A session: turns that append messages; now and then one that truncates history, edits an earlier message,
// changes the system prompt, adds or drops tools, changes the salt, the model, template kwargs or how the body
// is written (indentation, field order, client kv_transfer_params).
const conversation = fc.record({
  system: text,
  blockSize: fc.constantFrom(1, 4, 16),
  turns: fc.array(fc.record({
    add: fc.array(message, { minLength: 1, maxLength: 3 }),
    change: fc.constantFrom('append', 'append', 'append', 'truncate', 'edit', 'system'),
    at: fc.nat(),
    salt: fc.constantFrom(undefined, undefined, undefined, 'tenant-a'),
    model: fc.constantFrom('m', 'm', 'm', 'm2'),
    gen: fc.boolean(),
    tools: fc.constantFrom(undefined, undefined, undefined, [], TOOLS),
    kwargs: fc.constantFrom(undefined, undefined, { enable_thinking: false }),
    indent: fc.constantFrom(undefined, undefined, 1),
    kv: fc.constantFrom(undefined, undefined, undefined, { do_remote_prefill: true }),
    modelLast: fc.boolean()
  }), { minLength: 1, maxLength: 6 })
});

function check (tokenizer: string, runs: number, bounds: { maxSessions?: number; maxKeyBytes?: number; maxChatBytes?: number } = {}): void {
  const tok = createTokenizerSync(tokenizer);
  fc.assert(fc.property(conversation, fc.constantFrom('s1', 's2'), ({ system, blockSize, turns }, other) => {
    const sessions = new SessionFeatures(tok, { maxSessions: bounds.maxSessions ?? 4, maxKeyBytes: bounds.maxKeyBytes, maxChatBytes: bounds.maxChatBytes });
    const warm: FeatureContext = { tokenizer: tok, hasher, blockSize, sessions };
    const cold: FeatureContext = { tokenizer: tok, hasher, blockSize };
    let messages: ChatMessage[] = [{ role: 'system', content: system }];
    for (const t of turns) {
      if (t.change === 'truncate' && messages.length > 2) messages = [...messages.slice(0, 1 + (t.at % (messages.length - 1))), ...t.add];
      else if (t.change === 'edit' && messages.length > 1) {
        const i = 1 + (t.at % (messages.length - 1));
        messages = [...messages.slice(0, i), { ...messages[i], content: `${String(messages[i].content)} (edited)` }, ...messages.slice(i + 1), ...t.add];
      } else if (t.change === 'system') messages = [{ role: 'system', content: `${system} v${t.at % 3}` }, ...messages.slice(1), ...t.add];
      else messages = [...messages, ...t.add];
      const fields = { cache_salt: t.salt, add_generation_prompt: t.gen, tools: t.tools, chat_template_kwargs: t.kwargs, kv_transfer_params: t.kv };
      const doc = t.modelLast ? { messages, ...fields, model: t.model } : { model: t.model, ...fields, messages };
      const body = Buffer.from(JSON.stringify(doc, null, t.indent));
      const a = computeFeatures(warm, 'chat', body, 's1');
      // Another session in between, so LRU bounds are exercised.
      computeFeatures(warm, 'chat', Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: system }] })), other);
      const b = computeFeatures(cold, 'chat', body);
      assert.deepEqual(a, b);
    }
  }), { numRuns: runs, seed: 20261122 });
}

test('incremental features (token count and block keys) equal a cold computation: character', () => check('character', 150));
test('... tiktoken:o200k_base', () => check('tiktoken:o200k_base', 80));
test('... hf:qwen3 (its template re-renders earlier assistant turns)', () => check('hf:qwen3', 40));
test('... under tight bounds (one session, tiny key budget), where state is evicted between turns', () => check('character', 80, { maxSessions: 1, maxKeyBytes: 64 }));
test('... with a chat-state budget that holds some bodies and not others', () => check('character', 80, { maxChatBytes: 600 }));

test('an appended turn reuses the previous keys and hashes only the new blocks; forget drops the state', () => {
  const tok = createTokenizerSync('character');
  const sessions = new SessionFeatures(tok);
  const ctx: FeatureContext = { tokenizer: tok, hasher, blockSize: 16, sessions };
  const history: ChatMessage[] = [{ role: 'system', content: 'x'.repeat(4000) }, { role: 'user', content: 'first' }];
  const body = (m: ChatMessage[]) => Buffer.from(JSON.stringify({ model: 'm', messages: m }));
  const first = computeFeatures(ctx, 'chat', body(history), 's');
  const s1 = sessions.stats();
  assert.equal(s1.reusedBlocks, 0);
  assert.equal(s1.hashedBlocks, first.blockKeys.length);
  const next = [...history, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'y'.repeat(320) }];
  const second = computeFeatures(ctx, 'chat', body(next), 's');
  const s2 = sessions.stats();
  const newBlocks = s2.hashedBlocks - s1.hashedBlocks;
  assert.ok(s2.reusedBlocks >= first.blockKeys.length - 2, `reused ${s2.reusedBlocks} of ${first.blockKeys.length}`);
  assert.equal(s2.reusedBlocks + newBlocks, second.blockKeys.length);
  assert.ok(newBlocks <= 25, `hashed ${newBlocks} blocks for ~340 new tokens`);
  assert.ok(s2.reusedTokens > 4000 && s2.encodedTokens - s1.encodedTokens < 400);
  // The second turn reused the first's two parsed messages and rendered and encoded only from the third on.
  assert.deepEqual([s2.reusedMessages, s2.parsedMessages, s2.suffixTurns], [2, 4, 1]);
  sessions.forget('s');
  assert.equal(sessions.stats().sessions, 0);
  computeFeatures(ctx, 'chat', body(next), 's');
  assert.equal(sessions.stats().reusedBlocks, s2.reusedBlocks);
});

test('a session idle past idleMs is forgotten at the next turn of any session; the session bound holds', () => {
  const tok = createTokenizerSync('character');
  let now = 0;
  const sessions = new SessionFeatures(tok, { idleMs: 1000, maxSessions: 3, now: () => now });
  const ctx: FeatureContext = { tokenizer: tok, hasher, blockSize: 16, sessions };
  const body = (s: string) => Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: s.repeat(100) }] }));
  computeFeatures(ctx, 'chat', body('a'), 'a');
  now = 500;
  computeFeatures(ctx, 'chat', body('b'), 'b');
  now = 1200; // a is idle for 1200 ms, b for 700 ms
  computeFeatures(ctx, 'chat', body('c'), 'c');
  assert.deepEqual([sessions.stats().sessions, sessions.stats().expired], [2, 1]);
  computeFeatures(ctx, 'chat', body('d'), 'd');
  computeFeatures(ctx, 'chat', body('e'), 'e');
  assert.equal(sessions.stats().sessions, 3);
  assert.equal(sessions.stats().expired, 1);
});
