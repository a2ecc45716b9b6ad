// The converted conversations render with a real template (Qwen3's: tools, tool calls, tool responses,
// reasoning), as vLLM would render them, and the prompt shows each converted piece in order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { anthropicToChat } from '../../src/dialects/anthropic-request.js';
import { responsesToChat } from '../../src/dialects/responses-request.js';
import { createTokenizer } from '../../src/tokenize/index.js';

test('an Anthropic tool round trip renders with Qwen3\'s template', async () => {
  const tok = await createTokenizer('hf:qwen3');
  const chat = anthropicToChat({
    model: 'm',
    max_tokens: 64,
    system: [{ type: 'text', text: 'You are a coder.' }],
    tools: [{ name: 'Bash', description: 'Run', input_schema: { properties: { c: { type: 'string' } } } }],
    messages: [
      { role: 'user', content: 'list' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'use ls' }, { type: 'tool_use', id: 't1', name: 'Bash', input: { c: 'ls' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'a.txt' }, { type: 'text', text: 'ok?' }] }
    ]
  });
  const text = tok.chatTemplate.render(chat.messages, chat.render);
  const order = ['<|im_start|>system\nYou are a coder.', '"name": "Bash"', '"defer_loading": null', '<|im_start|>user\nlist<|im_end|>',
    '<tool_call>\n{"name": "Bash", "arguments": {"c": "ls"}}\n</tool_call>', '<tool_response>\na.txt\n</tool_response>',
    '<|im_start|>user\nok?<|im_end|>', '<|im_start|>assistant\n'];
  let at = 0;
  for (const piece of order) {
    const i = text.indexOf(piece, at);
    assert.ok(i >= 0, `${JSON.stringify(piece)} after offset ${at} in:\n${text}`);
    at = i + piece.length;
  }
  assert.ok(text.endsWith('<|im_start|>assistant\n'));
});

test('a Responses function-call round trip renders with Qwen3\'s template', async () => {
  const tok = await createTokenizer('hf:qwen3');
  const chat = responsesToChat({
    model: 'm',
    instructions: 'Be terse.',
    tools: [{ type: 'function', name: 'shell', parameters: { type: 'object', properties: {} } }],
    input: [
      { role: 'user', content: [{ type: 'input_text', text: 'list' }] },
      { type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{"cmd":"ls"}' },
      { type: 'function_call_output', call_id: 'c1', output: 'a.txt' }
    ]
  });
  const text = tok.chatTemplate.render(chat.messages, chat.render);
  const order = ['<|im_start|>system\nBe terse.', '"name": "shell"', '<|im_start|>user\nlist<|im_end|>',
    '<tool_call>\n{"name": "shell", "arguments": {"cmd": "ls"}}\n</tool_call>', '<tool_response>\na.txt\n</tool_response>', '<|im_start|>assistant\n'];
  let at = 0;
  for (const piece of order) {
    const i = text.indexOf(piece, at);
    assert.ok(i >= 0, `${JSON.stringify(piece)} after offset ${at} in:\n${text}`);
    at = i + piece.length;
  }
});
