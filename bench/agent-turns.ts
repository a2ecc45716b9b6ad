// Claude Code's turns for the gateway benchmark: a first turn of about 115 KB as Claude Code sends it to
// /v1/messages (system prompt blocks, a few dozen tools with JSON schemas, a user message with reminders), and the
// same turns as the chat completions request vLLM renders from them (src/dialects/anthropic-request.ts), so the
// two APIs are measured on the same prompt. Made up here from repeated text: nothing of Claude Code's own prompt.
import { anthropicToChat } from '../src/dialects/anthropic-request.js';

const SENTENCE = 'When a task needs a file, read it before editing; keep changes small and explain them briefly. ';

function text (bytes: number): string {
  return SENTENCE.repeat(Math.ceil(bytes / SENTENCE.length)).slice(0, bytes);
}

function tools (n: number, descriptionBytes: number): Array<Record<string, unknown>> {
  return Array.from({ length: n }, (_, i) => ({
    name: `tool_${i}`,
    description: text(descriptionBytes),
    input_schema: { type: 'object', properties: { path: { type: 'string', description: 'A path in the repository' }, limit: { type: 'integer' } }, required: ['path'] }
  }));
}

/** The Anthropic bodies of two consecutive turns (the second extends the first by a reply and a tool result). */
export function anthropicTurns (model: string): [string, string] {
  const system = [{ type: 'text', text: 'You are an interactive coding agent.' }, { type: 'text', text: text(24 * 1024) }];
  const first = [{ role: 'user', content: [{ type: 'text', text: `<system-reminder>${text(8 * 1024)}</system-reminder>` }, { type: 'text', text: 'Fix the failing test in src/core.' }] }];
  const second = [...first,
    { role: 'assistant', content: [{ type: 'text', text: 'Reading the test first.' }, { type: 'tool_use', id: 'toolu_01', name: 'tool_0', input: { path: 'test/core.test.ts' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: text(2 * 1024) }] }];
  const base = { model, max_tokens: 32, system, tools: tools(30, 2600) };
  return [JSON.stringify({ ...base, messages: first }), JSON.stringify({ ...base, messages: second })];
}

/** The same turns as chat completions bodies (what vLLM's Anthropic endpoint turns them into). */
export function chatTurns (model: string): [string, string] {
  const [a, b] = anthropicTurns(model).map((s) => {
    const c = anthropicToChat(JSON.parse(s));
    return JSON.stringify({ model, max_tokens: 32, messages: c.messages, tools: c.render.tools, tool_choice: 'auto' });
  });
  return [a, b];
}
