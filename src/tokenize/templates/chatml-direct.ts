// EAR's ChatML template (chatml.ts) rendered without the template engine, for the case that makes up nearly all
// traffic: no tools and no tool calls. Jinja costs ~25 µs a request even for a short chat, the largest single
// item on the gateway's profile with the default `character` tokenizer. Anything else returns null and goes
// through jinja; a property test holds the two to the same output.
import type { RenderedPieces } from '../chat-template.js';

/** `conversation` as prepareMessages leaves it (content a string: the template's content format is 'string'). */
export function renderChatmlDirect (conversation: readonly Record<string, unknown>[], addGenerationPrompt: boolean, tools: unknown): RenderedPieces | null {
  if (tools !== undefined && tools !== null && !(Array.isArray(tools) && tools.length === 0)) return null;
  const pieces: string[] = new Array(conversation.length);
  for (let i = 0; i < conversation.length; i++) {
    const m = conversation[i];
    const calls = m.tool_calls;
    if (Array.isArray(calls) && calls.length > 0) return null;
    if (typeof m.role !== 'string' || typeof m.content !== 'string') return null;
    pieces[i] = `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`;
  }
  // A message's piece depends on nothing but the message: every context is 0.
  return { pieces, contexts: new Array<number>(conversation.length).fill(0), end: addGenerationPrompt ? '<|im_start|>assistant\n' : '' };
}
