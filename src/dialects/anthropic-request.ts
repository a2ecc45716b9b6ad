// An Anthropic Messages body (POST /v1/messages, /v1/messages/count_tokens: Claude Code's API) validated as
// vLLM's pydantic protocol does and converted to the chat request vLLM's Anthropic serving builds from it
// (vllm/entrypoints/anthropic/{protocol,serving}.py), so EAR renders the prompt the engine will:
//   system (string or text blocks, and any role "system" message's text, joined with no separator; blocks that
//   start with Claude Code's "x-anthropic-billing-header" dropped) → one system message first;
//   text → text part (empty text skipped); image → image_url part (a data: URI for base64 sources);
//   thinking → the message's `reasoning`; redacted_thinking, tool_reference → nothing;
//   tool_use → assistant tool_calls (arguments as Python's json.dumps of input);
//   tool_result in a user message → a `tool` message before that user message (text blocks joined by "\n"),
//   then a user message with its images, then a tool message with its tool_reference names;
//   tool_result elsewhere → a text part "Tool result: ...";
//   a single text part becomes plain string content; a user message left with no content is dropped;
//   tools → function tools (input_schema as parameters, "type":"object" added when missing);
//   tool_choice auto/any/none/tool → "auto"/"required"/"none"/named function ("auto" when tools are given
//   without one). Pure: no I/O; the clock only through `nowMs` (vLLM names an id-less tool_use call_<seconds>).
import type { ChatMessage, ContentPart } from '../tokenize/types.js';
import {
  bad, checkSampling, isObject, MAX_TOKEN_COUNT, optArray, optBool, optInt, optIntIn, optNumber, optObject, optString, optStringList,
  requireObject, shown
} from './chat-request.js';
import type { ChatRequest, Doc } from './chat-request.js';
import { pythonJsonDumps } from './python-json.js';

/** tool_choice in OpenAI chat form. */
export type ChatToolChoice = 'auto' | 'required' | 'none' | { type: 'function'; function: { name: string } };

export interface AnthropicChat extends ChatRequest {
  /** The caller's max_tokens (required and positive on /v1/messages; null for count_tokens). */
  maxTokens: number | null;
  stopSequences: string[];
  temperature: number | null;
  topP: number | null;
  topK: number | null;
  toolChoice: ChatToolChoice | null;
  /** metadata as sent (vLLM ignores it; metadata.user_id is `user`). */
  metadata: Doc | null;
  kvTransferParams: Doc | null;
}

export interface AnthropicOptions {
  /** POST /v1/messages/count_tokens: max_tokens and the sampling fields are not part of that body. */
  countTokens?: boolean;
  /** The time that names a tool_use block sent without an id (vLLM: call_<seconds>). */
  nowMs?: number;
}

const BLOCK_TYPES = new Set(['text', 'image', 'tool_use', 'tool_result', 'tool_reference', 'thinking', 'redacted_thinking']);
// Claude Code ≥ 2.1.154 sends roles outside the spec; vLLM maps them to user.
const ROLE_ALIASES: Record<string, string> = { ctx: 'user', msg: 'user' };
const ROLES = new Set(['user', 'assistant', 'system']);
const BILLING_HEADER = 'x-anthropic-billing-header';

/** One content block, checked as AnthropicContentBlock's fields are typed. */
function checkBlock (v: unknown, where: string): Doc {
  if (!isObject(v)) throw bad(`"${where}" must be a content block object, got ${shown(v)}`);
  if (typeof v.type !== 'string' || !BLOCK_TYPES.has(v.type)) {
    throw bad(`"${where}.type" must be one of ${[...BLOCK_TYPES].join(', ')}, got ${shown(v.type)}`);
  }
  const w = `${where}.`;
  for (const k of ['text', 'id', 'tool_use_id', 'name', 'tool_name', 'thinking', 'signature', 'data']) optString(v, k, w);
  optObject(v, 'source', w);
  optObject(v, 'input', w);
  optBool(v, 'is_error', w);
  const c = v.content;
  if (c !== undefined && c !== null && typeof c !== 'string') {
    if (!Array.isArray(c)) throw bad(`"${where}.content" must be a string or a list of blocks, got ${shown(c)}`);
    for (const [i, item] of c.entries()) if (!isObject(item)) throw bad(`"${where}.content[${i}]" must be an object, got ${shown(item)}`);
  }
  return v;
}

function checkContent (v: unknown, where: string): string | Doc[] {
  if (typeof v === 'string') return v;
  if (!Array.isArray(v)) throw bad(`"${where}" must be a string or a list of content blocks, got ${shown(v)}`);
  return v.map((b, i) => checkBlock(b, `${where}[${i}]`));
}

interface Message { role: string; content: string | Doc[] }

