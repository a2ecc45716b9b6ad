// Rendered prompts compared with literal strings derived by hand from each official template.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createChatTemplate, TokenizeError } from '../../src/tokenize/index.js';
import { detectContentFormat, prepareMessages, toolDicts } from '../../src/tokenize/chat-template.js';
import type { ChatMessage } from '../../src/tokenize/types.js';

const TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Get weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }
  }
};
// json.dumps(tool) in Python (what transformers' tojson gives): ', ' and ': ' separators, of the tool as vLLM
// dumps it from its pydantic model (so "strict": null is there).
const TOOL_JSON = '{"type": "function", "function": {"name": "get_weather", "description": "Get weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}, "strict": null}}';
// json.dumps(tool, indent=4) in Python.
const TOOL_JSON_INDENT4 = '{\n    "type": "function",\n    "function": {\n        "name": "get_weather",\n        "description": "Get weather",\n        "parameters": {\n            "type": "object",\n            "properties": {\n                "city": {\n                    "type": "string"\n                }\n            },\n            "required": [\n                "city"\n            ]\n        },\n        "strict": null\n    }\n}';

const AGENT_TURN: ChatMessage[] = [
  { role: 'system', content: 'You are a bot.' },
  { role: 'user', content: 'Weather in Paris?' },
  { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
  { role: 'tool', tool_call_id: 'c1', content: '{"temp": 21}' },
  { role: 'assistant', content: 'It is 21°C.' },
  { role: 'user', content: [{ type: 'text', text: 'Thanks.' }, { type: 'image_url', image_url: { url: 'x' } }, { type: 'text', text: 'And tomorrow?' }] }
];

test('qwen3: system + user + assistant tool call + tool result + multi-part user, with tools', () => {
  const text = createChatTemplate('qwen3').render(AGENT_TURN, { addGenerationPrompt: true, tools: [TOOL] });
  const expected =
    '<|im_start|>system\nYou are a bot.\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n' +
    'You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n' + TOOL_JSON + '\n</tools>\n\n' +
    'For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n' +
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\nWeather in Paris?<|im_end|>\n' +
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\nIt is 21°C.<|im_end|>\n' +
    '<|im_start|>user\nThanks.\nAnd tomorrow?<|im_end|>\n' +
    '<|im_start|>assistant\n';
  assert.equal(text, expected);
});

test('qwen3: no system message, no tools; consecutive tool results share one user turn', () => {
  const text = createChatTemplate('qwen3').render([
    { role: 'user', content: 'Hi' },
    { role: 'assistant', content: 'Checking.', tool_calls: [
      { type: 'function', function: { name: 'a', arguments: { x: 1 } } },
      { type: 'function', function: { name: 'b', arguments: 'not json' } }
    ] },
    { role: 'tool', content: 'A' },
    { role: 'tool', content: [{ type: 'text', text: 'B1' }, { type: 'text', text: 'B2' }] }
  ], { addGenerationPrompt: true });
  assert.equal(text,
    '<|im_start|>user\nHi<|im_end|>\n' +
    '<|im_start|>assistant\nChecking.\n<tool_call>\n{"name": "a", "arguments": {"x": 1}}\n</tool_call>\n<tool_call>\n{"name": "b", "arguments": {}}\n</tool_call><|im_end|>\n' +
    '<|im_start|>user\n<tool_response>\nA\n</tool_response>\n<tool_response>\nB1\nB2\n</tool_response><|im_end|>\n' +
    '<|im_start|>assistant\n');
});

test('qwen3: enable_thinking=false adds an empty think block to the generation prompt', () => {
  const t = createChatTemplate('qwen3');
  const msgs: ChatMessage[] = [{ role: 'user', content: 'Hi' }];
  assert.equal(t.render(msgs, { addGenerationPrompt: true, chatTemplateKwargs: { enable_thinking: false } }),
    '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  assert.equal(t.render(msgs, { addGenerationPrompt: true, chatTemplateKwargs: { enable_thinking: true } }),
    '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
  assert.equal(t.render(msgs, { addGenerationPrompt: false }), '<|im_start|>user\nHi<|im_end|>\n');
});

test('qwen3: reasoning after the last query is kept in a think block, earlier reasoning is dropped', () => {
  const t = createChatTemplate('qwen3');
  const text = t.render([
    { role: 'user', content: 'Q1' },
    { role: 'assistant', content: '<think>\nold thoughts\n</think>\n\nA1' },
    { role: 'user', content: 'Q2' },
    { role: 'assistant', content: 'A2', reasoning: 'new thoughts' }
  ], { addGenerationPrompt: false });
  assert.equal(text,
    '<|im_start|>user\nQ1<|im_end|>\n' +
    '<|im_start|>assistant\nA1<|im_end|>\n' +
    '<|im_start|>user\nQ2<|im_end|>\n' +
    '<|im_start|>assistant\n<think>\nnew thoughts\n</think>\n\nA2<|im_end|>\n');
});

test('llama3.1: default system preamble with its fixed dates, system message trimmed into it', () => {
  const t = createChatTemplate('llama3.1');
  assert.equal(t.render([{ role: 'system', content: ' You are a bot. ' }, { role: 'user', content: 'Hi\n' }], { addGenerationPrompt: true }),
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n' +
    'You are a bot.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
  // No system message: the preamble is still there; date_string is a template kwarg.
  assert.equal(t.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false, chatTemplateKwargs: { date_string: '22 Nov 2026' } }),
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 22 Nov 2026\n\n' +
    '<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>');
});

test('llama3.1: tools in the first user message, one tool call, JSON-quoted tool result under ipython', () => {
  const text = createChatTemplate('llama3.1').render([
    { role: 'user', content: 'Weather in Paris?' },
    { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } }] },
    { role: 'tool', tool_call_id: 'c1', content: '{"temp": 21}' }
  ], { addGenerationPrompt: true, tools: [TOOL] });
  assert.equal(text,
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>' +
    '<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for a function call with its proper arguments that best answers the given prompt.\n\n' +
    'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.Do not use variables.\n\n' +
    TOOL_JSON_INDENT4 + '\n\nWeather in Paris?<|eot_id|>' +
    '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}<|eot_id|>' +
    '<|start_header_id|>ipython<|end_header_id|>\n\n"{\\"temp\\": 21}"<|eot_id|>' +
    '<|start_header_id|>assistant<|end_header_id|>\n\n');
});

