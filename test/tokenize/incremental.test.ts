import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import { commonPrefixLength, IncrementalTokenizer } from '../../src/tokenize/incremental.js';
import type { ChatMessage, Tokenizer } from '../../src/tokenize/types.js';

const text = fc.oneof(
  { weight: 4, arbitrary: fc.string({ unit: 'binary', maxLength: 30 }) },
  { weight: 1, arbitrary: fc.constantFrom('', ' ', '\n', '<|im_start|>', '<|im_end|>', '<think>\nhm\n</think>\n\nok', 'e\u0301', '<tool_response>x</tool_response>') }
);
const message: fc.Arbitrary<ChatMessage> = fc.oneof(
  fc.record({ role: fc.constant('user'), content: text }),
  fc.record({ role: fc.constant('assistant'), content: text }),
  fc.record({ role: fc.constant('assistant'), content: text, reasoning: text }),
  fc.record({ role: fc.constant('tool'), content: text }),
  fc.record({
    role: fc.constant('assistant'),
    content: fc.constant(null),
    tool_calls: fc.array(fc.record({ type: fc.constant('function'), function: fc.record({ name: fc.constantFrom('f', 'read'), arguments: fc.constantFrom('{"a": 1}', '{"p": "é"}') }) }), { minLength: 1, maxLength: 2 })
  })
);
// A session: a first turn, then turns that append messages; now and then a turn that edits history instead.
const session = fc.record({
  system: fc.option(text, { nil: undefined }),
  turns: fc.array(fc.record({ add: fc.array(message, { minLength: 1, maxLength: 3 }), rewrite: fc.boolean(), gen: fc.boolean() }), { minLength: 1, maxLength: 5 })
});

function checkSessions (tok: Tokenizer, runs: number): void {
  fc.assert(fc.property(session, ({ system, turns }) => {
    const inc = new IncrementalTokenizer(tok, { maxSessions: 2 });
    let messages: ChatMessage[] = system === undefined ? [] : [{ role: 'system', content: system }];
    for (const t of turns) {
      messages = t.rewrite && messages.length > 1 ? [...messages.slice(0, 1), ...t.add] : [...messages, ...t.add];
      if (messages[0].role !== 'user' && messages[0].role !== 'system') messages = [{ role: 'user', content: 'q' }, ...messages];
      const r = inc.encodeChat('s', messages, { addGenerationPrompt: t.gen });
      assert.deepEqual(Array.from(r.ids), tok.encode(r.text, { addSpecialTokens: false }));
    }
  }), { numRuns: runs });
}

test('incremental equals full tokenization over random conversations: character (ChatML)', () => checkSessions(createTokenizerSync('character'), 300));
test('incremental equals full tokenization over random conversations: tiktoken:o200k_base (ChatML)', () => checkSessions(createTokenizerSync('tiktoken:o200k_base'), 150));
test('incremental equals full tokenization over random conversations: hf:qwen3 (Qwen3 template)', () => checkSessions(createTokenizerSync('hf:qwen3'), 100));

test('a growing session re-encodes only the new turn', () => {
  const tok = createTokenizerSync('hf:qwen3');
  const inc = new IncrementalTokenizer(tok);
  assert.deepEqual(inc.markers, ['<|im_start|>'], 'Llama\'s header marker is not one Qwen token');
  const msgs: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent. '.repeat(200) }, { role: 'user', content: 'Fix the bug.' }];
  const first = inc.encodeChat('a', msgs, { addGenerationPrompt: true });
  assert.equal(first.reusedTokens, 0);
  msgs.push({ role: 'assistant', content: 'Reading.', tool_calls: [{ type: 'function', function: { name: 'read', arguments: '{"path": "a.ts"}' } }] });
  msgs.push({ role: 'tool', content: 'export const a = 1;' });
  const second = inc.encodeChat('a', msgs, { addGenerationPrompt: true });
  assert.deepEqual(Array.from(second.ids), tok.encode(second.text, { addSpecialTokens: false }));
  // Everything up to the generation prompt's <|im_start|> of the first turn is reused.
  const lastStart = first.text.lastIndexOf('<|im_start|>');
  assert.equal(second.reusedTokens, tok.encode(first.text.slice(0, lastStart)).length);
  assert.ok(second.reusedTokens > 1000);
  const same = inc.encodeChat('a', msgs, { addGenerationPrompt: true });
  assert.equal(same.reusedTokens, same.ids.length);
  const s = inc.stats();
  assert.equal(s.turns, 3);
  assert.equal(s.sessions, 1);
  assert.equal(s.encodedTokens + s.reusedTokens, first.ids.length + second.ids.length + same.ids.length);
});

