// anthropicToChat against the chat messages vLLM's Anthropic serving builds (vllm/entrypoints/anthropic/
// serving.py, _convert_anthropic_to_openai_request), written out by reading that code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { anthropicToChat } from '../../src/dialects/anthropic-request.js';
import { pythonJsonDumps } from '../../src/dialects/python-json.js';
import { EarError } from '../../src/errors/errors.js';

const base = { model: 'm', max_tokens: 16 };

test('system as a string, as text blocks (billing header dropped, joined with no separator) and from role "system" messages', () => {
  assert.deepEqual(anthropicToChat({ ...base, system: 'Be brief.', messages: [{ role: 'user', content: 'hi' }] }).messages, [
    { role: 'system', content: 'Be brief.' },
    { role: 'user', content: 'hi' }
  ]);
  const chat = anthropicToChat({
    ...base,
    system: [
      { type: 'text', text: 'x-anthropic-billing-header: cc_version=2.1; cch=abc' },
      { type: 'text', text: 'You are Claude Code.' },
      { type: 'text', text: '' },
      { type: 'text', text: ' Be careful.' }
    ],
    messages: [{ role: 'system', content: [{ type: 'text', text: ' More.' }] }, { role: 'user', content: 'go' }]
  });
  assert.deepEqual(chat.messages, [
    { role: 'system', content: 'You are Claude Code. Be careful. More.' },
    { role: 'user', content: 'go' }
  ]);
  // An empty system adds nothing.
  assert.deepEqual(anthropicToChat({ ...base, system: '', messages: [{ role: 'user', content: 'a' }] }).messages, [{ role: 'user', content: 'a' }]);
});

test('text and image blocks: one text part is a string; several parts (or an image) stay a list; empty text is skipped', () => {
  const chat = anthropicToChat({
    ...base,
    messages: [
      { role: 'user', content: [{ type: 'text', text: '' }, { type: 'text', text: 'only' }] },
      { role: 'assistant', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
      {
        role: 'user',
        content: [
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } },
          { type: 'image', source: { type: 'url', url: 'https://x/y.jpg' } },
          { type: 'image', source: { data: 'BBBB' } },
          { type: 'text', text: 'what is this?' }
        ]
      }
    ]
  });
  assert.deepEqual(chat.messages, [
    { role: 'user', content: 'only' },
    { role: 'assistant', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] },
    {
      role: 'user',
      content: [
        { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } },
        { type: 'image_url', image_url: { url: 'https://x/y.jpg' } },
        { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,BBBB' } },
        { type: 'text', text: 'what is this?' }
      ]
    }
  ]);
});

test('tool_use → assistant tool_calls (arguments as json.dumps), thinking → reasoning, redacted_thinking dropped', () => {
  const chat = anthropicToChat({
    ...base,
    messages: [
      { role: 'user', content: 'list files' },
      {
        role: 'assistant',
        content: [
          { type: 'thinking', thinking: 'I should ', signature: 'sig' },
          { type: 'redacted_thinking', data: 'opaque' },
          { type: 'thinking', thinking: 'call ls.' },
          { type: 'text', text: 'Listing.' },
          { type: 'tool_use', id: 'toolu_1', name: 'Bash', input: { command: 'ls -la', n: 2, é: 'ü' } },
          { type: 'tool_use', name: 'Read', input: {} }
        ]
      }
    ]
  }, { nowMs: 1_700_000_000_999 });
  assert.deepEqual(chat.messages[1], {
    role: 'assistant',
    reasoning: 'I should call ls.',
    tool_calls: [
      { id: 'toolu_1', type: 'function', function: { name: 'Bash', arguments: '{"command": "ls -la", "n": 2, "\\u00e9": "\\u00fc"}' } },
      { id: 'call_1700000000', type: 'function', function: { name: 'Read', arguments: '{}' } }
    ],
    content: 'Listing.'
  });
  // An assistant message with nothing convertible is still sent, with no content.
  assert.deepEqual(anthropicToChat({ ...base, messages: [{ role: 'assistant', content: [{ type: 'redacted_thinking', data: 'x' }] }] }).messages,
    [{ role: 'assistant' }]);
});