test('llama3.1: two tool calls in one message is the template\'s own error', () => {
  const call = { type: 'function', function: { name: 'f', arguments: '{}' } };
  assert.throws(() => createChatTemplate('llama3.1').render([{ role: 'user', content: 'x' }, { role: 'assistant', content: '', tool_calls: [call, call] }], { addGenerationPrompt: false }),
    (e: unknown) => e instanceof TokenizeError && e.code === 'EAR_ERR_CHAT_TEMPLATE' && /single tool-calls/.test(e.message));
});

test('llama3: bos, headers, trimmed content, no default system message', () => {
  assert.equal(createChatTemplate('llama3').render([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: ' Hi ' }], { addGenerationPrompt: true }),
    '<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
});

test('chatml (EAR\'s template for tiktoken and character)', () => {
  const t = createChatTemplate('chatml');
  assert.equal(t.render([{ role: 'system', content: 'S' }, { role: 'user', content: 'U' }, { role: 'assistant', content: 'A' }], { addGenerationPrompt: true }),
    '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>assistant\n');
  assert.equal(t.render([{ role: 'user', content: 'U' }, { role: 'assistant', content: '', tool_calls: [{ type: 'function', function: { name: 'f', arguments: '{"a": [1, 2]}' } }] }], { addGenerationPrompt: false, tools: [{ name: 'f' }] }),
    '<|im_start|>system\n# Tools\n<tools>\n{"name": "f"}\n</tools><|im_end|>\n<|im_start|>user\nU<|im_end|>\n' +
    '<|im_start|>assistant\n\n<tool_call>\n{"name": "f", "arguments": {"a": [1, 2]}}\n</tool_call><|im_end|>\n');
});

test('continue_final_message cuts after the final assistant text', () => {
  const t = createChatTemplate('qwen3');
  assert.equal(t.render([{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello, ' }], { addGenerationPrompt: false, continueFinalMessage: true }),
    // the template puts an (empty) think block before the content of an assistant turn after the last query
    '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello, ');
  assert.throws(() => t.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: true, continueFinalMessage: true }), TokenizeError);
  assert.throws(() => t.render([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false, continueFinalMessage: true }), TokenizeError);
});

test('custom jinja source gets messages, kwargs and special tokens; content format follows the template', () => {
  const src = '{{ bos_token }}{% for m in messages %}{% for p in m.content %}[{{ p.text }}]{% endfor %}{% endfor %}{{ greeting }}';
  assert.equal(detectContentFormat(src), 'openai');
  assert.equal(detectContentFormat('{% for message in messages %}{{ message.content }}{% endfor %}'), 'string');
  const t = createChatTemplate(src, { bos_token: '<s>' });
  assert.equal(t.render([{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, { role: 'user', content: 'c' }],
    { addGenerationPrompt: false, chatTemplateKwargs: { greeting: '!' } }), '<s>[a][b][c]!');
});

test('bad input gets clear errors', () => {
  const t = createChatTemplate('qwen3');
  assert.throws(() => t.render([], { addGenerationPrompt: true }), /non-empty/);
  assert.throws(() => t.render([{ content: 'x' } as unknown as ChatMessage], { addGenerationPrompt: true }), /role must be a string/);
  assert.throws(() => t.render([{ role: 'user', content: 5 as unknown as string }], { addGenerationPrompt: true }), /content must be/);
  assert.throws(() => createChatTemplate('llama2'), /valid names: chatml, qwen3, llama3, llama3.1/);
  assert.throws(() => createChatTemplate('{% for %}'), (e: unknown) => e instanceof TokenizeError && e.code === 'EAR_ERR_CHAT_TEMPLATE');
});

test('tools are dumped as vLLM\'s pydantic models do: declared fields first, absent ones null, extras after', () => {
  assert.deepEqual(JSON.stringify(toolDicts([
    { function: { parameters: { b: 1, a: 2 }, name: 'f', x: 1 }, type: 'function', y: 2 },
    { type: 'custom', custom: { name: 'c' } }
  ])), JSON.stringify([
    { type: 'function', function: { name: 'f', description: null, parameters: { b: 1, a: 2 }, strict: null, x: 1 }, y: 2 },
    { type: 'custom', custom: { name: 'c' } }
  ]));
});

test('prepareMessages follows vLLM: null content is "", unknown keys dropped, empty tool_calls dropped', () => {
  const out = prepareMessages([{ role: 'assistant', content: null, tool_calls: [], extra: 1, name: 'bob' }], 'string');
  assert.deepEqual(out, [{ role: 'assistant', content: '', name: 'bob' }]);
  const input: ChatMessage[] = [{ role: 'assistant', content: 'x', tool_calls: [{ function: { name: 'f', arguments: '{"a":1}' } }] }];
  prepareMessages(input, 'string');
  assert.equal((input[0].tool_calls?.[0] as { function: { arguments: unknown } }).function.arguments, '{"a":1}', 'the caller\'s messages are not mutated');
});
