import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { JinjaChatTemplate } from '../../src/tokenize/chat-template.js';
import { createChatTemplate, builtinTemplateSource } from '../../src/tokenize/builtin-templates.js';
import { renderQwen3Direct } from '../../src/tokenize/templates/qwen3-direct.js';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import type { ChatMessage, RenderOptions } from '../../src/tokenize/types.js';

const viaJinja = new JinjaChatTemplate('qwen3', builtinTemplateSource('qwen3'), { eos_token: '<|im_end|>' }, null);
const viaDirect = createChatTemplate('qwen3');

// Texts that hit the template's branches: think tags, wrapped tool responses, leading/trailing newlines, and other
// whitespace next to them (jinja-python-strip.ts gives jinja Python's strip methods, which the direct renderer follows).
const text = fc.oneof(
  fc.string({ maxLength: 12 }),
  fc.constantFrom('', '\n', '\n\nx\n', '<think>\nr\n</think>\n\nA', 'a</think>b</think>\nc', '<think>x<think>y</think>', '</think>',
    '<tool_response>\nout\n</tool_response>', '<tool_response>', '{{x}}'),
  fc.array(fc.constantFrom('<think>', '</think>', '\n', ' ', '\t', 'a', 'é', '<tool_response>', '</tool_response>'), { maxLength: 6 }).map((xs) => xs.join(''))
);
const content = fc.oneof(text, text, fc.constant(null), fc.array(fc.record({ type: fc.constant('text'), text }), { maxLength: 2 }));
const message = fc.record({
  role: fc.constantFrom('system', 'user', 'assistant', 'tool', 'developer'),
  content,
  reasoning: fc.option(text, { nil: undefined })
}, { requiredKeys: ['role', 'content'] });
const kwargs = fc.constantFrom(undefined, {}, { enable_thinking: false }, { enable_thinking: true }, { enable_thinking: 0 });

test('the direct Qwen3 render equals the jinja template on any conversation without tools (property)', () => {
  fc.assert(fc.property(fc.array(message, { minLength: 1, maxLength: 7 }), fc.boolean(), kwargs, fc.constantFrom(undefined, [] as unknown[]), (msgs, gen, kw, tools) => {
    const opts: RenderOptions = { addGenerationPrompt: gen, chatTemplateKwargs: kw, tools };
    assert.notEqual(viaDirect.renderPieces(msgs as ChatMessage[], opts), null);
    assert.equal(viaDirect.render(msgs as ChatMessage[], opts), viaJinja.render(msgs as ChatMessage[], opts));
  }), { numRuns: 600 });
});

test('the qwen3 tokenizer\'s own template (read from its files) gets the direct renderer', () => {
  const t = createTokenizerSync('hf:qwen3').chatTemplate as JinjaChatTemplate;
  assert.notEqual(t.renderPieces([{ role: 'user', content: 'hi' }], { addGenerationPrompt: true }), null);
});

test('tools, tool calls and unknown template kwargs are left to jinja', () => {
  const conv = [{ role: 'user', content: 'x' }];
  assert.equal(renderQwen3Direct(conv, true, [{ type: 'function', function: { name: 'f' } }]), null);
  assert.equal(renderQwen3Direct([{ role: 'assistant', content: '', tool_calls: [{ function: { name: 'f', arguments: {} } }] }], true, undefined), null);
  assert.equal(renderQwen3Direct(conv, true, undefined, { enable_thinking: false, namespace: 1 }), null);
  const withCalls: ChatMessage[] = [{ role: 'user', content: 'x' }, { role: 'assistant', content: '', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }];
  const opts = { addGenerationPrompt: true, tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] };
  assert.equal(viaDirect.render(withCalls, opts), viaJinja.render(withCalls, opts));
  assert.equal(viaDirect.renderPieces(withCalls, opts), null);
});

test('continue_final_message cuts the direct render where jinja\'s is cut', () => {
  const conv: ChatMessage[] = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'The answer is' }];
  const opts = { addGenerationPrompt: false, continueFinalMessage: true };
  assert.equal(viaDirect.render(conv, opts), viaJinja.render(conv, opts));
  assert.equal(viaDirect.renderPieces(conv, opts), null);
});

test('reasoning and content keep their spaces: only newlines are stripped, as Python\'s str.strip(\'\\n\') does', () => {
  const text = viaDirect.render([{ role: 'user', content: 'Q' }, { role: 'assistant', content: '<think>\n r \n</think>\n\n  A' }], { addGenerationPrompt: false });
  assert.equal(text, '<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n r \n</think>\n\n  A<|im_end|>\n');
  // and the jinja render (used when tools are given) agrees
  const tools = { addGenerationPrompt: false, tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] };
  const conv: ChatMessage[] = [{ role: 'user', content: 'Q' }, { role: 'assistant', content: '</think>\n\n  def f():\n' }];
  assert.match(viaJinja.render(conv, tools), /<\/think>\n\n  def f\(\):\n<\|im_end\|>\n$/);
});