test('tool_result in a user message → tool messages before it; images and tool_reference follow; a user message of only results is dropped', () => {
  const chat = anthropicToChat({
    ...base,
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: { c: 'ls' } }, { type: 'tool_use', id: 't2', name: 'Shot', input: {} }] },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'a.txt\nb.txt' },
          {
            type: 'tool_result',
            tool_use_id: 't2',
            content: [
              { type: 'text', text: 'line 1' },
              { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'QQ' } },
              { type: 'text', text: 'line 2' },
              { type: 'tool_reference', tool_name: 'Grep' }
            ]
          },
          { type: 'text', text: 'now summarise' }
        ]
      },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't3', is_error: true }] }
    ]
  });
  assert.deepEqual(chat.messages.slice(2), [
    { role: 'tool', tool_call_id: 't1', content: 'a.txt\nb.txt' },
    { role: 'tool', tool_call_id: 't2', content: 'line 1\nline 2' },
    { role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,QQ' } }] },
    { role: 'tool', tool_call_id: 't2', content: [{ type: 'tool_reference', name: 'Grep' }] },
    { role: 'user', content: 'now summarise' },
    { role: 'tool', tool_call_id: 't3', content: '' }
  ]);
});

test('tool_result inside an assistant message becomes a "Tool result: " text part (Python str of the content)', () => {
  const chat = anthropicToChat({
    ...base,
    messages: [{ role: 'assistant', content: [{ type: 'tool_result', tool_use_id: 'x', content: [{ type: 'text', text: "it's" }] }] }]
  });
  assert.deepEqual(chat.messages, [{ role: 'assistant', content: `Tool result: [{'type': 'text', 'text': "it's"}]` }]);
});

test('tools, tool_choice, sampling fields, metadata.user_id, stream and chat_template_kwargs', () => {
  const chat = anthropicToChat({
    ...base,
    messages: [{ role: 'user', content: 'x' }],
    tools: [
      { name: 'Bash', description: 'Run a command', input_schema: { type: 'object', properties: { c: { type: 'string' } } } },
      { name: 'Noop', input_schema: { properties: {} }, defer_loading: true }
    ],
    stop_sequences: ['END'],
    temperature: 0.5,
    top_p: 0.9,
    top_k: 40,
    metadata: { user_id: 'user_abc' },
    stream: true,
    chat_template_kwargs: { enable_thinking: false }
  });
  assert.deepEqual(chat.render, {
    addGenerationPrompt: true,
    tools: [
      { type: 'function', function: { name: 'Bash', description: 'Run a command', parameters: { type: 'object', properties: { c: { type: 'string' } } }, defer_loading: null } },
      { type: 'function', function: { name: 'Noop', description: null, parameters: { properties: {}, type: 'object' }, defer_loading: true } }
    ],
    chatTemplateKwargs: { enable_thinking: false }
  });
  assert.equal(chat.toolChoice, 'auto', 'tools without tool_choice: auto');
  assert.deepEqual(chat.stopSequences, ['END']);
  assert.equal(chat.temperature, 0.5);
  assert.equal(chat.topP, 0.9);
  assert.equal(chat.topK, 40);
  assert.equal(chat.user, 'user_abc');
  assert.equal(chat.stream, true);
  assert.equal(chat.maxTokens, 16);
  const choice = (tc: unknown): unknown => anthropicToChat({ ...base, messages: [], tool_choice: tc }).toolChoice;
  assert.equal(choice({ type: 'any' }), 'required');
  assert.equal(choice({ type: 'none' }), 'none');
  assert.equal(choice({ type: 'auto' }), 'auto');
  assert.deepEqual(choice({ type: 'tool', name: 'Bash' }), { type: 'function', function: { name: 'Bash' } });
  assert.equal(choice(undefined), null);
  const plain = anthropicToChat({ ...base, messages: [{ role: 'user', content: 'x' }] });
  assert.equal(plain.stream, false);
  assert.equal(plain.user, null);
  assert.equal(plain.render.tools, undefined);
});

test('roles ctx and msg (Claude Code ≥ 2.1.154) are user messages', () => {
  assert.deepEqual(anthropicToChat({ ...base, messages: [{ role: 'ctx', content: 'a' }, { role: 'msg', content: 'b' }] }).messages,
    [{ role: 'user', content: 'a' }, { role: 'user', content: 'b' }]);
});

test('count_tokens bodies need no max_tokens and ignore the sampling fields', () => {
  const chat = anthropicToChat({ model: 'm', messages: [{ role: 'user', content: 'x' }], system: 's' }, { countTokens: true });
  assert.equal(chat.maxTokens, null);
  assert.deepEqual(chat.messages, [{ role: 'system', content: 's' }, { role: 'user', content: 'x' }]);
});

