import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { JinjaChatTemplate } from '../../src/tokenize/chat-template.js';
import { createChatTemplate } from '../../src/tokenize/builtin-templates.js';
import { CHATML_TEMPLATE } from '../../src/tokenize/templates/chatml.js';
import { renderChatmlDirect } from '../../src/tokenize/templates/chatml-direct.js';
import type { ChatMessage } from '../../src/tokenize/types.js';

const viaJinja = new JinjaChatTemplate('chatml', CHATML_TEMPLATE, {}, null);
const viaDirect = createChatTemplate('chatml');

const text = fc.oneof(fc.string(), fc.string({ unit: 'grapheme', maxLength: 40 }), fc.constantFrom('', '<|im_end|>', '{{ x }}', '{% if %}', '\n\n', 'a\r\nb'));
const content = fc.oneof(
  text,
  fc.constant(null),
  fc.array(fc.oneof(fc.record({ type: fc.constant('text'), text }), fc.record({ type: fc.constant('image_url'), image_url: fc.record({ url: fc.string() }) })), { maxLength: 3 })
);
const message = fc.record({ role: fc.oneof(fc.constantFrom('system', 'user', 'assistant', 'tool'), fc.string({ minLength: 1, maxLength: 8 })), content });

test('the direct ChatML render equals the jinja template on any conversation without tools (property)', () => {
  fc.assert(fc.property(fc.array(message, { minLength: 1, maxLength: 8 }), fc.boolean(), fc.constantFrom(undefined, [] as unknown[]), (msgs, gen, tools) => {
    const conv = msgs as ChatMessage[];
    assert.equal(viaDirect.render(conv, { addGenerationPrompt: gen, tools }), viaJinja.render(conv, { addGenerationPrompt: gen, tools }));
  }), { numRuns: 400 });
});

test('continue_final_message cuts the direct render where jinja\'s is cut', () => {
  const conv: ChatMessage[] = [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'The answer is' }];
  assert.equal(viaDirect.render(conv, { addGenerationPrompt: false, continueFinalMessage: true }), viaJinja.render(conv, { addGenerationPrompt: false, continueFinalMessage: true }));
});

test('tools or tool calls are left to jinja', () => {
  const conv = [{ role: 'user', content: 'x' }];
  assert.equal(renderChatmlDirect(conv, true, [{ type: 'function', function: { name: 'f' } }]), null);
  assert.equal(renderChatmlDirect([{ role: 'assistant', content: '', tool_calls: [{ function: { name: 'f', arguments: {} } }] }], true, undefined), null);
  const withCalls: ChatMessage[] = [{ role: 'user', content: 'x' }, { role: 'assistant', content: '', tool_calls: [{ id: 'c', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }];
  const tools = [{ type: 'function', function: { name: 'f', parameters: {} } }];
  assert.equal(viaDirect.render(withCalls, { addGenerationPrompt: true, tools }), viaJinja.render(withCalls, { addGenerationPrompt: true, tools }));
});
