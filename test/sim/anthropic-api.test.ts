// POST /v1/messages and /v1/messages/count_tokens over HTTP, in the shapes vLLM's Anthropic serving answers
// (vllm/entrypoints/anthropic/serving.py, api_router.py): the whole message, the SSE event order, usage,
// count_tokens against the prompt the messages endpoint runs, and the error shapes.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { SimServer } from '../../src/sim/server.js';
import { post, sim } from './http-helpers.js';

let s: SimServer;
before(async () => {
  s = await sim({ servedModelName: ['sim-model'], maxModelLen: 2048, stopProbability: 0, enablePromptTokensDetails: true });
});
after(() => s.close());

/** An `event: X\ndata: Y` stream as [event, parsed data] pairs; checks the framing and that each event names its data's type. */
function events (text: string): Array<[string, any]> {
  assert.ok(text.endsWith('\n\n'), 'the stream ends with a blank line');
  return text.split('\n\n').filter((e) => e !== '').map((e) => {
    const m = /^event: ([a-z_]+)\ndata: (.*)$/s.exec(e);
    assert.ok(m !== null, `not an event: ${JSON.stringify(e)}`);
    const data = JSON.parse(m[2]);
    assert.equal(data.type, m[1], 'the event line names the data type');
    return [m[1], data];
  });
}

const body = {
  model: 'sim-model',
  max_tokens: 6,
  system: [{ type: 'text', text: 'You are a careful assistant.' }],
  tools: [{ name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { c: { type: 'string' } } } }],
  messages: [
    { role: 'user', content: 'list the files' },
    { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: { c: 'ls' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'a.txt' }, { type: 'text', text: 'and now?' }] }
  ]
};

test('whole message: vLLM\'s fields (exclude_none), chatcmpl id, text block, max_tokens stop, usage without cache fields; query string accepted', async () => {
  const r = await post(`${s.url}/v1/messages?beta=true`, body);
  assert.equal(r.status, 200, r.text);
  const j = r.json;
  assert.deepEqual(Object.keys(j), ['id', 'type', 'role', 'content', 'model', 'stop_reason', 'usage']);
  assert.match(j.id, /^chatcmpl-[0-9a-f]{32}$/);
  assert.equal(j.type, 'message');
  assert.equal(j.role, 'assistant');
  assert.equal(j.model, 'sim-model');
  assert.equal(j.content.length, 1);
  assert.deepEqual(Object.keys(j.content[0]), ['type', 'text']);
  assert.equal(j.content[0].type, 'text');
  assert.ok(j.content[0].text.length > 0);
  assert.equal(j.stop_reason, 'max_tokens');
  assert.deepEqual(Object.keys(j.usage), ['input_tokens', 'output_tokens']);
  assert.equal(j.usage.output_tokens, 6);
  // The same conversation as a chat completion: the prompt tokens match (same template rendering).
  const chat = await post(`${s.url}/v1/chat/completions`, {
    model: 'sim-model',
    max_tokens: 1,
    tools: [{ type: 'function', function: { name: 'Bash', description: 'Run a command', parameters: { type: 'object', properties: { c: { type: 'string' } } }, defer_loading: null } }],
    messages: [
      { role: 'system', content: 'You are a careful assistant.' },
      { role: 'user', content: 'list the files' },
      { role: 'assistant', tool_calls: [{ id: 't1', type: 'function', function: { name: 'Bash', arguments: '{"c": "ls"}' } }] },
      { role: 'tool', tool_call_id: 't1', content: 'a.txt' },
      { role: 'user', content: 'and now?' }
    ]
  });
  assert.equal(chat.status, 200, chat.text);
  assert.equal(j.usage.input_tokens, chat.json.usage.prompt_tokens);
});

test('count_tokens answers the prompt tokens the messages endpoint reports', async () => {
  const { max_tokens: _unused, ...countBody } = body;
  const c = await post(`${s.url}/v1/messages/count_tokens?beta=true`, countBody);
  assert.equal(c.status, 200, c.text);
  assert.deepEqual(Object.keys(c.json), ['input_tokens', 'context_management']);
  const m = await post(`${s.url}/v1/messages`, { ...body, max_tokens: 1 });
  assert.equal(c.json.input_tokens, m.json.usage.input_tokens);
  assert.deepEqual(c.json.context_management, { original_input_tokens: c.json.input_tokens });
});