test('sessions are bounded by count and bytes, least recently used first', () => {
  const tok = createTokenizerSync('character');
  const inc = new IncrementalTokenizer(tok, { maxSessions: 2, maxBytes: 10_000 });
  inc.encodeText('a', '<|im_start|>aaa');
  inc.encodeText('b', '<|im_start|>bbb');
  inc.encodeText('a', '<|im_start|>aaa<|im_start|>more'); // a is now the most recent
  inc.encodeText('c', '<|im_start|>ccc'); // evicts b
  assert.equal(inc.stats().sessions, 2);
  assert.equal(inc.stats().evictions, 1);
  assert.equal(inc.encodeText('b', '<|im_start|>bbb<|im_start|>x').reusedTokens, 0, 'b was evicted');
  assert.ok(inc.encodeText('c', '<|im_start|>ccc<|im_start|>y').reusedTokens > 0, 'c is still there');
  const big = '<|im_start|>' + 'z'.repeat(6000);
  inc.encodeText('big', big);
  assert.equal(inc.stats().oversized, 1, 'a prompt over maxBytes alone is not stored');
  assert.ok(inc.stats().bytes <= 10_000);
  inc.forget('c');
  assert.equal(inc.encodeText('c', '<|im_start|>ccc<|im_start|>y').reusedTokens, 0);
  assert.throws(() => new IncrementalTokenizer(tok, { maxSessions: 0 }), RangeError);
});

test('commonPrefixLength', () => {
  fc.assert(fc.property(fc.string({ maxLength: 300 }), fc.string({ maxLength: 300 }), fc.string({ maxLength: 5 }), (p, a, b) => {
    const x = p + a;
    const y = p + b;
    let n = 0;
    while (n < x.length && n < y.length && x[n] === y[n]) n++;
    assert.equal(commonPrefixLength(x, y), n);
  }));
  const long = 'q'.repeat(200_000);
  assert.equal(commonPrefixLength(long + 'a', long + 'b'), 200_000);
});

// encodeSuffix: each turn keeps the previous prompt up to any offset and appends any tail (markers included).
const piece = fc.oneof(text, fc.constantFrom('<|im_start|>user\n', '<|im_start|>assistant\n', '<|im_end|>\n', '<|start_header_id|>', '<|im_start|>'));
const suffixTurns = fc.array(fc.record({ cut: fc.double({ min: 0, max: 1, noNaN: true }), tail: fc.array(piece, { maxLength: 5 }).map((xs) => xs.join('')), full: fc.boolean() }), { minLength: 1, maxLength: 8 });

function checkSuffix (tok: Tokenizer, runs: number): void {
  fc.assert(fc.property(fc.array(piece, { maxLength: 5 }).map((xs) => xs.join('')), suffixTurns, (first, turns) => {
    const inc = new IncrementalTokenizer(tok, { maxSessions: 2 });
    let prev = first;
    let turn = inc.encodeText('s', first).turn;
    for (const t of turns) {
      const at = Math.floor(t.cut * prev.length);
      const next = prev.slice(0, at) + t.tail;
      // Now and then a full-text turn in between, so both kinds of state follow one another.
      const r = t.full ? inc.encodeText('s', next) : inc.encodeSuffix('s', turn, at, t.tail);
      assert.ok(r !== null);
      assert.deepEqual(Array.from(r.ids), tok.encode(next, { addSpecialTokens: false }));
      assert.equal(inc.encodeSuffix('s', turn, at, t.tail), null, 'a stale turn is refused');
      turn = r.turn;
      prev = next;
    }
  }), { numRuns: runs });
}

test('encodeSuffix equals full tokenization for any kept offset and tail: character', () => checkSuffix(createTokenizerSync('character'), 300));
test('... tiktoken:o200k_base', () => checkSuffix(createTokenizerSync('tiktoken:o200k_base'), 150));
test('... hf:qwen3', () => checkSuffix(createTokenizerSync('hf:qwen3'), 100));

test('encodeSuffix after a message boundary reuses every token before it', () => {
  const tok = createTokenizerSync('tiktoken:o200k_base');
  const inc = new IncrementalTokenizer(tok);
  const head = '<|im_start|>system\nYou are a coding agent.<|im_end|>\n<|im_start|>user\nFix it.<|im_end|>\n';
  const first = inc.encodeText('a', head + '<|im_start|>assistant\n');
  const r = inc.encodeSuffix('a', first.turn, head.length, '<|im_start|>assistant\nDone.<|im_end|>\n<|im_start|>assistant\n');
  assert.ok(r !== null);
  assert.equal(r.reusedTokens, tok.encode(head).length);
  assert.equal(inc.encodeSuffix('b', 0, 0, 'x'), null, 'no state for the session');
});

test('a long session of encodeSuffix turns (its text parts get joined) still equals full tokenization', () => {
  const tok = createTokenizerSync('character');
  const inc = new IncrementalTokenizer(tok);
  let text = '<|im_start|>system\nS<|im_end|>\n';
  let turn = inc.encodeText('s', text).turn;
  for (let i = 0; i < 150; i++) {
    const at = i % 7 === 0 ? text.length - 3 : text.length;
    const tail = `<|im_start|>user\nq${i}<|im_end|>\n`;
    const r = inc.encodeSuffix('s', turn, at, tail)!;
    text = text.slice(0, at) + tail;
    assert.deepEqual(Array.from(r.ids), tok.encode(text, { addSpecialTokens: false }));
    turn = r.turn;
  }
  assert.equal(inc.encodeText('s', text).reusedTokens, tok.encode(text).length, 'the joined text is the prompt');
});
