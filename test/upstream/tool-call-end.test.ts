// Whether an answer ended in a tool call (issue 31: the routing core retains the session's prefix for its tool
// gap), as the stream observer sees it in each API's stream and whole body, whatever the socket reads cut.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { StreamObserver } from '../../src/upstream/stream-observer.js';
import { ANTHROPIC_STREAM, OPENAI_STREAM, RESPONSES_STREAM, endAt } from '../../src/dialects/stream-shapes.js';
import { pushSplit } from '../fixtures/split-stream.js';

const data = (o: unknown): string => `data: ${JSON.stringify(o)}\n\n`;

function chat (finish: string, spaced = false): string {
  const head = { id: 'c', object: 'chat.completion.chunk' };
  const last = data({ ...head, choices: [{ index: 0, delta: {}, finish_reason: finish }] });
  return data({ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] }) +
    data({ ...head, choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'x', type: 'function', function: { name: 'f', arguments: '{}' } }] }, finish_reason: null }] }) +
    data({ ...head, choices: [{ index: 0, delta: { content: 'a "finish_reason":"tool_calls" in text' }, finish_reason: null }] }) +
    (spaced ? last.replace('"finish_reason":', '"finish_reason": ') : last) +
    data({ ...head, choices: [], usage: { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 } }) + 'data: [DONE]\n\n';
}

function messages (stop: string): string {
  return data({ type: 'message_start', message: { id: 'm', type: 'message', role: 'assistant', content: [], stop_reason: null, usage: { input_tokens: 3, output_tokens: 0 } } }) +
    data({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 't', name: 'f', input: {} } }) +
    data({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: '{"stop_reason":"tool_use"}' } }) +
    data({ type: 'content_block_stop', index: 0 }) +
    // Anthropic's own message_delta names the reason without usage of input tokens; the end is read from delta.
    data({ type: 'message_delta', delta: { stop_reason: stop, stop_sequence: null }, usage: { output_tokens: 2 } }) +
    data({ type: 'message_stop' });
}

function responses (itemType: string): string {
  const item = itemType === 'function_call' ? { type: 'function_call', id: 'fc', call_id: 'c', name: 'f', arguments: '{}' } : { type: 'message', id: 'm', content: [{ type: 'output_text', text: 'x' }] };
  const response = { id: 'r', object: 'response', status: 'completed', output: [item], usage: { input_tokens: 3, output_tokens: 2 } };
  return data({ type: 'response.created', response: { ...response, status: 'in_progress', output: [], usage: null } }) +
    data({ type: 'response.output_text.delta', delta: 'x' }) +
    data({ type: 'response.output_item.done', output_index: 0, item }) +
    data({ type: 'response.completed', response });
}

const CASES = [
  { name: 'chat tool_calls', shape: OPENAI_STREAM, stream: chat('tool_calls'), toolCall: true },
  { name: 'chat tool_calls, spaced', shape: OPENAI_STREAM, stream: chat('tool_calls', true), toolCall: true },
  { name: 'chat stop (a tool call\'s words in the text do not count)', shape: OPENAI_STREAM, stream: chat('stop'), toolCall: false },
  { name: 'messages tool_use', shape: ANTHROPIC_STREAM, stream: messages('tool_use'), toolCall: true },
  { name: 'messages end_turn', shape: ANTHROPIC_STREAM, stream: messages('end_turn'), toolCall: false },
  { name: 'responses function_call', shape: RESPONSES_STREAM, stream: responses('function_call'), toolCall: true },
  { name: 'responses message', shape: RESPONSES_STREAM, stream: responses('message'), toolCall: false }
];

test('each API\'s stream: the end is read, whatever the splits (property)', () => {
  for (const c of CASES) {
    const all = Buffer.from(c.stream);
    fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 1, max: all.length - 1 }), { maxLength: 12 }), (cuts) => {
      const o = new StreamObserver('text/event-stream', c.shape);
      pushSplit(o, all, cuts);
      assert.equal(o.toolCall, c.toolCall, c.name);
      assert.equal(o.firstTokenSeen, true, c.name);
    }), { numRuns: 60 });
  }
});

test('whole bodies: finish_reason, stop_reason, a function_call item', () => {
  const body = (shape: typeof OPENAI_STREAM, doc: unknown): boolean => {
    const o = new StreamObserver('application/json', shape);
    o.push(Buffer.from(JSON.stringify(doc)));
    o.end();
    return o.toolCall;
  };
  assert.equal(body(OPENAI_STREAM, { choices: [{ index: 0, message: { role: 'assistant', tool_calls: [{ id: 'x' }] }, finish_reason: 'tool_calls' }] }), true);
  assert.equal(body(OPENAI_STREAM, { choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: 'length' }] }), false);
  assert.equal(body(ANTHROPIC_STREAM, { type: 'message', content: [{ type: 'tool_use', id: 't', name: 'f', input: {} }], stop_reason: 'tool_use' }), true);
  assert.equal(body(ANTHROPIC_STREAM, { type: 'message', content: [{ type: 'text', text: 'x' }], stop_reason: 'max_tokens' }), false);
  assert.equal(body(RESPONSES_STREAM, { object: 'response', output: [{ type: 'reasoning' }, { type: 'function_call', name: 'f' }] }), true);
  assert.equal(body(RESPONSES_STREAM, { object: 'response', output: [{ type: 'message', content: [{ type: 'output_text', text: 'x' }] }] }), false);
});

test('endAt finds a key whose value is a string, and no string that merely spells it', () => {
  assert.equal(endAt('{"finish_reason":null}', '"finish_reason"', 0), -1);
  assert.equal(endAt('{"finish_reason": null}', '"finish_reason"', 0), -1);
  assert.equal(endAt('{"finish_reason": "stop"}', '"finish_reason"', 0), 1);
  assert.equal(endAt('{"a":"x","finish_reason":"stop","b":{"finish_reason": "x"}}', '"finish_reason"', 0), 9);
  assert.equal(endAt('{"a":"\\"finish_reason\\"","finish_reason":"stop"}', '"finish_reason"', 0), 25);
  assert.equal(endAt('{"x":["finish_reason"]}', '"finish_reason"', 0), -1);
});
