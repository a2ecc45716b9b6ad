// responsesToChat against the chat messages vLLM builds for a Responses request (vllm/entrypoints/openai/
// responses/utils.py: construct_input_messages, _construct_message_from_response_item, construct_tool_dicts),
// written out by reading that code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { continueConversation, responsesToChat } from '../../src/dialects/responses-request.js';
import { EarError } from '../../src/errors/errors.js';

test('instructions → system first; a string input → one user message; defaults as vLLM', () => {
  const chat = responsesToChat({ model: 'm', instructions: 'Be brief.', input: 'hi' });
  assert.deepEqual(chat.messages, [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'hi' }]);
  assert.deepEqual(chat.inputMessages, [{ role: 'user', content: 'hi' }]);
  assert.equal(chat.store, true, 'store defaults to true in the protocol');
  assert.equal(chat.stream, false);
  assert.equal(chat.maxTokens, null);
  assert.equal(chat.previousResponseId, null);
  assert.equal(chat.user, null);
  assert.equal(chat.toolChoice, 'auto');
  assert.deepEqual(chat.render, { addGenerationPrompt: true, continueFinalMessage: false, tools: undefined, chatTemplateKwargs: undefined });
  assert.equal(responsesToChat({ input: 'x' }).model, '', 'model may be left out');
});

test('message items: roles and parts (input_text, output_text → text; input_image → image_url)', () => {
  const chat = responsesToChat({
    model: 'm',
    input: [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'Rules.' }] },
      { role: 'user', content: [{ type: 'input_text', text: 'Look:' }, { type: 'input_image', image_url: 'data:image/png;base64,AA', detail: 'auto' }] },
      { type: 'message', role: 'assistant', id: 'msg_1', status: 'completed', content: [{ type: 'output_text', text: 'A cat.', annotations: [] }, { type: 'output_text', text: 'ignored' }] },
      { role: 'user', content: 'And now?' }
    ]
  });
  assert.deepEqual(chat.messages, [
    { role: 'developer', content: [{ type: 'text', text: 'Rules.' }] },
    { role: 'user', content: [{ type: 'text', text: 'Look:' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AA' } }] },
    { role: 'assistant', content: 'A cat.' },
    { role: 'user', content: 'And now?' }
  ]);
});

test('reasoning + message + function_calls fold into one assistant message; function_call_output → tool message', () => {
  const chat = responsesToChat({
    model: 'm',
    input: [
      { role: 'user', content: 'list files' },
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'from summary' }], encrypted_content: 'gAAA' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Running ls.' }] },
      { type: 'function_call', call_id: 'call_1', name: 'shell', arguments: '{"cmd":["ls"]}' },
      { type: 'function_call', call_id: 'call_2', name: 'read', namespace: 'fs', arguments: '{}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'a.txt' },
      { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'contents' }] },
      { type: 'reasoning', content: [{ type: 'reasoning_text', text: 'from content' }], summary: [{ text: 'not this' }] },
      { type: 'function_call', call_id: 'call_3', name: 'shell', arguments: '{}' }
    ]
  });
  assert.deepEqual(chat.messages, [
    { role: 'user', content: 'list files' },
    {
      role: 'assistant',
      reasoning: 'from summary',
      content: 'Running ls.',
      tool_calls: [
        { id: 'call_1', type: 'function', function: { name: 'shell', arguments: '{"cmd":["ls"]}' } },
        { id: 'call_2', type: 'function', function: { name: 'fs__read', arguments: '{}' } }
      ]
    },
    { role: 'tool', content: 'a.txt', tool_call_id: 'call_1' },
    { role: 'tool', content: [{ type: 'text', text: 'contents' }], tool_call_id: 'call_2' },
    { role: 'assistant', reasoning: 'from content', tool_calls: [{ id: 'call_3', type: 'function', function: { name: 'shell', arguments: '{}' } }] }
  ]);
  // A function_call with no assistant message before it starts one; a second reasoning starts a new one.
  const lone = responsesToChat({ input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: '{}' }, { type: 'reasoning', summary: [] }, { type: 'reasoning', summary: [] }] });
  assert.deepEqual(lone.messages, [
    { role: 'assistant', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{}' } }], reasoning: '' },
    { role: 'assistant', reasoning: '' }
  ]);
});

test('function tools (flat) → chat tools; namespace tools flattened; built-in tools left out; other fields', () => {
  const chat = responsesToChat({
    model: 'm',
    input: 'x',
    tools: [
      { type: 'function', name: 'shell', description: 'Run', parameters: { type: 'object', properties: {} }, strict: false },
      { type: 'web_search' },
      { type: 'namespace', name: 'mcp', tools: [{ type: 'function', name: 'get', parameters: {} }] },
      { type: 'custom', name: 'apply_patch' }
    ],
    tool_choice: 'required',
    max_output_tokens: 100,
    previous_response_id: 'resp_1',
    store: false,
    stream: true,
    user: 'u1',
    reasoning: { effort: 'low', summary: 'auto' },
    temperature: 0.2,
    top_p: 0.5,
    stop: 'END'
  });
  assert.deepEqual(chat.render.tools, [
    { type: 'function', function: { name: 'shell', description: 'Run', parameters: { type: 'object', properties: {} }, strict: false } },
    { type: 'function', function: { name: 'mcp__get', parameters: {} } }
  ]);
  assert.deepEqual(chat.render.chatTemplateKwargs, { reasoning_effort: 'low' });
  assert.equal(chat.toolChoice, 'required');
  assert.equal(chat.maxTokens, 100);
  assert.equal(chat.previousResponseId, 'resp_1');
  assert.equal(chat.store, false);
  assert.equal(chat.stream, true);
  assert.equal(chat.user, 'u1');
  assert.equal(chat.temperature, 0.2);
  assert.equal(chat.topP, 0.5);
  assert.deepEqual(chat.stop, ['END']);
  assert.equal(chat.tools.length, 4, 'the request tools as sent, for the response object');
});

