// An OpenAI Responses body (POST /v1/responses: Codex CLI's API) validated and converted to the chat request
// vLLM's Responses serving builds from it for a non-Harmony model (vllm/entrypoints/openai/responses/
// {protocol,utils,serving}.py, construct_input_messages), so EAR renders the prompt the engine will:
//   instructions → a system message first; input as a string → one user message;
//   input items: message (role user/system/developer) → that message, its parts input_text/output_text → text,
//   input_image → image_url; an assistant message → {role assistant, content: the first part's text};
//   reasoning → `reasoning` (content[0].text, else summary[0].text); function_call → an assistant tool call;
//   an assistant message, reasoning or function_call folds into the assistant message just before it when that
//   one has no such field yet (vLLM builds one chat message from reasoning + text + calls);
//   function_call_output → a tool message (tool_call_id = call_id);
//   function tools (Responses' flat form) → chat function tools; other tool types are not templated.
// previous_response_id is returned, not resolved: the caller looks the response up and builds the full
// conversation with `continueConversation`. Pure: no I/O, no clock.
import type { ChatMessage, ContentPart } from '../tokenize/types.js';
import {
  bad, checkSampling, isObject, MAX_TOKEN_COUNT, optArray, optBool, optInt, optIntIn, optNumber, optObject, optString, optStringList,
  requireObject, shown
} from './chat-request.js';
import type { ChatRequest, Doc } from './chat-request.js';

export interface ResponsesChat extends ChatRequest {
  /** `model` may be left out of a Responses body (vLLM then serves its default model): '' here. */
  model: string;
  /** The chat messages of this request alone: the system message from `instructions`, then the input's. */
  messages: ChatMessage[];
  /** The input's messages without the instructions (what continueConversation appends after the history). */
  inputMessages: ChatMessage[];
  instructions: string | null;
  previousResponseId: string | null;
  /** As sent (vLLM's default: true). An engine without a response store serves the request unstored. */
  store: boolean;
  /** max_output_tokens. */
  maxTokens: number | null;
  temperature: number | null;
  topP: number | null;
  topK: number | null;
  stop: string[];
  /** "auto" (the default), "none", "required", or a named choice, as sent. */
  toolChoice: unknown;
  /** The request's tools as sent (the response object echoes them). */
  tools: unknown[];
  /** reasoning.effort, passed to the template as reasoning_effort. */
  reasoningEffort: string | null;
  metadata: Doc | null;
  /** The last input item is an assistant message or reasoning still in progress: the template continues it. */
  continueFinalMessage: boolean;
}

const ROLES = new Set(['user', 'assistant', 'system', 'developer']);
const TEXT_PARTS = new Set(['input_text', 'output_text', 'text']);

function convertPart (p: unknown, where: string): ContentPart {
  if (!isObject(p) || typeof p.type !== 'string') throw bad(`"${where}" must be a content part with a string "type", got ${shown(p)}`);
  if (TEXT_PARTS.has(p.type)) {
    if (typeof p.text !== 'string') throw bad(`"${where}.text" must be a string`);
    return { type: 'text', text: p.text };
  }
  if (p.type === 'input_image') {
    const url = p.image_url;
    if (typeof url !== 'string' || url === '') throw bad(`"${where}.image_url" must be a URL (input_image by file_id is not supported)`);
    return { type: 'image_url', image_url: { url } };
  }
  throw bad(`"${where}.type" ${shown(p.type)} is not supported (input_text, output_text, input_image)`);
}

function convertContent (c: unknown, where: string): string | ContentPart[] {
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) throw bad(`"${where}" must be a string or a list of content parts, got ${shown(c)}`);
  return c.map((p, i) => convertPart(p, `${where}[${i}]`));
}

/** An assistant message's text as vLLM takes it: the content string, or the text of its first part. */
function assistantText (c: unknown, where: string): string {
  if (c === undefined || c === null) return '';
  if (typeof c === 'string') return c;
  if (!Array.isArray(c)) throw bad(`"${where}" must be a string or a list of content parts, got ${shown(c)}`);
  if (c.length === 0) return '';
  const first = c[0];
  if (!isObject(first)) throw bad(`"${where}[0]" must be a content part, got ${shown(first)}`);
  return typeof first.text === 'string' ? first.text : '';
}

function firstText (list: unknown): string | null {
  if (!Array.isArray(list) || list.length === 0) return null;
  const x = list[0];
  if (typeof x === 'string') return x;
  return isObject(x) && typeof x.text === 'string' ? x.text : '';
}