function checkMessages (b: Doc): Message[] {
  const list = b.messages;
  if (!Array.isArray(list)) throw bad('"messages" is required and must be a list of messages');
  return list.map((m, i) => {
    if (!isObject(m)) throw bad(`"messages[${i}]" must be an object, got ${shown(m)}`);
    const raw = m.role;
    const role = typeof raw === 'string' ? ROLE_ALIASES[raw] ?? raw : raw;
    if (typeof role !== 'string' || !ROLES.has(role)) throw bad(`"messages[${i}].role" must be "user", "assistant" or "system", got ${shown(raw)}`);
    if (m.content === undefined) throw bad(`"messages[${i}].content" is required`);
    return { role, content: checkContent(m.content, `messages[${i}].content`) };
  });
}

/** vLLM's data URI (base64, the default) or the URL of an image source. */
export function imageSourceUrl (source: Doc): string {
  if (source.type === 'url') return typeof source.url === 'string' ? source.url : '';
  const media = typeof source.media_type === 'string' ? source.media_type : 'image/jpeg';
  const data = typeof source.data === 'string' ? source.data : '';
  return `data:${media};base64,${data}`;
}

function systemText (b: Doc, messages: Message[]): string | null {
  const parts: string[] = [];
  const take = (content: string | Doc[]): void => {
    if (typeof content === 'string') { parts.push(content); return; }
    for (const block of content) {
      const t = block.text;
      if (block.type === 'text' && typeof t === 'string' && t !== '' && !t.startsWith(BILLING_HEADER)) parts.push(t);
    }
  };
  const sys = b.system;
  // vLLM tests `if system:` — an empty string or list adds nothing.
  if (sys !== undefined && sys !== null && sys !== '') take(checkContent(sys, 'system'));
  for (const m of messages) if (m.role === 'system') take(m.content);
  return parts.length > 0 ? parts.join('') : null;
}

function toolResultMessages (block: Doc, out: ChatMessage[]): void {
  const id = typeof block.tool_use_id === 'string' ? block.tool_use_id : '';
  let text = '';
  const images: string[] = [];
  const refs: Array<{ type: string; name: string }> = [];
  const c = block.content;
  if (typeof c === 'string') text = c;
  else if (Array.isArray(c)) {
    const texts: string[] = [];
    for (const item of c as Doc[]) {
      if (item.type === 'text') texts.push(typeof item.text === 'string' ? item.text : '');
      else if (item.type === 'image') {
        const url = imageSourceUrl(isObject(item.source) ? item.source : {});
        if (url !== '') images.push(url);
      } else if (item.type === 'tool_reference') {
        const name = item.tool_name ?? item.name;
        if (typeof name === 'string' && name !== '') refs.push({ type: 'tool_reference', name });
      }
    }
    text = texts.join('\n');
  }
  out.push({ role: 'tool', tool_call_id: id, content: text });
  if (images.length > 0) out.push({ role: 'user', content: images.map((url) => ({ type: 'image_url', image_url: { url } })) });
  if (refs.length > 0) out.push({ role: 'tool', tool_call_id: id, content: refs as ContentPart[] });
}

/** Python's str() of a tool_result's content inside an assistant message (vLLM's "Tool result: ..." text). */
function pythonStr (c: unknown): string {
  if (c === undefined || c === null || c === '' || (Array.isArray(c) && c.length === 0)) return '';
  if (typeof c === 'string') return c;
  return pythonRepr(c);
}

// repr(str): single quotes unless the text holds ' and no ", backslash escapes for \\, the quote, \n \r \t and
// other control characters (printable non-ASCII stays as it is).
function pythonStrRepr (s: string): string {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = q;
  for (const ch of s) {
    const c = ch.codePointAt(0)!;
    if (ch === '\\' || ch === q) out += `\\${ch}`;
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (ch === '\t') out += '\\t';
    else if (c < 0x20 || c === 0x7f) out += `\\x${c.toString(16).padStart(2, '0')}`;
    else out += ch;
  }
  return out + q;
}

function pythonRepr (v: unknown): string {
  if (v === null || v === undefined) return 'None';
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') return pythonJsonDumps(v);
  if (typeof v === 'string') return pythonStrRepr(v);
  if (Array.isArray(v)) return `[${v.map(pythonRepr).join(', ')}]`;
  return `{${Object.entries(v as Doc).map(([k, x]) => `${pythonRepr(k)}: ${pythonRepr(x)}`).join(', ')}}`;
}