test('a last assistant message in progress is continued, not followed by a generation prompt', () => {
  const chat = responsesToChat({ input: [{ role: 'user', content: 'q' }, { type: 'message', role: 'assistant', status: 'in_progress', content: [{ type: 'output_text', text: 'Part' }] }] });
  assert.equal(chat.render.addGenerationPrompt, false);
  assert.equal(chat.render.continueFinalMessage, true);
  assert.equal(chat.continueFinalMessage, true);
});

test('continueConversation: new instructions, old messages without system, previous output texts, then the input', () => {
  const first = responsesToChat({ instructions: 'Old rules.', input: 'Hello' });
  const second = responsesToChat({ instructions: 'New rules.', input: [{ role: 'user', content: 'More' }], previous_response_id: 'resp_1' });
  const output = [
    { type: 'reasoning', id: 'rs_1', summary: [], content: [{ type: 'reasoning_text', text: 'hmm' }] },
    { type: 'message', id: 'msg_1', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text: 'Hi there', annotations: [] }] },
    { type: 'function_call', id: 'fc_1', call_id: 'c1', name: 'f', arguments: '{}' }
  ];
  assert.deepEqual(continueConversation(second, { messages: first.messages, output }), [
    { role: 'system', content: 'New rules.' },
    { role: 'user', content: 'Hello' },
    { role: 'assistant', content: 'Hi there' },
    { role: 'user', content: 'More' }
  ]);
});

test('bad bodies: EAR_ERR_BAD_REQUEST with a message naming the field', () => {
  const cases: Array<[unknown, RegExp]> = [
    ['x', /request body must be a JSON object/],
    [{ model: 'm' }, /"input" is required/],
    [{ input: 5 }, /"input" is required and must be a string or a list/],
    [{ input: 'x', model: 3 }, /"model" must be a string/],
    [{ input: 'x', instructions: [] }, /"instructions" must be a string/],
    [{ input: 'x', max_output_tokens: 0 }, /"max_output_tokens" must be an integer in \[1, /],
    [{ input: 'x', max_output_tokens: 'many' }, /"max_output_tokens" must be an integer/],
    [{ input: 'x', store: 'yes' }, /"store" must be a boolean/],
    [{ input: 'x', previous_response_id: 7 }, /"previous_response_id" must be a string/],
    [{ input: 'x', previous_response_id: 'r', previous_response: {} }, /Cannot set both/],
    [{ input: 'x', tools: [{ name: 'f' }] }, /"tools\[0\]" must be an object with a string "type"/],
    [{ input: 'x', tools: [{ type: 'function' }] }, /"tools\[0\]\.name" is required/],
    [{ input: 'x', prompt: { id: 'p' } }, /prompt template is not supported/],
    [{ input: [1] }, /"input\[0\]" must be an object/],
    [{ input: [{ type: 'item_reference', id: 'x' }] }, /"input\[0\]\.type" "item_reference" is not supported/],
    [{ input: [{ role: 'tool', content: 'x' }] }, /"input\[0\]\.role" must be/],
    [{ input: [{ role: 'user' }] }, /"input\[0\]\.content" is required/],
    [{ input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] }, /"input\[0\]\.content\[0\]\.type" "input_file" is not supported/],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', file_id: 'f' }] }] }, /image_url" must be a URL/],
    [{ input: [{ type: 'function_call', name: 'f', arguments: '{}' }] }, /"input\[0\]\.call_id" is required/],
    [{ input: [{ type: 'function_call_output', call_id: 'c' }] }, /"input\[0\]\.output" is required/]
  ];
  for (const [body, re] of cases) {
    assert.throws(() => responsesToChat(body), (err: unknown) => err instanceof EarError && err.code === 'EAR_ERR_BAD_REQUEST' && re.test(err.message),
      `${JSON.stringify(body)} should fail with ${re}`);
  }
});

test('any JSON value converts or throws EAR_ERR_BAD_REQUEST, never anything else', () => {
  const item = fc.record({
    type: fc.constantFrom('message', 'function_call', 'function_call_output', 'reasoning', 'x'),
    role: fc.constantFrom('user', 'assistant', 'developer', 'x'),
    content: fc.jsonValue(),
    summary: fc.jsonValue(),
    call_id: fc.oneof(fc.string(), fc.jsonValue()),
    name: fc.string(),
    arguments: fc.string(),
    output: fc.jsonValue(),
    status: fc.constantFrom('in_progress', 'completed')
  }, { requiredKeys: [] });
  const body = fc.record({ input: fc.oneof(fc.string(), fc.array(item, { maxLength: 5 }), fc.jsonValue()), tools: fc.jsonValue(), reasoning: fc.jsonValue(), instructions: fc.jsonValue() }, { requiredKeys: [] });
  fc.assert(fc.property(fc.oneof(body, fc.jsonValue()), (v) => {
    try {
      responsesToChat(v);
    } catch (err) {
      assert.ok(err instanceof EarError && err.code === 'EAR_ERR_BAD_REQUEST', String(err));
    }
  }), { numRuns: 3000 });
});