test('bad bodies: EAR_ERR_BAD_REQUEST with a message naming the field', () => {
  const cases: Array<[unknown, RegExp]> = [
    [null, /request body must be a JSON object/],
    [[1], /request body must be a JSON object/],
    [{ max_tokens: 1, messages: [] }, /"model" is required/],
    [{ model: '', max_tokens: 1, messages: [] }, /"model" is required/],
    [{ model: 'm', messages: [] }, /"max_tokens" is required/],
    [{ model: 'm', max_tokens: 0, messages: [] }, /"max_tokens" must be an integer in \[1, /],
    [{ model: 'm', max_tokens: 1.5, messages: [] }, /"max_tokens" must be an integer/],
    [{ model: 'm', max_tokens: 1 }, /"messages" is required/],
    [{ ...base, messages: [{ role: 'tool', content: 'x' }] }, /messages\[0\]\.role/],
    [{ ...base, messages: [{ role: 'user' }] }, /messages\[0\]\.content" is required/],
    [{ ...base, messages: [{ role: 'user', content: 5 }] }, /messages\[0\]\.content" must be a string or a list/],
    [{ ...base, messages: [{ role: 'user', content: [{ type: 'video' }] }] }, /messages\[0\]\.content\[0\]\.type" must be one of/],
    [{ ...base, messages: [{ role: 'user', content: [{ type: 'text', text: 1 }] }] }, /content\[0\]\.text" must be a string/],
    [{ ...base, messages: [{ role: 'user', content: [{ type: 'tool_use', input: [] }] }] }, /content\[0\]\.input" must be an object/],
    [{ ...base, messages: [], system: 3 }, /"system" must be a string or a list/],
    [{ ...base, messages: [], stream: 'yes' }, /"stream" must be a boolean/],
    [{ ...base, messages: [], stop_sequences: [1] }, /"stop_sequences\[0\]" must be a string/],
    [{ ...base, messages: [], temperature: 'hot' }, /"temperature" must be a number/],
    [{ ...base, messages: [], tools: [{ name: 'x' }] }, /tools\[0\]\.input_schema" is required/],
    [{ ...base, messages: [], tools: [{ input_schema: {} }] }, /tools\[0\]\.name" is required/],
    [{ ...base, messages: [], tool_choice: { type: 'tool' } }, /"tool_choice\.name" is required/],
    [{ ...base, messages: [], tool_choice: { type: 'maybe' } }, /"tool_choice\.type" must be/],
    [{ ...base, messages: [], metadata: 'x' }, /"metadata" must be an object/]
  ];
  for (const [body, re] of cases) {
    assert.throws(() => anthropicToChat(body), (err: unknown) => err instanceof EarError && err.code === 'EAR_ERR_BAD_REQUEST' && re.test(err.message),
      `${JSON.stringify(body)} should fail with ${re}`);
  }
});

test('any JSON value converts or throws EAR_ERR_BAD_REQUEST, never anything else', () => {
  const block = fc.record({ type: fc.constantFrom('text', 'image', 'tool_use', 'tool_result', 'thinking', 'redacted_thinking', 'tool_reference', 'x'), text: fc.jsonValue(), content: fc.jsonValue(), input: fc.jsonValue(), source: fc.jsonValue() }, { requiredKeys: ['type'] });
  const message = fc.record({ role: fc.constantFrom('user', 'assistant', 'system', 'ctx', 'x'), content: fc.oneof(fc.string(), fc.array(block, { maxLength: 4 }), fc.jsonValue()) });
  const body = fc.record({ model: fc.oneof(fc.constant('m'), fc.jsonValue()), max_tokens: fc.oneof(fc.integer(), fc.jsonValue()), messages: fc.oneof(fc.array(message, { maxLength: 4 }), fc.jsonValue()), system: fc.jsonValue(), tools: fc.jsonValue(), tool_choice: fc.jsonValue() }, { requiredKeys: [] });
  fc.assert(fc.property(fc.oneof(body, fc.jsonValue()), (v) => {
    try {
      anthropicToChat(v);
    } catch (err) {
      assert.ok(err instanceof EarError && err.code === 'EAR_ERR_BAD_REQUEST', String(err));
    }
  }), { numRuns: 3000 });
});

test('pythonJsonDumps writes what Python json.dumps writes', () => {
  assert.equal(pythonJsonDumps({ a: [1, 2.5, true, null], 'b"': 'x\ny\u0001😀' }), '{"a": [1, 2.5, true, null], "b\\"": "x\\ny\\u0001\\ud83d\\ude00"}');
  assert.equal(pythonJsonDumps(1e-7), '1e-07');
  assert.equal(pythonJsonDumps({}), '{}');
  assert.equal(pythonJsonDumps([]), '[]');
});
