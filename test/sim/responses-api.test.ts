// POST /v1/responses and GET /v1/responses/{id} over HTTP, in the shapes vLLM's Responses serving answers
// (vllm/entrypoints/openai/responses/{serving,protocol,streaming_events}.py, api_router.py): the response
// object, the SSE event order with sequence numbers, usage with cached tokens, previous_response_id
// continuing a conversation or answering 404, the store's bound, and bad bodies.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { SimServer } from '../../src/sim/server.js';
import { post, sim } from './http-helpers.js';

let s: SimServer;
before(async () => {
  s = await sim({ servedModelName: ['sim-model'], maxModelLen: 4096, stopProbability: 0 });
});
after(() => s.close());

function events (text: string): Array<[string, any]> {
  assert.ok(text.endsWith('\n\n'), 'the stream ends with a blank line');
  return text.split('\n\n').filter((e) => e !== '').map((e) => {
    const m = /^event: ([a-z_.]+)\ndata: (.*)$/s.exec(e);
    assert.ok(m !== null, `not an event: ${JSON.stringify(e)}`);
    const data = JSON.parse(m[2]);
    assert.equal(data.type, m[1], 'the event line names the data type');
    return [m[1], data];
  });
}

const RESPONSE_KEYS = ['id', 'created_at', 'incomplete_details', 'instructions', 'metadata', 'model', 'object', 'output', 'parallel_tool_calls',
  'temperature', 'tool_choice', 'tools', 'top_p', 'background', 'max_output_tokens', 'max_tool_calls', 'previous_response_id', 'prompt',
  'reasoning', 'service_tier', 'status', 'text', 'top_logprobs', 'truncation', 'usage', 'user', 'input_messages', 'output_messages'];

const get = async (path: string): Promise<{ status: number; json: any }> => {
  const r = await fetch(`${s.url}${path}`);
  return { status: r.status, json: await r.json() };
};

