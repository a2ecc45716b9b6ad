import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { parseChatBody, type ChatBodyState } from '../../src/features/body-splice.js';

const str = fc.oneof(fc.string({ maxLength: 12 }), fc.string({ unit: 'grapheme', maxLength: 8 }), fc.constantFrom('"', '\\', '\\"', '"]}', ',', 'messages', '\u2028', '"messages":[]'));
const message = fc.record({ role: fc.constantFrom('user', 'assistant', 'tool'), content: fc.oneof(str, fc.constant(null), fc.array(fc.record({ type: fc.constant('text'), text: str }), { maxLength: 2 })) }, { requiredKeys: ['role'] });
// How the client writes the body: compact or indented, messages first or among other fields.
const layout = fc.record({ indent: fc.constantFrom(undefined, 0, 1, 2, '\t'), messagesFirst: fc.boolean(), extra: fc.dictionary(fc.constantFrom('model', 'stream', 'tools', 'x'), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 3 }) });

function bodyOf (messages: unknown[], l: { indent: string | number | undefined; messagesFirst: boolean; extra: Record<string, unknown> }): Buffer {
  const doc = l.messagesFirst ? { messages, ...l.extra } : { ...l.extra, messages };
  return Buffer.from(JSON.stringify(doc, null, l.indent));
}

/** Parses `raw` after `prev`; asserts the result is JSON.parse's, or that both throw. */
function same (raw: Buffer, prev: ChatBodyState | null): ChatBodyState | null {
  let want: unknown;
  try {
    want = JSON.parse(raw.toString('utf8'));
  } catch (err) {
    assert.throws(() => parseChatBody(raw, prev), { name: (err as Error).name, message: (err as Error).message });
    return prev;
  }
  const r = parseChatBody(raw, prev);
  assert.deepEqual(r.doc, want);
  if (r.state !== null) assert.deepEqual(r.state.messages, (want as { messages: unknown[] }).messages);
  return r.state;
}

test('a turn that appends, edits or truncates messages parses as JSON.parse does (property)', () => {
  fc.assert(fc.property(fc.array(message, { minLength: 1, maxLength: 5 }), fc.array(fc.record({
    op: fc.constantFrom('append', 'append', 'edit', 'truncate'), add: fc.array(message, { maxLength: 3 }), at: fc.nat(), layout
  }), { minLength: 1, maxLength: 5 }), layout, (first, turns, l0) => {
    let msgs: unknown[] = first;
    let state = same(bodyOf(msgs, l0), null);
    for (const t of turns) {
      if (t.op === 'append') msgs = [...msgs, ...t.add];
      else if (t.op === 'edit' && msgs.length > 0) msgs = msgs.map((m, i) => (i === t.at % msgs.length ? { role: 'user', content: `edited ${i}` } : m));
      else msgs = [...msgs.slice(0, t.at % (msgs.length + 1)), ...t.add];
      state = same(bodyOf(msgs, t.layout), state);
    }
  }), { numRuns: 400 });
});

test('any bytes after a previous body\'s prefix parse as JSON.parse does, or fail as it fails (property)', () => {
  const junk = fc.array(fc.constantFrom(',', ']', '}', '{', '[', '"', ' ', '\n', '"messages"', ':', '1', 'null', '{"role":"user"}', '\\', 'é'), { maxLength: 10 }).map((xs) => xs.join(''));
  fc.assert(fc.property(fc.array(message, { minLength: 1, maxLength: 4 }), layout, fc.double({ min: 0, max: 1, noNaN: true }), junk, (msgs, l, cut, tail) => {
    const prevBody = bodyOf(msgs, l);
    const prev = (): ChatBodyState => parseChatBody(prevBody, null).state!; // a state is used once
    const at = Math.floor(cut * prevBody.length);
    same(Buffer.concat([prevBody.subarray(0, at), Buffer.from(tail)]), prev());
    // The same body with junk inserted, so the tail after it is the old one.
    same(Buffer.concat([prevBody.subarray(0, at), Buffer.from(tail), prevBody.subarray(at)]), prev());
  }), { numRuns: 1500 });
});

test('a failed parse leaves the previous state as it was; a successful one reuses its buffer', () => {
  const body = (extra: string): Buffer => Buffer.from(`{"model":"m","messages":[{"role":"user","content":"a"}${extra}]}`);
  const first = parseChatBody(body(''), null).state!;
  assert.throws(() => parseChatBody(Buffer.from('{"model":"m","messages":[{"role":"user","content":"a"},{"x'), first), SyntaxError);
  assert.deepEqual(first.bytes, body(''));
  const next = parseChatBody(body(',{"role":"user","content":"b"}'), first);
  assert.equal(next.reused, 1);
  assert.deepEqual(next.state!.bytes, body(',{"role":"user","content":"b"}'));
  const third = parseChatBody(body(',{"role":"user","content":"c"}'), next.state);
  assert.equal(third.state!.bytes.buffer, next.state!.bytes.buffer);
  assert.deepEqual(third.state!.bytes, body(',{"role":"user","content":"c"}'));
});

test('leading messages are reused, and only while every byte before their end is unchanged', () => {
  const a = { role: 'user', content: 'a' };
  const b = { role: 'assistant', content: 'b' };
  const first = parseChatBody(Buffer.from(JSON.stringify({ model: 'm', messages: [a, b] })), null);
  assert.equal(first.reused, 0);
  const next = parseChatBody(Buffer.from(JSON.stringify({ model: 'm', messages: [a, b, { role: 'user', content: 'c' }], stream: true })), first.state);
  assert.equal(next.reused, 2);
  assert.equal((next.doc as { messages: unknown[] }).messages[0], (first.doc as { messages: unknown[] }).messages[0], 'the same object');
  // A change before the messages (another model) reuses nothing.
  assert.equal(parseChatBody(Buffer.from(JSON.stringify({ model: 'n', messages: [a, b] })), next.state!).reused, 0);
});

test('a later "messages" key (even escaped) replaces the array, as JSON.parse does', () => {
  for (const raw of ['{"messages":[{"role":"user","content":"a"}],"messages":[]}', '{"messages":[{"role":"user","content":"a"}],"m\\u0065ssages":[1]}',
    '{"messages":[{"role":"user","content":"a"}],}', '{"messages":[{"role":"user","content":"a"},]}', '{"messages":[{"role":"user","content":"a"}]} x']) {
    same(Buffer.from(raw), parseChatBody(Buffer.from('{"messages":[{"role":"user","content":"a"}]}'), null).state);
  }
  // An earlier "messages" key is replaced by the later array, whose elements are located.
  const dup = parseChatBody(Buffer.from('{"messages":1,"messages":[{"role":"user","content":"a"}]}'), null);
  assert.equal(dup.state?.ends.length, 1);
  same(Buffer.from('{"messages":1,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}'), dup.state);
});
