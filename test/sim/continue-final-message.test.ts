// `ear sim` continues a final assistant message as vLLM does (continue_final_message: true,
// add_generation_prompt: false): the prompt ends inside that message, with no end-of-turn token, so a resumed
// turn's prompt is the original one plus the text so far, and shares its cached blocks.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { SimServer } from '../../src/sim/server.js';
import { post, sim, text } from './http-helpers.js';

let s: SimServer;
before(async () => { s = await sim({ enablePromptTokensDetails: true, stopProbability: 0, servedModelName: ['m'] }); });
after(() => s.close());

test('chat: the continued prompt is the original prompt plus the partial text; its blocks are cached', async () => {
  const messages = [{ role: 'user', content: text(300, 7) }];
  const partial = 'Hello, wor';
  const first = await post(`${s.url}/v1/chat/completions`, { model: 'm', messages, max_tokens: 2 });
  assert.equal(first.status, 200, first.text);
  const cont = await post(`${s.url}/v1/chat/completions`, { model: 'm', messages: [...messages, { role: 'assistant', content: partial }], continue_final_message: true, add_generation_prompt: false, max_tokens: 2 });
  assert.equal(cont.status, 200, cont.text);
  assert.equal(cont.json.usage.prompt_tokens, first.json.usage.prompt_tokens + partial.length);
  assert.ok(cont.json.usage.prompt_tokens_details.cached_tokens >= first.json.usage.prompt_tokens - 16, 'the original prompt\'s full blocks are reused');
  // A closed assistant turn (the default) renders its end-of-turn and a new generation prompt: longer.
  const closed = await post(`${s.url}/v1/chat/completions`, { model: 'm', messages: [...messages, { role: 'assistant', content: partial }], max_tokens: 2 });
  assert.ok(closed.json.usage.prompt_tokens > cont.json.usage.prompt_tokens);
});

test('Responses: an assistant message left in_progress is continued the same way', async () => {
  const input = [{ type: 'message', role: 'user', content: text(300, 8) }];
  const partial = 'Once upon';
  const first = await post(`${s.url}/v1/responses`, { model: 'm', input, max_output_tokens: 2 });
  assert.equal(first.status, 200, first.text);
  const cont = await post(`${s.url}/v1/responses`, { model: 'm', input: [...input, { type: 'message', role: 'assistant', status: 'in_progress', content: [{ type: 'output_text', text: partial, annotations: [] }] }], max_output_tokens: 2 });
  assert.equal(cont.status, 200, cont.text);
  assert.equal(cont.json.usage.input_tokens, first.json.usage.input_tokens + partial.length);
});
