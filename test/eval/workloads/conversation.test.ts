import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { claudeCode } from '../../../src/eval/workloads/claude-code.js';
import { SessionPrompt, TOKEN_MIN, TOKEN_SPAN } from '../../../src/eval/workloads/prompt-builder.js';
import { allSessions } from '../../../src/eval/workloads/types.js';
import { Conversation, type ConversationTurn } from '../../../src/eval/workloads/conversation.js';
import { TokenText } from '../../../src/eval/workloads/token-text.js';
import { textRequest, type TextApi } from '../../../src/eval/drivers/api-requests.js';
import { anthropicToChat } from '../../../src/dialects/anthropic-request.js';
import { responsesToChat } from '../../../src/dialects/responses-request.js';
import { createTokenizer } from '../../../src/tokenize/index.js';
import type { ChatMessage, Tokenizer } from '../../../src/tokenize/types.js';
import { CLAUDE_CODE_DIR } from '../traces.js';

/** A decoder whose text shows the ids: `<id>` per token. */
const marks = new TokenText({ decode: (ids) => Array.from(ids, (i) => `<${i}>`).join('') });

test('token text: an id decodes once to the tokenizer\'s text, a range to the concatenation, ids outside the workload\'s are refused', async () => {
  let calls = 0;
  const t = new TokenText({ decode: (ids) => { calls++; return `[${Array.from(ids).join(',')}]`; } });
  assert.equal(t.text(Uint32Array.from([1000, 1001, 1000]), 0, 3), '[1000][1001][1000]');
  assert.equal(calls, 2, 'each id decoded once');
  assert.equal(t.text(Uint32Array.from([1000, 1001, 1002]), 1), '[1001][1002]');
  assert.throws(() => t.of(TOKEN_MIN - 1), /outside the workload's ids/);
  assert.throws(() => t.of(TOKEN_MIN + TOKEN_SPAN), /outside the workload's ids/);
  assert.throws(() => t.text(Uint32Array.from([1000]), 0, 2), /outside 1 tokens/);
  // With the engines' tokenizer: a prefix of the ids gives a prefix of the text, even through multi-byte characters.
  const qwen = new TokenText(await createTokenizer('hf:qwen3'));
  const ids = Uint32Array.from({ length: 3000 }, (_, i) => TOKEN_MIN + ((i * 7919) % TOKEN_SPAN));
  const whole = qwen.text(ids);
  for (const cut of [1, 17, 999, 2999]) assert.ok(whole.startsWith(qwen.text(ids, 0, cut)), `cut ${cut}`);
});

interface Step { keep: number; add: number; cut: number; out: number; answered: boolean }

test('property: a conversation alternates user/assistant from a user message to one, covers its prompt contiguously, and a turn that keeps every full block extends the previous one', () => {
  const bs = 4;
  const shared = new Set([0, 1]);
  fc.assert(fc.property(fc.array(fc.record({
    keep: fc.integer({ min: 0, max: 12 }), add: fc.integer({ min: 1, max: 6 }), cut: fc.integer({ min: 0, max: 3 }),
    out: fc.integer({ min: 1, max: 9 }), answered: fc.boolean()
  }), { minLength: 1, maxLength: 12 }), (steps: Step[]) => {
    const sp = new SessionPrompt(3, bs);
    const c = new Conversation(marks, bs, shared);
    let next = 100;
    let prev: ConversationTurn | null = null;
    let prevLen = 0;
    for (const [k, s] of steps.entries()) {
      // The first prompt starts with the shared blocks; later ones keep some of the previous prompt's blocks.
      const keep = k === 0 ? 0 : Math.min(s.keep, sp.blocks.length);
      const newBlocks = [...(k === 0 ? [0, 1] : []), ...Array.from({ length: s.add }, () => next++)];
      const total = keep + newBlocks.length;
      const promptTokens = total * bs - Math.min(s.cut, bs - 1);
      const { tokens, blocks } = sp.advance({ keepBlocks: keep, newBlocks: Uint32Array.from(newBlocks), promptTokens });
      const turn = c.advance(tokens, blocks, keep, s.out);
      assert.equal(turn.turn, k);
      const m = turn.messages;
      assert.ok(m.length > 0 && m[0].role === 'user' && m[m.length - 1].role === 'user');
      for (let i = 1; i < m.length; i++) assert.notEqual(m[i].role, m[i - 1].role);
      for (const x of m) assert.ok(x.text !== '', 'no empty message');
      // Positions: the system prompt (if any) from 0, then each message where the previous one ended, to the prompt's end.
      const segs = turn.system === null ? m : [{ start: 0, end: m[0].start }, ...m];
      assert.equal(segs[0].start, 0);
      for (let i = 1; i < segs.length; i++) assert.equal(segs[i].start, segs[i - 1].end);
      assert.equal(segs[segs.length - 1].end, tokens.length);
      if (prev !== null && keep * bs >= Math.floor(prevLen / bs) * bs && tokens.length > prevLen + 1) {
        assert.equal(turn.system, prev.system);
        assert.deepEqual(m.slice(0, prev.messages.length), prev.messages, 'the previous conversation is kept as it was');
        assert.equal(m.length, prev.messages.length + 2);
      }
      if (s.answered) c.answered(k, `answer ${k}`);
      c.answered(k - 1, 'too late: ignored');
      prev = turn;
      prevLen = tokens.length;
    }
  }), { numRuns: 300 });
});

test('the answer streamed for a turn is the next turn\'s assistant message; without one, the workload\'s tokens of the recorded output length stand in', () => {
  const bs = 4;
  const sp = new SessionPrompt(1, bs);
  const c = new Conversation(marks, bs, new Set([0]));
  let p = sp.advance({ keepBlocks: 0, newBlocks: Uint32Array.from([0, 1, 2]), promptTokens: 10 });
  const t0 = c.advance(p.tokens, p.blocks, 0, 3);
  assert.equal(t0.system, marks.text(p.tokens, 0, 4), 'the shared leading block is the system prompt');
  assert.deepEqual(t0.messages.map((x) => [x.role, x.start, x.end]), [['user', 4, 10]]);
  c.answered(0, 'the answer');
  // Keeps both full blocks (the cut third one is re-hashed by the trace): an extension.
  p = sp.advance({ keepBlocks: 2, newBlocks: Uint32Array.from([3, 4, 5]), promptTokens: 20 });
  const t1 = c.advance(p.tokens, p.blocks, 2, 5);
  assert.deepEqual(t1.messages.map((x) => [x.role, x.start, x.end]), [['user', 4, 10], ['assistant', 10, 13], ['user', 13, 20]]);
  assert.equal(t1.messages[1].text, 'the answer');
  assert.equal(t1.messages[2].text, marks.text(p.tokens, 13, 20));
  p = sp.advance({ keepBlocks: 5, newBlocks: Uint32Array.from([6, 7]), promptTokens: 28 });
  const t2 = c.advance(p.tokens, p.blocks, 5, 2);
  assert.equal(t2.messages[3].text, marks.text(p.tokens, 20, 25), 'no answer: a placeholder of 5 recorded output tokens');
  // A divergence inside the second user message: the messages before it stay, the rest is one user message.
  p = sp.advance({ keepBlocks: 4, newBlocks: Uint32Array.from([8, 9]), promptTokens: 22 });
  const t3 = c.advance(p.tokens, p.blocks, 4, 2);
  assert.deepEqual(t3.messages.map((x) => [x.role, x.start, x.end]), [['user', 4, 10], ['assistant', 10, 13], ['user', 13, 22]]);
  assert.equal(t3.messages[2].text, marks.text(p.tokens, 13, 22));
  assert.ok(t3.messages[2].text.startsWith(marks.text(p.tokens, 13, 16)) && t2.messages[2].text.startsWith(marks.text(p.tokens, 13, 16)), 'the reopened message goes on from the kept tokens');
  // A divergence inside the first assistant message: the user message before it is reopened.
  p = sp.advance({ keepBlocks: 3, newBlocks: Uint32Array.from([12]), promptTokens: 15 });
  const t3b = c.advance(p.tokens, p.blocks, 3, 2);
  assert.deepEqual(t3b.messages.map((x) => [x.role, x.start, x.end]), [['user', 4, 15]]);
  // Keeping less than the system prompt starts over.
  p = sp.advance({ keepBlocks: 0, newBlocks: Uint32Array.from([10, 11]), promptTokens: 8 });
  const t4 = c.advance(p.tokens, p.blocks, 0, 2);
  assert.equal(t4.system, null);
  assert.deepEqual(t4.messages.map((x) => [x.role, x.start, x.end]), [['user', 0, 8]]);
});

/** The prompt text the engine renders for a request body, through the dialect vLLM converts it with. */
function rendered (tk: Tokenizer, api: TextApi, body: string): string {
  const doc = JSON.parse(body);
  let messages: ChatMessage[];
  if (api === 'messages') messages = anthropicToChat(doc).messages;
  else if (api === 'responses') messages = responsesToChat(doc).messages;
  else messages = doc.messages;
  return tk.chatTemplate.render(messages, { addGenerationPrompt: true });
}

test('over every text API, each extending turn of the claude-code traces renders (Qwen3 template) to a prompt that extends the previous turn\'s', async () => {
  const tk = await createTokenizer('hf:qwen3');
  const text = new TokenText(tk);
  const w = claudeCode(CLAUDE_CODE_DIR, { seed: 2 });
  const systems = new Map<string, string | null>();
  for (const api of ['messages', 'responses', 'chat'] as const) {
    let extending = 0;
    for (const s of allSessions(w.sessions)) {
      const sp = new SessionPrompt(w.seed, w.blockSize);
      const c = new Conversation(text, w.blockSize, w.sharedPrefixBlocks);
      let before: string | null = null;
      let prevLen = 0;
      for (const [k, turn] of s.turns.entries()) {
        const { tokens, blocks } = sp.advance(turn);
        const conv = c.advance(tokens, blocks, turn.keepBlocks, turn.outputTokens);
        if (k === 0 && s.parentId === null) systems.set(`${api}:${s.id}`, conv.system);
        const req = textRequest(api, { model: 'm', conversation: conv, maxTokens: turn.outputTokens, sessionId: s.id, rootSessionId: s.id, parentId: null });
        const now = rendered(tk, api, req.body);
        const extends_ = turn.keepBlocks * w.blockSize >= Math.floor(prevLen / w.blockSize) * w.blockSize && tokens.length > prevLen + 1;
        if (before !== null && extends_) {
          extending++;
          assert.ok(now.startsWith(before), `${api} ${s.id} turn ${k} does not extend turn ${k - 1}`);
        }
        // Every other turn gets its answer back, the others a placeholder: both keep the prefix.
        if (k % 2 === 0) c.answered(k, ' the cache block engine.');
        before = now;
        prevLen = tokens.length;
      }
    }
    assert.ok(extending >= 40, `${api}: ${extending} extending turns checked`);
  }
  // The main agents of two traces share their system + tool prompt (as far as each file counts it): one text.
  const [a, b] = [systems.get('messages:trace_0291') ?? '', systems.get('messages:trace_0616') ?? ''].sort((x, y) => x.length - y.length);
  assert.ok(a.length > 10_000 && b.startsWith(a), `system prompts of ${a.length} and ${b.length} characters`);
});
