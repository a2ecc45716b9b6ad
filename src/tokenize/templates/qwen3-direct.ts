// Qwen3's own chat template (tokenizer_config.json of Qwen/Qwen3-*) rendered without the template engine when
// there are no tools and no tool calls: jinja takes ~0.6 ms for a 35k-token chat, about what encoding a 2k-token
// turn costs. The code follows the template line by line; anything else returns null and goes through jinja,
// and a property test holds the two to the same output.
import type { RenderedPieces } from '../chat-template.js';

// What a message's piece depends on besides the message itself (RenderedPieces.contexts), per role: only what
// the template reads for that role, so appending messages leaves earlier contexts as they were where it can.
const AFTER_LAST_QUERY = 1; // assistant: after the last user query (its reasoning is shown)...
const LAST = 2; //             ... and it is the last message
const OPENS = 4; // tool: first of a run of tool messages (opens the user turn)
const CLOSES = 8; // tool: last of a run (closes it)

/** Python's str.strip family with a set of characters, as the template calls them ('\n' only here). */
function lstripNl (s: string): string {
  let i = 0;
  while (i < s.length && s.charCodeAt(i) === 10) i++;
  return i === 0 ? s : s.slice(i);
}
function rstripNl (s: string): string {
  let j = s.length;
  while (j > 0 && s.charCodeAt(j - 1) === 10) j--;
  return j === s.length ? s : s.slice(0, j);
}

/** The template's only chat_template_kwargs is enable_thinking; any other name could shadow one of its globals. */
function kwargsSupported (kwargs: Record<string, unknown> | undefined): boolean {
  if (kwargs === undefined) return true;
  for (const k in kwargs) if (k !== 'enable_thinking') return false;
  return true;
}

/** `conversation` as prepareMessages leaves it (content a string: the template's content format is 'string'). */
export function renderQwen3Direct (conversation: readonly Record<string, unknown>[], addGenerationPrompt: boolean, tools: unknown,
  kwargs?: Record<string, unknown>): RenderedPieces | null {
  if (tools !== undefined && tools !== null && !(Array.isArray(tools) && tools.length === 0)) return null;
  if (!kwargsSupported(kwargs)) return null;
  const n = conversation.length;
  for (const m of conversation) {
    if (m.tool_calls !== undefined || typeof m.role !== 'string' || typeof m.content !== 'string') return null;
    if (m.reasoning_content !== undefined && typeof m.reasoning_content !== 'string') return null;
  }
  // The last user message that is not a tool response wrapped as one (the template's ns.last_query_index).
  let lastQuery = n - 1;
  for (let i = n - 1; i >= 0; i--) {
    const c = conversation[i].content as string;
    if (conversation[i].role === 'user' && !(c.startsWith('<tool_response>') && c.endsWith('</tool_response>'))) {
      lastQuery = i;
      break;
    }
  }
  const pieces: string[] = new Array(n);
  const contexts: number[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const m = conversation[i];
    const role = m.role as string;
    const content = m.content as string;
    contexts[i] = 0;
    // A leading system message is rendered before the loop, a later one in it: the same text either way.
    if (role === 'user' || role === 'system') pieces[i] = `<|im_start|>${role}\n${content}<|im_end|>\n`;
    else if (role === 'assistant') {
      const after = i > lastQuery;
      contexts[i] = after ? AFTER_LAST_QUERY | (i === n - 1 ? LAST : 0) : 0;
      pieces[i] = assistantPiece(content, m.reasoning_content as string | undefined, after, i === n - 1);
    } else if (role === 'tool') {
      const opens = i === 0 || conversation[i - 1].role !== 'tool';
      const closes = i === n - 1 || conversation[i + 1].role !== 'tool';
      contexts[i] = (opens ? OPENS : 0) | (closes ? CLOSES : 0);
      pieces[i] = `${opens ? '<|im_start|>user' : ''}\n<tool_response>\n${content}\n</tool_response>${closes ? '<|im_end|>\n' : ''}`;
    } else pieces[i] = '';
  }
  let end = '';
  if (addGenerationPrompt) end = kwargs?.enable_thinking === false ? '<|im_start|>assistant\n<think>\n\n</think>\n\n' : '<|im_start|>assistant\n';
  return { pieces, contexts, end };
}

function assistantPiece (message: string, reasoningField: string | undefined, afterLastQuery: boolean, last: boolean): string {
  let content = message;
  let reasoning = '';
  if (reasoningField !== undefined) reasoning = reasoningField;
  else if (message.includes('</think>')) {
    const parts = message.split('</think>');
    content = lstripNl(parts[parts.length - 1]);
    const before = rstripNl(parts[0]).split('<think>');
    reasoning = lstripNl(before[before.length - 1]);
  }
  if (afterLastQuery && (last || reasoning !== '')) {
    return `<|im_start|>assistant\n<think>\n${rstripNl(lstripNl(reasoning))}\n</think>\n\n${lstripNl(content)}<|im_end|>\n`;
  }
  return `<|im_start|>assistant\n${content}<|im_end|>\n`;
}
