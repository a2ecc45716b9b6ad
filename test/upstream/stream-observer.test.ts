import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { StreamObserver } from '../../src/upstream/stream-observer.js';
import { pushSplit } from '../fixtures/split-stream.js';

const events = [
  'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n',
  'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"Hel"}}]}\n\n',
  'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":"stop"}]}\n\n',
  'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":40,"total_tokens":42,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":32}}}\n\n',
  'data: [DONE]\n\n'
];

test('the role chunk is not a token; the first content chunk is; usage and cached tokens are read', () => {
  const o = new StreamObserver('text/event-stream');
  assert.equal(o.push(Buffer.from(events[0])), false);
  assert.equal(o.firstTokenSeen, false);
  assert.equal(o.push(Buffer.from(events[1])), true);
  for (const e of events.slice(2)) assert.equal(o.push(Buffer.from(e)), false);
  o.end();
  assert.deepEqual(o.usage, { promptTokens: 40, completionTokens: 2, cachedTokens: 32 });
  assert.equal(o.streamError, null);
});

test('any split of the byte stream gives the same observation (property)', () => {
  const all = Buffer.from(events.join(''));
  fc.assert(fc.property(fc.uniqueArray(fc.integer({ min: 1, max: all.length - 1 }), { maxLength: 20 }), (cuts) => {
    const o = new StreamObserver('text/event-stream; charset=utf-8');
    assert.equal(pushSplit(o, all, cuts), 1);
    assert.equal(o.contentEvents, 2);
    assert.deepEqual(o.usage, { promptTokens: 40, completionTokens: 2, cachedTokens: 32 });
  }));
});

test('after the first token, events are counted without parsing, and usage or errors are still read', () => {
  const o = new StreamObserver('text/event-stream');
  o.push(Buffer.from(events[1]));
  o.push(Buffer.from(
    'data:{"choices":[{"delta":{"content":"a"}}]}\n\n' + // no space after the colon
    ': keep-alive\n\n' + // a comment: not an event
    'data: {"choices":[{"delta":\ndata: {"content":"b"}}]}\n\n' + // two data lines
    'data: \n\n' + // empty data
    'data: {"choices":[{"delta":{"content":"c"}}],"usage":{"prompt_tokens":7,"completion_tokens":4}}\n\n' +
    'data: {"error":{"message":"late","type":"x","code":500}}\n\n' +
    'data: [DONE]\n\n'));
  o.end();
  assert.equal(o.contentEvents, 4); // Hel, a, b and the last chunk (its usage read too)
  assert.deepEqual(o.usage, { promptTokens: 7, completionTokens: 4, cachedTokens: null });
  assert.equal(o.streamError, 'late');
});

test('a non-streaming response is read at the end; completions text counts as content', () => {
  const o = new StreamObserver('application/json');
  const body = JSON.stringify({ object: 'text_completion', choices: [{ index: 0, text: 'hi' }], usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6, prompt_tokens_details: null } });
  o.push(Buffer.from(body.slice(0, 10)));
  o.push(Buffer.from(body.slice(10)));
  assert.equal(o.firstTokenSeen, false);
  o.end();
  assert.equal(o.firstTokenSeen, true);
  assert.deepEqual(o.usage, { promptTokens: 5, completionTokens: 1, cachedTokens: null });
});

test('in-band errors are noticed, garbage is ignored, and a huge body is not buffered', () => {
  const o = new StreamObserver('text/event-stream');
  o.push(Buffer.from('data: {not json\n\n: comment\n\ndata: {"error":{"message":"boom","type":"x","code":500}}\n\ndata: [DONE]\n\n'));
  o.end();
  assert.equal(o.streamError, 'boom');
  const big = new StreamObserver('application/json', undefined, 16);
  big.push(Buffer.from('{"usage":{"prompt_tokens":1,"completion_tokens":1}, "pad":"xxxxxxxxxxxxxxxxxxxxxxxxx"}'));
  big.end();
  assert.equal(big.usage, null);
});

test('a chunk is skipped unparsed only when it cannot carry output: every other spelling still counts as the first token', () => {
  const first = (data: string): boolean => {
    const o = new StreamObserver('text/event-stream');
    return o.push(Buffer.from(`data: ${data}\n\n`));
  };
  const choice = (delta: string): string => `{"id":"c","choices":[{"index":0,"delta":${delta},"finish_reason":null}]}`;
  assert.equal(first(choice('{"role":"assistant","content":""}')), false);
  assert.equal(first(choice('{"role":"assistant"}')), false);
  assert.equal(first(choice('{"content": "x"}')), true, 'whitespace after the colon');
  assert.equal(first(choice('{"content":"","content":"x"}')), true, 'a repeated key: the last one wins');
  assert.equal(first(choice('{"\\u0063ontent":"x"}')), true, 'a key spelled with an escape');
  assert.equal(first(choice('{"content":"","reasoning_content":"hm"}')), true);
  assert.equal(first(choice('{"tool_calls":[{"index":0,"function":{"name":"f"}}]}')), true);
  assert.equal(first('{"id":"c","choices":[{"index":0,"text":"hi"}]}'), true);
  assert.equal(first(choice('{"content":"say \\"content\\":\\"\\" twice"}')), true, 'quotes inside a value');
  const o = new StreamObserver('text/event-stream');
  o.push(Buffer.from(`data: ${choice('{"content":""}').replace('}]}', '}],"usage":{"prompt_tokens":3,"completion_tokens":0}}')}\n\n`));
  assert.deepEqual(o.usage, { promptTokens: 3, completionTokens: 0, cachedTokens: null });
});