test('streamed: message_start, content_block_start, deltas, content_block_stop, message_delta, message_stop — no ping', async () => {
  const r = await post(`${s.url}/v1/messages`, { ...body, stream: true });
  assert.equal(r.status, 200);
  const ev = events(r.text);
  const names = ev.map(([e]) => e);
  const deltas = names.filter((n) => n === 'content_block_delta').length;
  assert.ok(deltas >= 1);
  assert.deepEqual(names, ['message_start', 'content_block_start', ...Array(deltas).fill('content_block_delta'), 'content_block_stop', 'message_delta', 'message_stop']);
  const start = ev[0][1];
  // vLLM dumps with exclude_unset: the message's defaults (type, role) are not sent.
  assert.deepEqual(Object.keys(start.message), ['id', 'content', 'model', 'stop_reason', 'stop_sequence', 'usage']);
  assert.match(start.message.id, /^chatcmpl-/);
  assert.deepEqual(start.message.content, []);
  assert.equal(start.message.stop_reason, null);
  assert.deepEqual(ev[1][1], { type: 'content_block_start', content_block: { type: 'text', text: '' }, index: 0 });
  for (const [, d] of ev.slice(2, 2 + deltas)) {
    assert.deepEqual(Object.keys(d), ['type', 'delta', 'index']);
    assert.equal(d.delta.type, 'text_delta');
    assert.equal(d.index, 0);
  }
  assert.deepEqual(ev[2 + deltas][1], { type: 'content_block_stop', index: 0 });
  const md = ev[3 + deltas][1];
  assert.deepEqual(md.delta, { stop_reason: 'max_tokens' });
  assert.deepEqual(md.usage, { input_tokens: start.message.usage.input_tokens, output_tokens: 6 });
  assert.deepEqual(start.message.usage, { input_tokens: md.usage.input_tokens, output_tokens: 0 });
  assert.deepEqual(ev[4 + deltas][1], { type: 'message_stop' });
  // The streamed text is the whole message's text (same seed, same prompt).
  const whole = await post(`${s.url}/v1/messages`, body);
  assert.equal(ev.slice(2, 2 + deltas).map(([, d]) => d.delta.text).join(''), whole.json.content[0].text);
});

test('a second turn that extends the first hits the prefix cache; the Messages usage still reports no cache fields (as vLLM)', async () => {
  const system = 'Long shared instructions that fill several KV blocks. '.repeat(8);
  const first = await post(`${s.url}/v1/messages`, { model: 'sim-model', max_tokens: 8, system, messages: [{ role: 'user', content: 'first question' }] });
  assert.equal(first.status, 200);
  const second = await post(`${s.url}/v1/messages`, {
    model: 'sim-model',
    max_tokens: 4,
    system,
    messages: [{ role: 'user', content: 'first question' }, { role: 'assistant', content: first.json.content }, { role: 'user', content: 'second' }]
  });
  assert.equal(second.status, 200);
  assert.deepEqual(Object.keys(second.json.usage), ['input_tokens', 'output_tokens']);
  // The same second prompt as a chat completion shows what the engine cached.
  const chat = await post(`${s.url}/v1/chat/completions`, {
    model: 'sim-model',
    max_tokens: 1,
    messages: [{ role: 'system', content: system }, { role: 'user', content: 'first question' }, { role: 'assistant', content: first.json.content[0].text }, { role: 'user', content: 'second' }]
  });
  assert.equal(chat.json.usage.prompt_tokens, second.json.usage.input_tokens);
  assert.ok(chat.json.usage.prompt_tokens_details.cached_tokens >= first.json.usage.input_tokens - 16);
});

test('errors: a body pydantic rejects is vLLM\'s OpenAI-shaped 400; serving errors are Anthropic-shaped', async () => {
  const missing = await post(`${s.url}/v1/messages`, { model: 'sim-model', messages: [{ role: 'user', content: 'x' }] });
  assert.equal(missing.status, 400);
  assert.deepEqual(Object.keys(missing.json.error), ['message', 'type', 'param', 'code']);
  assert.match(missing.json.error.message, /max_tokens/);
  const badBlock = await post(`${s.url}/v1/messages`, { model: 'sim-model', max_tokens: 1, messages: [{ role: 'user', content: [{ type: 'video' }] }] });
  assert.equal(badBlock.status, 400);
  assert.match(badBlock.json.error.message, /messages\[0\]\.content\[0\]\.type/);
  const badJson = await post(`${s.url}/v1/messages`, '{"model":');
  assert.equal(badJson.status, 400);

  const unknown = await post(`${s.url}/v1/messages`, { model: 'nope', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] });
  assert.equal(unknown.status, 404);
  assert.deepEqual(unknown.json, { type: 'error', error: { type: 'NotFoundError', message: 'The model `nope` does not exist.' } });
  const tooLong = await post(`${s.url}/v1/messages`, { model: 'sim-model', max_tokens: 2000, messages: [{ role: 'user', content: 'x'.repeat(100) }] });
  assert.equal(tooLong.status, 400);
  assert.equal(tooLong.json.type, 'error');
  assert.equal(tooLong.json.error.type, 'BadRequestError');
  assert.match(tooLong.json.error.message, /maximum context length is 2048/);
  const countUnknown = await post(`${s.url}/v1/messages/count_tokens`, { model: 'nope', messages: [{ role: 'user', content: 'x' }] });
  assert.equal(countUnknown.status, 404);
  assert.equal(countUnknown.json.error.type, 'NotFoundError');
});