function convertMessages (messages: Message[], out: ChatMessage[], nowMs: number): void {
  for (const msg of messages) {
    if (msg.role === 'system') continue;
    const chat: ChatMessage = { role: msg.role };
    if (typeof msg.content === 'string') {
      chat.content = msg.content;
    } else {
      const parts: ContentPart[] = [];
      const toolCalls: unknown[] = [];
      const reasoning: string[] = [];
      for (const block of msg.content) {
        switch (block.type) {
          case 'text':
            if (typeof block.text === 'string' && block.text !== '') parts.push({ type: 'text', text: block.text });
            break;
          case 'image':
            if (isObject(block.source)) parts.push({ type: 'image_url', image_url: { url: imageSourceUrl(block.source) } });
            break;
          case 'thinking':
            if (typeof block.thinking === 'string') reasoning.push(block.thinking);
            break;
          case 'tool_use':
            toolCalls.push({
              id: typeof block.id === 'string' && block.id !== '' ? block.id : `call_${Math.floor(nowMs / 1000)}`,
              type: 'function',
              function: { name: typeof block.name === 'string' ? block.name : '', arguments: pythonJsonDumps(isObject(block.input) ? block.input : {}) }
            });
            break;
          case 'tool_result':
            if (msg.role === 'user') toolResultMessages(block, out);
            else parts.push({ type: 'text', text: `Tool result: ${pythonStr(block.content)}` });
            break;
          default: // redacted_thinking (opaque), tool_reference (expanded inside tool_result): nothing
        }
      }
      if (reasoning.length > 0) chat.reasoning = reasoning.join('');
      if (toolCalls.length > 0) chat.tool_calls = toolCalls;
      if (parts.length === 1 && parts[0].type === 'text') chat.content = parts[0].text;
      else if (parts.length > 0) chat.content = parts;
    }
    // A user message whose blocks all became tool messages is not sent on its own.
    if (msg.role === 'user' && !('content' in chat)) continue;
    out.push(chat);
  }
}

function convertTools (b: Doc): unknown[] | null {
  const tools = optArray(b, 'tools', '');
  if (tools === null) return null;
  return tools.map((t, i) => {
    if (!isObject(t)) throw bad(`"tools[${i}]" must be an object, got ${shown(t)}`);
    if (typeof t.name !== 'string') throw bad(`"tools[${i}].name" is required and must be a string`);
    const w = `tools[${i}].`;
    const description = optString(t, 'description', w);
    optBool(t, 'strict', w);
    const deferLoading = optBool(t, 'defer_loading', w);
    if (!isObject(t.input_schema)) throw bad(`"tools[${i}].input_schema" is required and must be an object`);
    const parameters = 'type' in t.input_schema ? t.input_schema : { ...t.input_schema, type: 'object' };
    return { type: 'function', function: { name: t.name, description, parameters, defer_loading: deferLoading } };
  });
}

function convertToolChoice (b: Doc): ChatToolChoice | null {
  const tc = optObject(b, 'tool_choice', '');
  if (tc === null) return null;
  const name = optString(tc, 'name', 'tool_choice.');
  switch (tc.type) {
    case 'auto': return 'auto';
    case 'any': return 'required';
    case 'none': return 'none';
    case 'tool':
      if (name === null || name === '') throw bad('"tool_choice.name" is required when tool_choice.type is "tool"');
      return { type: 'function', function: { name } };
    default:
      throw bad(`"tool_choice.type" must be "auto", "any", "tool" or "none", got ${shown(tc.type)}`);
  }
}

/** An Anthropic Messages body → the chat request vLLM runs for it. Throws EAR_ERR_BAD_REQUEST on a bad body. */
export function anthropicToChat (doc: unknown, opts: AnthropicOptions = {}): AnthropicChat {
  const b = requireObject(doc, 'request body');
  const countTokens = opts.countTokens === true;
  if (typeof b.model !== 'string' || b.model === '') throw bad('"model" is required and must be a non-empty string');
  const messages = checkMessages(b);
  let maxTokens: number | null = null;
  if (!countTokens) {
    if (b.max_tokens === undefined || b.max_tokens === null) throw bad('"max_tokens" is required');
    maxTokens = optIntIn(b, 'max_tokens', '', 1, MAX_TOKEN_COUNT);
  }
  const stream = countTokens ? false : optBool(b, 'stream', '') ?? false;
  const stopSequences = countTokens ? [] : optStringList(b, 'stop_sequences', '') ?? [];
  if (!countTokens) checkSampling(b);
  const temperature = countTokens ? null : optNumber(b, 'temperature', '');
  const topP = countTokens ? null : optNumber(b, 'top_p', '');
  const topK = countTokens ? null : optInt(b, 'top_k', '');
  const metadata = countTokens ? null : optObject(b, 'metadata', '');
  const kvTransferParams = countTokens ? null : optObject(b, 'kv_transfer_params', '');
  const kwargs = optObject(b, 'chat_template_kwargs', '');
  const userId = metadata?.user_id;

  const out: ChatMessage[] = [];
  const system = systemText(b, messages);
  if (system !== null) out.push({ role: 'system', content: system });
  convertMessages(messages, out, opts.nowMs ?? 0);
  let toolChoice = convertToolChoice(b);
  const tools = convertTools(b);
  if (tools !== null && toolChoice === null) toolChoice = 'auto';

  return {
    model: b.model,
    stream,
    messages: out,
    render: {
      addGenerationPrompt: true,
      tools: tools ?? undefined,
      chatTemplateKwargs: kwargs ?? undefined
    },
    maxTokens,
    user: typeof userId === 'string' && userId !== '' ? userId : null,
    stopSequences,
    temperature,
    topP,
    topK,
    toolChoice,
    metadata,
    kvTransferParams
  };
}
