// Chat templates rendered with @huggingface/jinja, after the message preparation vLLM applies before it calls
// the template (vllm/entrypoints/chat_utils.py), so the prompt text is the one the engine builds.
import { Template } from '@huggingface/jinja';
import './jinja-python-strip.js'; // strings' strip methods as Python's jinja2 has them
import type { ChatMessage, ChatTemplate, ContentPart, RenderOptions } from './types.js';
import { TokenizeError } from './errors.js';
import { directRendererFor } from './direct-renderers.js';
import { MAX_JSON_DEPTH } from '../core/defaults.js';
import { nestsDeeperThan } from '../core/json-depth.js';

/** How a template expects `content`: a plain string, or OpenAI parts it loops over (vLLM's detection). */
export type ContentFormat = 'string' | 'openai';

/** Special-token strings a template may use (HF passes its special_tokens_map to the template). */
export type SpecialTokenStrings = Record<string, string | undefined>;

// vLLM decides the content format from whether the template loops over message content; this regex
// covers the spellings templates use (`for x in message.content`, `for x in message['content']`).
const LOOPS_OVER_CONTENT = /\{%-?\s*for\s+\w+\s+in\s+\w+\s*(?:\.content|\[\s*['"]content['"]\s*\])\s*-?%\}/;

export function detectContentFormat (source: string): ContentFormat {
  return LOOPS_OVER_CONTENT.test(source) ? 'openai' : 'string';
}

const TEXT_PART_TYPES = new Set(['text', 'input_text', 'output_text']);

function partText (p: ContentPart): string | null {
  if (TEXT_PART_TYPES.has(p.type)) return typeof p.text === 'string' ? p.text : null;
  if (p.type === 'refusal') return typeof p.refusal === 'string' ? p.refusal : null;
  return null; // images/audio: no text tokens here
}

function parseArguments (args: unknown): unknown {
  // vLLM hands templates the arguments as an object: JSON strings are parsed, anything unparsable becomes {}.
  if (typeof args === 'string') {
    let v: unknown;
    try { v = JSON.parse(args); } catch { return {}; }
    // The template's tojson recurses: arguments nested past the body's own bound are refused, not overflowed.
    if (nestsDeeperThan(v, MAX_JSON_DEPTH)) throw new Error(`tool call arguments nest deeper than ${MAX_JSON_DEPTH} levels`);
    return v;
  }
  return args !== null && typeof args === 'object' ? args : {};
}

/** The conversation as vLLM passes it to the template. */
export function prepareMessages (messages: readonly ChatMessage[], format: ContentFormat): Record<string, unknown>[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', 'messages must be a non-empty array');
  }
  return messages.map((m, i) => {
    if (m === null || typeof m !== 'object' || typeof m.role !== 'string') {
      throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', `messages[${i}].role must be a string`);
    }
    const raw = m.content;
    let texts: string[];
    if (raw === null || raw === undefined) texts = [];
    else if (typeof raw === 'string') texts = [raw];
    else if (Array.isArray(raw)) {
      texts = [];
      for (const p of raw) {
        if (typeof p === 'string') { texts.push(p); continue; }
        const t = p !== null && typeof p === 'object' ? partText(p) : null;
        if (t !== null) texts.push(t);
      }
    } else {
      throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', `messages[${i}].content must be a string, an array of parts or null`);
    }
    const out: Record<string, unknown> = {
      role: m.role,
      content: format === 'string' ? texts.join('\n') : texts.map((text) => ({ type: 'text', text }))
    };
    if (m.role === 'assistant') {
      if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
        out.tool_calls = m.tool_calls.map((tc: unknown) => {
          if (tc === null || typeof tc !== 'object') return tc;
          const call = tc as Record<string, unknown>;
          const fn = call.function;
          if (fn === null || typeof fn !== 'object') return { ...call };
          const f = fn as Record<string, unknown>;
          return { ...call, function: { ...f, arguments: parseArguments(f.arguments) } };
        });
      }
      // vLLM forwards `reasoning` (not `reasoning_content`) to the template, under both names.
      if (typeof m.reasoning === 'string') {
        out.reasoning = m.reasoning;
        out.reasoning_content = m.reasoning;
      }
    } else if (m.role === 'tool' && m.tool_call_id !== undefined) {
      out.tool_call_id = m.tool_call_id;
    }
    if (typeof m.name === 'string') out.name = m.name;
    return out;
  });
}

/**
 * Tools as vLLM hands them to the template: each request tool goes through its pydantic models and
 * `model_dump()`, so the declared fields come first in declaration order (type; function: name, description,
 * parameters, strict), absent ones as null, then any extra fields in request order. Tools of other types
 * (e.g. "custom") pass through as sent.
 */
export function toolDicts (tools: readonly unknown[]): unknown[] {
  return tools.map((t) => {
    if (t === null || typeof t !== 'object') return t;
    const { type, function: fn, ...extra } = t as Record<string, unknown>;
    if ((type !== undefined && type !== 'function') || fn === null || typeof fn !== 'object') return t;
    const { name, description, parameters, strict, ...fnExtra } = fn as Record<string, unknown>;
    return {
      type: 'function',
      function: { name, description: description ?? null, parameters: parameters ?? null, strict: strict ?? null, ...fnExtra },
      ...extra
    };
  });
}

/**
 * A conversation rendered message by message: the prompt is pieces.join('') + end. A message's piece is a
 * function of that message (as prepareMessages leaves it) and of its context number only, so a later turn whose
 * message i is the same object with the same context has the same piece i (incremental turns rely on it).
 */
export interface RenderedPieces {
  pieces: string[];
  /** Per message: what else its piece depends on (the template's own bits, e.g. "is last"). */
  contexts: number[];
  /** After the last message: the generation prompt, if any. */
  end: string;
}

/** A renderer equivalent to one template for the inputs it accepts; null for the others. */
export type DirectRenderer = (conversation: readonly Record<string, unknown>[], addGenerationPrompt: boolean, tools: unknown,
  chatTemplateKwargs?: Record<string, unknown>) => RenderedPieces | null;

/** A chat template from jinja source (a tokenizer_config.json's chat_template, or one of EAR's built-ins). */
export class JinjaChatTemplate implements ChatTemplate {
  readonly name: string;
  readonly contentFormat: ContentFormat;
  readonly #template: Template;
  readonly #specials: Record<string, string>;

  /** Renders without jinja where it can (null: use jinja); must give the template's exact output. */
  readonly #direct: DirectRenderer | null;

  /** `direct` defaults to the one known for this exact source (direct-renderers.ts), if any. */
  constructor (name: string, source: string, specials: SpecialTokenStrings = {}, direct: DirectRenderer | null = directRendererFor(source)) {
    this.#direct = direct;
    this.name = name;
    this.contentFormat = detectContentFormat(source);
    try {
      this.#template = new Template(source);
    } catch (err) {
      throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', `chat template ${name} does not parse: ${(err as Error).message}`, { cause: err });
    }
    this.#specials = {};
    for (const [k, v] of Object.entries(specials)) if (typeof v === 'string') this.#specials[k] = v;
  }

  /**
   * The prompt as pieces (RenderedPieces), when this template has a direct renderer that accepts the request;
   * null otherwise (render() then goes through jinja). Never for continue_final_message (its cut spans pieces).
   */
  renderPieces (messages: ChatMessage[], opts: RenderOptions): RenderedPieces | null {
    if (this.#direct === null || opts.continueFinalMessage === true) return null;
    return this.#direct(prepareMessages(messages, this.contentFormat), opts.addGenerationPrompt === true, opts.tools, opts.chatTemplateKwargs);
  }

  render (messages: ChatMessage[], opts: RenderOptions): string {
    const addGenerationPrompt = opts.addGenerationPrompt === true;
    const continueFinal = opts.continueFinalMessage === true;
    if (addGenerationPrompt && continueFinal) {
      throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', 'add_generation_prompt and continue_final_message cannot both be true');
    }
    const conversation = prepareMessages(messages, this.contentFormat);
    const last = conversation[conversation.length - 1];
    if (continueFinal && last.role !== 'assistant') {
      throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', 'continue_final_message needs the last message to be from the assistant');
    }
    const fast = this.#direct?.(conversation, addGenerationPrompt, opts.tools, opts.chatTemplateKwargs) ?? null;
    if (fast !== null) {
      const text = fast.pieces.join('') + fast.end;
      return continueFinal ? cutAfterFinalMessage(text, finalText(last.content)) : text;
    }
    // Same precedence as transformers' apply_chat_template: special tokens, then caller kwargs, then the fixed names.
    const context: Record<string, unknown> = {
      ...this.#specials,
      ...(opts.chatTemplateKwargs ?? {}),
      messages: conversation,
      tools: Array.isArray(opts.tools) ? toolDicts(opts.tools) : null,
      add_generation_prompt: addGenerationPrompt
    };
    let text: string;
    try {
      text = this.#template.render(context);
    } catch (err) {
      throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', `chat template ${this.name} failed: ${(err as Error).message}`, { cause: err });
    }
    return continueFinal ? cutAfterFinalMessage(text, finalText(last.content)) : text;
  }
}

function finalText (content: unknown): string {
  if (typeof content === 'string') return content;
  const parts = content as { text: string }[];
  return parts.length > 0 ? parts[parts.length - 1].text : '';
}

// transformers' continue_final_message: cut the rendered prompt right after the final message's text, so the
// model continues it instead of starting a new turn.
function cutAfterFinalMessage (text: string, final: string): string {
  for (const needle of [final, final.trim()]) {
    const at = needle.length > 0 ? text.lastIndexOf(needle) : -1;
    if (at >= 0) return text.slice(0, at + needle.length);
  }
  throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', 'continue_final_message: the final message text is not in the rendered prompt');
}

/** The template's render in pieces (JinjaChatTemplate.renderPieces), or null if it has none for this request. */
export function renderPieces (template: ChatTemplate, messages: ChatMessage[], opts: RenderOptions): RenderedPieces | null {
  return template instanceof JinjaChatTemplate ? template.renderPieces(messages, opts) : null;
}

/** A template that cannot render, for tokenizers shipped without one: the error says what to do. */
export class MissingChatTemplate implements ChatTemplate {
  readonly name = 'none';
  constructor (private readonly tokenizer: string) {}
  render (): string {
    throw new TokenizeError('EAR_ERR_CHAT_TEMPLATE', `tokenizer ${this.tokenizer} has no chat template; give one (chatml, qwen3, llama3, llama3.1 or jinja source)`);
  }
}
