// The stream observer reading Anthropic Messages and Responses streams and bodies, as vLLM writes them
// (vllm/entrypoints/anthropic/serving.py message_stream_converter; vllm/entrypoints/openai/responses/).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { StreamObserver } from '../../src/upstream/stream-observer.js';
import { ANTHROPIC_STREAM, RESPONSES_STREAM } from '../../src/dialects/stream-shapes.js';
import { pushSplit } from '../fixtures/split-stream.js';

const sse = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

const anthropicEvents = [
  sse('message_start', { type: 'message_start', message: { id: 'chatcmpl-1', type: 'message', role: 'assistant', content: [], model: 'm', stop_reason: null, stop_sequence: null, usage: { input_tokens: 120, output_tokens: 0 } } }),
  sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
  sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } }),
  sse('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'lo' } }),
  sse('content_block_stop', { type: 'content_block_stop', index: 0 }),
  sse('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { input_tokens: 120, output_tokens: 2, cache_read_input_tokens: 96 } }),
  sse('message_stop', { type: 'message_stop' })
];

test('Anthropic: message_start is no token, the first text delta is; usage merges message_start and message_delta', () => {
  const o = new StreamObserver('text/event-stream', ANTHROPIC_STREAM);
  assert.equal(o.push(Buffer.from(anthropicEvents[0] + anthropicEvents[1])), false);
  assert.deepEqual(o.usage, { promptTokens: 120, completionTokens: 0, cachedTokens: null });
  assert.equal(o.push(Buffer.from(anthropicEvents[2])), true);
  for (const e of anthropicEvents.slice(3)) assert.equal(o.push(Buffer.from(e)), false);
  o.end();
  assert.deepEqual(o.usage, { promptTokens: 120, completionTokens: 2, cachedTokens: 96 });
  assert.equal(o.streamError, null);
});

test('Anthropic: any split of the byte stream gives the same observation (property)', () => {
  const all = Buffer.from(anthropicEvents.join(''));
  fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 1, max: all.length - 1 }), { maxLength: 20 }), (cuts) => {
    const o = new StreamObserver('text/event-stream', ANTHROPIC_STREAM);
    assert.equal(pushSplit(o, all, cuts), 1);
    assert.deepEqual(o.usage, { promptTokens: 120, completionTokens: 2, cachedTokens: 96 });
  }));
});

test('Anthropic: a tool_use block is output; an error event is seen; a whole message is read at its end', () => {
  const tool = new StreamObserver('text/event-stream', ANTHROPIC_STREAM);
  tool.push(Buffer.from(anthropicEvents[0]));
  assert.equal(tool.push(Buffer.from(sse('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: 't1', name: 'ls', input: {} } }))), true);
  const err = new StreamObserver('text/event-stream', ANTHROPIC_STREAM);
  err.push(Buffer.from(anthropicEvents[0] + anthropicEvents[2]));
  err.push(Buffer.from(sse('error', { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } })));
  assert.equal(err.streamError, 'Overloaded');
  const whole = new StreamObserver('application/json', ANTHROPIC_STREAM);
  whole.push(Buffer.from(JSON.stringify({ id: 'chatcmpl-2', type: 'message', role: 'assistant', content: [{ type: 'text', text: 'hi' }], model: 'm', stop_reason: 'end_turn', usage: { input_tokens: 50, output_tokens: 3 } })));
  whole.end();
  assert.equal(whole.firstTokenSeen, true);
  assert.deepEqual(whole.usage, { promptTokens: 50, completionTokens: 3, cachedTokens: null });
  const empty = new StreamObserver('application/json', ANTHROPIC_STREAM);
  empty.push(Buffer.from(JSON.stringify({ type: 'message', content: [], usage: { input_tokens: 5, output_tokens: 0 } })));
  empty.end();
  assert.equal(empty.firstTokenSeen, false);
});

const response = (status: string, usage: unknown) => ({ id: 'resp_abc', object: 'response', created_at: 1, model: 'm', status, output: [], usage });
const responsesEvents = [
  sse('response.created', { type: 'response.created', sequence_number: 0, response: response('in_progress', null) }),
  sse('response.in_progress', { type: 'response.in_progress', sequence_number: 1, response: response('in_progress', null) }),
  sse('response.output_item.added', { type: 'response.output_item.added', sequence_number: 2, output_index: 0, item: { id: 'msg_1', type: 'message', role: 'assistant', status: 'in_progress', content: [] } }),
  sse('response.content_part.added', { type: 'response.content_part.added', sequence_number: 3, item_id: 'msg_1', output_index: 0, content_index: 0, part: { type: 'output_text', text: '', annotations: [] } }),
  sse('response.output_text.delta', { type: 'response.output_text.delta', sequence_number: 4, item_id: 'msg_1', output_index: 0, content_index: 0, delta: 'Hi', logprobs: [] }),
  sse('response.output_text.done', { type: 'response.output_text.done', sequence_number: 5, item_id: 'msg_1', output_index: 0, content_index: 0, text: 'Hi', logprobs: [] }),
  sse('response.completed', { type: 'response.completed', sequence_number: 6, response: response('completed', { input_tokens: 64, input_tokens_details: { cached_tokens: 48 }, output_tokens: 1, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 65 }) })
];

test('Responses: the id from response.created, the first token at the first delta, usage from response.completed', () => {
  const o = new StreamObserver('text/event-stream', RESPONSES_STREAM);
  assert.equal(o.push(Buffer.from(responsesEvents.slice(0, 4).join(''))), false);
  assert.equal(o.responseId, 'resp_abc');
  assert.equal(o.push(Buffer.from(responsesEvents[4])), true);
  o.push(Buffer.from(responsesEvents.slice(5).join('')));
  o.end();
  assert.deepEqual(o.usage, { promptTokens: 64, completionTokens: 1, cachedTokens: 48 });
});

test('Responses: a whole response, a function call, an error event', () => {
  const whole = new StreamObserver('application/json', RESPONSES_STREAM);
  whole.push(Buffer.from(JSON.stringify({ ...response('completed', { input_tokens: 9, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2 }), output: [{ type: 'message', content: [{ type: 'output_text', text: 'ok' }] }] })));
  whole.end();
  assert.equal(whole.firstTokenSeen, true);
  assert.equal(whole.responseId, 'resp_abc');
  assert.deepEqual(whole.usage, { promptTokens: 9, completionTokens: 2, cachedTokens: 0 });
  const call = new StreamObserver('text/event-stream', RESPONSES_STREAM);
  assert.equal(call.push(Buffer.from(sse('response.function_call_arguments.delta', { type: 'response.function_call_arguments.delta', sequence_number: 3, item_id: 'fc_1', output_index: 0, delta: '{"a"' }))), true);
  const err = new StreamObserver('text/event-stream', RESPONSES_STREAM);
  err.push(Buffer.from(responsesEvents[0] + responsesEvents[4] + sse('error', { type: 'error', code: 'server_error', message: 'engine died', param: null, sequence_number: 5 })));
  assert.equal(err.streamError, 'engine died');
});