test('whole response: every field (model_dump), resp_/msg_ ids, incomplete at max_output_tokens, usage details; GET returns it', async () => {
  const r = await post(`${s.url}/v1/responses`, { model: 'sim-model', instructions: 'Be brief.', input: 'hello there', max_output_tokens: 5, user: 'u1', metadata: { k: 'v' } });
  assert.equal(r.status, 200, r.text);
  const j = r.json;
  assert.deepEqual(Object.keys(j), RESPONSE_KEYS);
  assert.match(j.id, /^resp_[0-9a-f]{32}$/);
  assert.equal(j.object, 'response');
  assert.equal(j.status, 'incomplete');
  assert.deepEqual(j.incomplete_details, { reason: 'max_output_tokens' });
  assert.equal(j.instructions, 'Be brief.');
  assert.deepEqual(j.metadata, { k: 'v' });
  assert.equal(j.user, 'u1');
  assert.equal(j.max_output_tokens, 5);
  assert.equal(j.tool_choice, 'auto');
  assert.equal(j.output.length, 1);
  const item = j.output[0];
  assert.deepEqual(Object.keys(item), ['id', 'content', 'role', 'status', 'type']);
  assert.match(item.id, /^msg_[0-9a-f]{32}$/);
  assert.deepEqual(Object.keys(item.content[0]), ['annotations', 'text', 'type', 'logprobs']);
  assert.equal(item.content[0].type, 'output_text');
  assert.deepEqual(j.usage.input_tokens_details, { cached_tokens: j.usage.input_tokens_details.cached_tokens, input_tokens_per_turn: [], cached_tokens_per_turn: [] });
  assert.deepEqual(j.usage.output_tokens_details, { reasoning_tokens: 0, tool_output_tokens: 0, output_tokens_per_turn: [], tool_output_tokens_per_turn: [] });
  assert.equal(j.usage.output_tokens, 5);
  assert.equal(j.usage.total_tokens, j.usage.input_tokens + 5);
  // The same prompt as a chat completion: instructions → system, input → user.
  const chat = await post(`${s.url}/v1/chat/completions`, { model: 'sim-model', max_tokens: 1, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hello there' }] });
  assert.equal(j.usage.input_tokens, chat.json.usage.prompt_tokens);

  const got = await get(`/v1/responses/${j.id}`);
  assert.equal(got.status, 200);
  assert.deepEqual(got.json, j);
});

test('streamed: created, in_progress, item and part added, deltas, text/part/item done, completed; sequence numbers 0..n-1', async () => {
  const r = await post(`${s.url}/v1/responses`, { model: 'sim-model', input: 'stream this please', max_output_tokens: 6, stream: true });
  assert.equal(r.status, 200);
  const ev = events(r.text);
  const names = ev.map(([e]) => e);
  const deltas = names.filter((n) => n === 'response.output_text.delta').length;
  assert.ok(deltas >= 1);
  assert.deepEqual(names, ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
    ...Array(deltas).fill('response.output_text.delta'), 'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
  assert.deepEqual(ev.map(([, d]) => d.sequence_number), ev.map((_, i) => i));
  const created = ev[0][1].response;
  assert.deepEqual(Object.keys(created), RESPONSE_KEYS);
  assert.equal(created.status, 'in_progress');
  assert.equal(created.usage, null);
  assert.deepEqual(created.output, []);
  assert.deepEqual(ev[1][1].response, created);
  const added = ev[2][1];
  assert.deepEqual(Object.keys(added), ['item', 'output_index', 'sequence_number', 'type']);
  assert.deepEqual(added.item, { id: added.item.id, content: [], role: 'assistant', status: 'in_progress', type: 'message' });
  const itemId = added.item.id;
  assert.deepEqual(ev[3][1], { content_index: 0, item_id: itemId, output_index: 0, part: { annotations: [], text: '', type: 'output_text', logprobs: [] }, sequence_number: 3, type: 'response.content_part.added' });
  const text = ev.slice(4, 4 + deltas).map(([, d]) => {
    assert.deepEqual(Object.keys(d), ['content_index', 'delta', 'item_id', 'logprobs', 'output_index', 'sequence_number', 'type']);
    assert.equal(d.item_id, itemId);
    return d.delta;
  }).join('');
  const done = ev[4 + deltas][1];
  assert.deepEqual(Object.keys(done), ['content_index', 'item_id', 'logprobs', 'output_index', 'sequence_number', 'text', 'type']);
  assert.equal(done.text, text);
  assert.deepEqual(ev[5 + deltas][1].part, { annotations: [], text, type: 'output_text', logprobs: null });
  assert.equal(ev[6 + deltas][1].item.status, 'completed');
  const completed = ev[7 + deltas][1].response;
  assert.equal(completed.id, created.id);
  assert.equal(completed.status, 'incomplete');
  assert.equal(completed.output[0].content[0].text, text);
  assert.equal(completed.usage.output_tokens, 6);
  // The completed response is the stored one.
  assert.deepEqual((await get(`/v1/responses/${completed.id}`)).json, completed);
});

test('previous_response_id continues the conversation: the prompt holds the previous turn and hits the prefix cache', async () => {
  const instructions = 'Long instructions shared by both turns, long enough for several blocks. '.repeat(6);
  const first = await post(`${s.url}/v1/responses`, { model: 'sim-model', instructions, input: 'first question', max_output_tokens: 8 });
  assert.equal(first.status, 200);
  const second = await post(`${s.url}/v1/responses`, { model: 'sim-model', instructions, input: [{ role: 'user', content: 'second' }], previous_response_id: first.json.id, max_output_tokens: 4 });
  assert.equal(second.status, 200, second.text);
  assert.equal(second.json.previous_response_id, first.json.id);
  const cached = second.json.usage.input_tokens_details.cached_tokens;
  assert.ok(cached >= first.json.usage.input_tokens - 16, `cached ${cached} of a first prompt of ${first.json.usage.input_tokens}`);
  assert.equal(cached % 16, 0, 'whole blocks');
  // The same conversation sent in full, statelessly: the same prompt.
  const stateless = await post(`${s.url}/v1/responses`, {
    model: 'sim-model',
    instructions,
    input: [{ role: 'user', content: 'first question' }, { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: first.json.output[0].content[0].text }] }, { role: 'user', content: 'second' }],
    max_output_tokens: 1,
    store: false
  });
  assert.equal(stateless.json.usage.input_tokens, second.json.usage.input_tokens);
  // store: false is not kept.
  assert.equal((await get(`/v1/responses/${stateless.json.id}`)).status, 404);
});

test('an unknown previous_response_id, GET and cancel answer as vLLM does', async () => {
  const r = await post(`${s.url}/v1/responses`, { model: 'sim-model', input: 'x', previous_response_id: 'resp_missing' });
  assert.equal(r.status, 404);
  assert.equal(r.text, '{"error":{"message":"Response with id \'resp_missing\' not found.","type":"invalid_request_error","param":"response_id","code":404}}');
  const g = await get('/v1/responses/resp_missing');
  assert.equal(g.status, 404);
  assert.deepEqual(g.json, r.json);
  const made = await post(`${s.url}/v1/responses`, { model: 'sim-model', input: 'y', max_output_tokens: 1 });
  const cancel = await post(`${s.url}/v1/responses/${made.json.id}/cancel`, {});
  assert.equal(cancel.status, 400);
  assert.deepEqual(cancel.json.error, { message: 'Cannot cancel a synchronous response.', type: 'invalid_request_error', param: 'response_id', code: 400 });
  assert.equal((await post(`${s.url}/v1/responses/resp_missing/cancel`, {})).status, 404);
  assert.equal((await get('/v1/responses/a/b')).status, 404, 'no such route');
});

test('bad bodies answer 400 in the OpenAI shape', async () => {
  for (const [b, re] of [
    [{ model: 'sim-model' }, /"input" is required/],
    [{ model: 'sim-model', input: [{ type: 'item_reference', id: 'x' }] }, /not supported/],
    [{ model: 'sim-model', input: 'x', max_output_tokens: 0 }, /max_output_tokens/],
    [{ model: 'sim-model', input: 'x', background: true }, /background/]
  ] as Array<[unknown, RegExp]>) {
    const r = await post(`${s.url}/v1/responses`, b);
    assert.equal(r.status, 400, r.text);
    assert.deepEqual(Object.keys(r.json.error), ['message', 'type', 'param', 'code']);
    assert.match(r.json.error.message, re);
  }
  const unknownModel = await post(`${s.url}/v1/responses`, { model: 'nope', input: 'x' });
  assert.equal(unknownModel.status, 404);
  const tooLong = await post(`${s.url}/v1/responses`, { model: 'sim-model', input: 'x'.repeat(5000) });
  assert.equal(tooLong.status, 400);
  assert.deepEqual(tooLong.json.error.param, 'input');
  assert.match(tooLong.json.error.message, /exceeds the max_model_len 4096/);
});

test('the store is bounded: past responsesStore the oldest answers 404; 0 keeps nothing (vLLM\'s default)', async () => {
  const small = await sim({ servedModelName: ['m'], stopProbability: 0, responsesStore: 2 });
  try {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await post(`${small.url}/v1/responses`, { model: 'm', input: `q${i}`, max_output_tokens: 1 })).json.id);
    assert.equal((await fetch(`${small.url}/v1/responses/${ids[0]}`)).status, 404);
    assert.equal((await fetch(`${small.url}/v1/responses/${ids[1]}`)).status, 200);
    assert.equal((await fetch(`${small.url}/v1/responses/${ids[2]}`)).status, 200);
  } finally {
    await small.close();
  }
  const none = await sim({ servedModelName: ['m'], stopProbability: 0, responsesStore: 0 });
  try {
    const id = (await post(`${none.url}/v1/responses`, { model: 'm', input: 'q', max_output_tokens: 1 })).json.id;
    const next = await post(`${none.url}/v1/responses`, { model: 'm', input: 'r', previous_response_id: id });
    assert.equal(next.status, 404);
  } finally {
    await none.close();
  }
});

test('a response that ends on EOS is completed; no text gives an empty content list', async () => {
  const eos = await sim({ servedModelName: ['m'], stopProbability: 1 });
  try {
    const r = await post(`${eos.url}/v1/responses`, { model: 'm', input: 'q', max_output_tokens: 20 });
    assert.equal(r.json.status, 'completed');
    assert.equal(r.json.incomplete_details, null);
    assert.ok(r.json.usage.output_tokens < 20);
    if (r.json.usage.output_tokens <= 1) assert.deepEqual(r.json.output[0].content, []);
  } finally {
    await eos.close();
  }
});