/** Appends one input item to `out` as vLLM's _construct_message_from_response_item does. */
function addItem (item: unknown, i: number, out: ChatMessage[]): void {
  const where = `input[${i}]`;
  if (!isObject(item)) throw bad(`"${where}" must be an object, got ${shown(item)}`);
  const prev = out.length > 0 ? out[out.length - 1] : null;
  const prevAssistant = prev !== null && prev.role === 'assistant' ? prev : null;
  const type = item.type ?? 'message';
  switch (type) {
    case 'function_call': {
      for (const k of ['call_id', 'name', 'arguments']) {
        if (typeof item[k] !== 'string') throw bad(`"${where}.${k}" is required and must be a string`);
      }
      const ns = optString(item, 'namespace', `${where}.`);
      // vLLM flattens a namespaced tool's name the way it named the tool in the template.
      const name = ns !== null && ns !== '' ? `${ns}__${item.name as string}` : item.name as string;
      const call = { id: item.call_id, type: 'function', function: { name, arguments: item.arguments } };
      if (prevAssistant !== null) {
        if (Array.isArray(prevAssistant.tool_calls)) prevAssistant.tool_calls.push(call);
        else prevAssistant.tool_calls = [call];
        return;
      }
      out.push({ role: 'assistant', tool_calls: [call] });
      return;
    }
    case 'function_call_output': {
      if (typeof item.call_id !== 'string') throw bad(`"${where}.call_id" is required and must be a string`);
      if (item.output === undefined || item.output === null) throw bad(`"${where}.output" is required`);
      out.push({ role: 'tool', content: convertContent(item.output, `${where}.output`), tool_call_id: item.call_id });
      return;
    }
    case 'reasoning': {
      // encrypted_content is opaque; vLLM's dict path (the one a JSON body takes) reads only content and summary.
      const text = firstText(item.content) ?? firstText(item.summary) ?? '';
      if (prevAssistant !== null && prevAssistant.reasoning === undefined) {
        prevAssistant.reasoning = text;
        return;
      }
      out.push({ role: 'assistant', reasoning: text });
      return;
    }
    case 'message': {
      const role = item.role;
      if (typeof role !== 'string' || !ROLES.has(role)) throw bad(`"${where}.role" must be "user", "assistant", "system" or "developer", got ${shown(role)}`);
      if (item.content === undefined) throw bad(`"${where}.content" is required`);
      if (role === 'assistant') {
        const text = assistantText(item.content, `${where}.content`);
        if (prevAssistant !== null && (prevAssistant.content === undefined || prevAssistant.content === null)) {
          prevAssistant.content = text;
          return;
        }
        out.push({ role: 'assistant', content: text });
        return;
      }
      out.push({ role, content: convertContent(item.content, `${where}.content`) });
      return;
    }
    default:
      throw bad(`"${where}.type" ${shown(type)} is not supported (message, function_call, function_call_output, reasoning)`);
  }
}

/** vLLM's should_continue_final_message: the last item is an assistant message or reasoning left in progress. */
function continuesFinal (input: unknown): boolean {
  if (!Array.isArray(input) || input.length === 0) return false;
  const last = input[input.length - 1];
  if (!isObject(last)) return false;
  const type = last.type ?? 'message';
  if (type !== 'message' && type !== 'reasoning') return false;
  return last.status === 'in_progress' || last.status === 'incomplete';
}

/** Function tools → chat tools (vLLM's construct_tool_dicts; namespace tools flatten to namespace__name). */
function convertTools (tools: unknown[]): unknown[] {
  const out: unknown[] = [];
  const fn = (t: Doc, where: string, prefix: string): void => {
    if (typeof t.name !== 'string' || t.name === '') throw bad(`"${where}.name" is required and must be a string`);
    optString(t, 'description', `${where}.`);
    optObject(t, 'parameters', `${where}.`);
    const { type: _type, name, ...rest } = t;
    out.push({ type: 'function', function: { name: `${prefix}${name as string}`, ...rest } });
  };
  for (const [i, t] of tools.entries()) {
    if (!isObject(t) || typeof t.type !== 'string') throw bad(`"tools[${i}]" must be an object with a string "type", got ${shown(t)}`);
    if (t.type === 'function') fn(t, `tools[${i}]`, '');
    else if (t.type === 'namespace' && Array.isArray(t.tools) && typeof t.name === 'string') {
      for (const [j, inner] of t.tools.entries()) {
        if (isObject(inner) && inner.type === 'function') fn(inner, `tools[${i}].tools[${j}]`, `${t.name}__`);
      }
    }
    // Built-in tools (web_search, mcp, custom, local_shell...) are not given to the chat template.
  }
  return out;
}

/** A Responses body → the chat request vLLM runs for it. Throws EAR_ERR_BAD_REQUEST on a bad body. */
export function responsesToChat (doc: unknown): ResponsesChat {
  const b = requireObject(doc, 'request body');
  const model = optString(b, 'model', '') ?? '';
  const instructions = optString(b, 'instructions', '');
  const input = b.input;
  const inputMessages: ChatMessage[] = [];
  if (typeof input === 'string') inputMessages.push({ role: 'user', content: input });
  else if (Array.isArray(input)) input.forEach((item, i) => addItem(item, i, inputMessages));
  else throw bad('"input" is required and must be a string or a list of items');

  const maxTokens = optIntIn(b, 'max_output_tokens', '', 1, MAX_TOKEN_COUNT);
  checkSampling(b);
  optIntIn(b, 'top_logprobs', '', 0, 20);
  const previousResponseId = optString(b, 'previous_response_id', '');
  if (previousResponseId !== null && b.previous_response !== undefined && b.previous_response !== null) {
    throw bad("Cannot set both 'previous_response_id' and 'previous_response'.");
  }
  const store = optBool(b, 'store', '') ?? true;
  const stream = optBool(b, 'stream', '') ?? false;
  const user = optString(b, 'user', '');
  const tools = optArray(b, 'tools', '') ?? [];
  const chatTools = convertTools(tools);
  const reasoning = optObject(b, 'reasoning', '');
  const reasoningEffort = reasoning === null ? null : optString(reasoning, 'effort', 'reasoning.');
  const kwargs = optObject(b, 'chat_template_kwargs', '');
  const stopRaw = b.stop;
  const stop = typeof stopRaw === 'string' ? [stopRaw] : optStringList(b, 'stop', '') ?? [];
  if (b.prompt !== undefined && b.prompt !== null) throw bad('prompt template is not supported');
  if (b.background === true && b.store === false) throw bad('background can only be used when `store` is true');
  const continueFinal = continuesFinal(input);

  const templateKwargs: Record<string, unknown> = { ...(kwargs ?? {}) };
  if (reasoningEffort !== null) templateKwargs.reasoning_effort = reasoningEffort;
  const messages: ChatMessage[] = instructions !== null && instructions !== '' ? [{ role: 'system', content: instructions }] : [];
  messages.push(...inputMessages);
  return {
    model,
    stream,
    messages,
    inputMessages,
    render: {
      addGenerationPrompt: !continueFinal,
      continueFinalMessage: continueFinal,
      tools: chatTools.length > 0 ? chatTools : undefined,
      chatTemplateKwargs: Object.keys(templateKwargs).length > 0 ? templateKwargs : undefined
    },
    maxTokens,
    user: user !== null && user !== '' ? user : null,
    instructions,
    previousResponseId,
    store,
    temperature: optNumber(b, 'temperature', ''),
    topP: optNumber(b, 'top_p', ''),
    topK: optInt(b, 'top_k', ''),
    stop,
    toolChoice: b.tool_choice ?? 'auto',
    tools,
    reasoningEffort,
    metadata: optObject(b, 'metadata', ''),
    continueFinalMessage: continueFinal
  };
}

/** What a stored response contributes to the next turn. */
export interface PreviousTurn {
  /** The chat messages that response was generated from (its own history included). */
  messages: readonly ChatMessage[];
  /** Its `output` items as the response object lists them. */
  output: readonly unknown[];
}

/**
 * The conversation of a request that names previous_response_id, as vLLM's construct_input_messages builds it:
 * this request's instructions, the previous messages without their system messages (instructions do not carry
 * over), one assistant message per output_text of the previous output's messages (its reasoning and function
 * calls are left out, as vLLM leaves them), then this request's input.
 */
export function continueConversation (chat: ResponsesChat, previous: PreviousTurn): ChatMessage[] {
  const out: ChatMessage[] = chat.instructions !== null && chat.instructions !== '' ? [{ role: 'system', content: chat.instructions }] : [];
  for (const m of previous.messages) if (m.role !== 'system') out.push(m);
  for (const item of previous.output) {
    if (!isObject(item) || item.type !== 'message' || !Array.isArray(item.content)) continue;
    for (const part of item.content) if (isObject(part)) out.push({ role: 'assistant', content: typeof part.text === 'string' ? part.text : '' });
  }
  out.push(...chat.inputMessages);
  return out;
}
