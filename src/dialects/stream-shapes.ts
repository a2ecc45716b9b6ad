// How each API an engine answers shows, in its stream events or its whole body, that output has begun, what
// usage it reports and (Responses) which response it is: what the stream observer (src/upstream/stream-observer.ts)
// reads without changing a byte.
//   OpenAI chat and completions: `choices[].delta|message|text`, `usage.prompt_tokens_details.cached_tokens`.
//   Anthropic Messages (vLLM's /v1/messages): `content_block_delta` events, usage split over `message_start`
//     (input) and `message_delta` (output); vLLM's input_tokens is the whole prompt (it counts cached tokens in
//     it and may add cache_read_input_tokens beside), Anthropic's own excludes them: both are read as given.
//   OpenAI Responses: `response.*.delta` events, the usage of `response.completed`, the id of `response.created`.
// And whether the answer ended in a tool call: a choice's finish_reason `tool_calls` (chat), stop_reason
// `tool_use` (Messages' message_delta or whole message), a `function_call` output item (Responses' whole
// response, streamed in response.completed).
import { isObject, type Doc } from './chat-request.js';

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  /** Prompt tokens the engine found cached; null when it did not report it. */
  cachedTokens: number | null;
}

export interface StreamShape {
  readonly name: 'openai' | 'anthropic' | 'responses';
  /** True if a stream event or a whole body carries generated output (text, reasoning or a tool call). */
  hasContent (doc: Record<string, unknown>): boolean;
  /** True only when hasContent would surely be false for this event's data (skips a parse before the first token). */
  cannotHoldOutput (data: string): boolean;
  /** The usage `doc` reports, merged into what earlier events of the same response reported; null: none here. */
  usage (doc: Record<string, unknown>, before: Usage | null): Usage | null;
  /** The message of an error event or body; null if `doc` is not one. */
  error (doc: Record<string, unknown>): string | null;
  /** The id of the response (Responses only: previous_response_id routes by it); null if `doc` names none. */
  responseId (doc: Record<string, unknown>): string | null;
  /**
   * The key whose non-null value ends the answer ('"finish_reason"', '"stop_reason"'); null where the event that
   * ends it reports usage too (Responses), which the observer reads anyway.
   */
  readonly endKey: string | null;
  /** Whether `doc` ends the answer in a tool call (true), otherwise (false), or says nothing of its end (null). */
  toolCallEnd (doc: Record<string, unknown>): boolean | null;
}

const nonEmpty = (v: unknown): boolean => typeof v === 'string' && v !== '';
const count = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v >= 0 ? v : 0;

/**
 * text.indexOf(key, from) for a quoted key, searched from its `skip`-th character: V8 starts a search on the
 * pattern's first character, and in JSON a '"' comes every few bytes, an 'e' nearly as often (a 4.5 KB stream:
 * '"usage"' 2 µs, 'usage"' 0.4; '"error"' 2 µs, 'rror"' 0.5).
 */
export function keyAt (text: string, key: string, skip: number, from: number): number {
  const probe = key.slice(skip);
  for (let i = text.indexOf(probe, from + skip); i >= 0; i = text.indexOf(probe, i + 1)) {
    if (text.startsWith(key, i - skip)) return i - skip;
  }
  return -1;
}

function errorMessage (doc: Doc): string | null {
  const e = doc.error;
  if (isObject(e)) return typeof e.message === 'string' ? e.message : 'error';
  return e === undefined || e === null ? null : 'error';
}

const noId = (): null => null;

/**
 * Where in text[from..] `key` (quoted) has a string value, or -1: an event that may end the answer. Every chat
 * chunk carries "finish_reason":null and only the last one names a reason, so the search is for the key with a
 * string after it, as engines write it: compact (pydantic, vLLM) or with Python json.dumps' ": " (two searches
 * that find nothing in most chunks: ~0.5 µs a 1.5 KB read, where walking each null was ~4 µs).
 */
export function endAt (text: string, key: string, from: number): number {
  // Searched from its '_' (finish_reason, stop_reason), rarer in JSON than any other character of the key.
  const skip = Math.max(1, key.indexOf('_'));
  const compact = keyAt(text, `${key}:"`, skip, from);
  const spaced = keyAt(text, `${key}: "`, skip, from);
  return compact < 0 ? spaced : spaced < 0 ? compact : Math.min(compact, spaced);
}

export const OPENAI_STREAM: StreamShape = {
  name: 'openai',
  hasContent (doc) {
    const choices = doc.choices;
    if (!Array.isArray(choices)) return false;
    for (const c of choices) {
      if (!isObject(c)) continue;
      if (nonEmpty(c.text)) return true;
      const d = c.delta ?? c.message;
      if (!isObject(d)) continue;
      if (nonEmpty(d.content) || nonEmpty(d.reasoning_content) || nonEmpty(d.reasoning) || (Array.isArray(d.tool_calls) && d.tool_calls.length > 0)) return true;
    }
    return false;
  },
  // No key that can carry output appears, except "content" set to "" each time (a role chunk). A quote inside a
  // string is escaped (\"), so string values cannot pass for keys; a \u escape could spell one unseen.
  cannotHoldOutput (data) {
    if (data.includes('\\u') || keyAt(data, '"text"', 1, 0) >= 0 || data.includes('reasoning') || keyAt(data, '"tool_calls"', 1, 0) >= 0) return false;
    for (let i = keyAt(data, '"content"', 1, 0); i >= 0; i = keyAt(data, '"content"', 1, i + 1)) {
      if (!data.startsWith('"content":""', i)) return false;
    }
    return true;
  },
  usage (doc) {
    const u = doc.usage;
    if (!isObject(u)) return null;
    const details = u.prompt_tokens_details;
    return {
      promptTokens: count(u.prompt_tokens),
      completionTokens: count(u.completion_tokens),
      cachedTokens: isObject(details) && typeof details.cached_tokens === 'number' ? details.cached_tokens : null
    };
  },
  error: errorMessage,
  responseId: noId,
  endKey: '"finish_reason"',
  toolCallEnd (doc) {
    const choices = doc.choices;
    if (!Array.isArray(choices)) return null;
    let ended: boolean | null = null;
    for (const c of choices) {
      if (!isObject(c) || typeof c.finish_reason !== 'string') continue;
      if (c.finish_reason === 'tool_calls') return true;
      ended = false;
    }
    return ended;
  }
};

/** Anthropic's usage object: input (and cache reads when given) and output tokens. */
function anthropicUsage (u: Doc, before: Usage | null): Usage {
  const cached = typeof u.cache_read_input_tokens === 'number' ? u.cache_read_input_tokens : before?.cachedTokens ?? null;
  return {
    // message_delta may repeat input_tokens (vLLM does) or leave it out (Anthropic sends 0 or nothing there).
    promptTokens: count(u.input_tokens) > 0 ? count(u.input_tokens) : before?.promptTokens ?? 0,
    completionTokens: typeof u.output_tokens === 'number' ? count(u.output_tokens) : before?.completionTokens ?? 0,
    cachedTokens: cached
  };
}

export const ANTHROPIC_STREAM: StreamShape = {
  name: 'anthropic',
  hasContent (doc) {
    if (doc.type === 'content_block_delta') {
      const d = doc.delta;
      return isObject(d) && (nonEmpty(d.text) || nonEmpty(d.thinking) || nonEmpty(d.partial_json));
    }
    // A tool_use block starts with its name: a token of output although no delta came yet.
    if (doc.type === 'content_block_start') return isObject(doc.content_block) && doc.content_block.type === 'tool_use';
    if (doc.type === 'message') {
      const content = doc.content;
      if (!Array.isArray(content)) return false;
      return content.some((b) => isObject(b) && (nonEmpty(b.text) || nonEmpty(b.thinking) || b.type === 'tool_use'));
    }
    return false;
  },
  // ping, message_stop, content_block_stop and the like: no delta, no content block, no message.
  cannotHoldOutput (data) {
    return !data.includes('\\u') && keyAt(data, '"delta"', 1, 0) < 0 && keyAt(data, '"content_block"', 1, 0) < 0 && keyAt(data, '"content"', 1, 0) < 0;
  },
  usage (doc, before) {
    if (isObject(doc.usage)) return anthropicUsage(doc.usage, before);
    // message_start carries the message, whose usage holds the input tokens.
    if (doc.type === 'message_start' && isObject(doc.message) && isObject(doc.message.usage)) return anthropicUsage(doc.message.usage, before);
    return null;
  },
  error: errorMessage,
  responseId: noId,
  endKey: '"stop_reason"',
  toolCallEnd (doc) {
    const reason = doc.type === 'message_delta' && isObject(doc.delta) ? doc.delta.stop_reason : doc.type === 'message' ? doc.stop_reason : null;
    return typeof reason === 'string' ? reason === 'tool_use' : null;
  }
};

/** A Responses usage object (input_tokens_details.cached_tokens). */
function responsesUsage (u: Doc): Usage {
  const details = u.input_tokens_details;
  return {
    promptTokens: count(u.input_tokens),
    completionTokens: count(u.output_tokens),
    cachedTokens: isObject(details) && typeof details.cached_tokens === 'number' ? details.cached_tokens : null
  };
}

const RESPONSE_DELTAS = new Set(['response.output_text.delta', 'response.function_call_arguments.delta', 'response.reasoning_text.delta',
  'response.reasoning_summary_text.delta', 'response.refusal.delta']);

export const RESPONSES_STREAM: StreamShape = {
  name: 'responses',
  hasContent (doc) {
    if (typeof doc.type === 'string' && RESPONSE_DELTAS.has(doc.type)) return nonEmpty(doc.delta);
    // A whole response (not streamed): an output item with text, or a function call.
    if (doc.object === 'response' && Array.isArray(doc.output)) {
      for (const item of doc.output) {
        if (!isObject(item)) continue;
        if (item.type === 'function_call') return true;
        if (Array.isArray(item.content) && item.content.some((p) => isObject(p) && nonEmpty(p.text))) return true;
      }
    }
    return false;
  },
  // Only a `*.delta` event carries output as it streams; `delta` is its key.
  cannotHoldOutput (data) {
    return !data.includes('\\u') && keyAt(data, '"delta"', 1, 0) < 0 && keyAt(data, '"output"', 1, 0) < 0;
  },
  usage (doc) {
    if (isObject(doc.usage)) return responsesUsage(doc.usage);
    const r = doc.response;
    if (isObject(r) && isObject(r.usage)) return responsesUsage(r.usage);
    return null;
  },
  error (doc) {
    if (doc.type === 'error') return typeof doc.message === 'string' ? doc.message : 'error';
    if (doc.type === 'response.failed') {
      const r = doc.response;
      return isObject(r) && isObject(r.error) && typeof r.error.message === 'string' ? r.error.message : 'response failed';
    }
    return errorMessage(doc);
  },
  responseId (doc) {
    if (doc.object === 'response' && typeof doc.id === 'string') return doc.id;
    const r = doc.response;
    return isObject(r) && typeof r.id === 'string' ? r.id : null;
  },
  endKey: null,
  toolCallEnd (doc) {
    const r = doc.object === 'response' ? doc : doc.type === 'response.completed' || doc.type === 'response.incomplete' ? doc.response : null;
    if (!isObject(r) || !Array.isArray(r.output)) return null;
    return r.output.some((item) => isObject(item) && item.type === 'function_call');
  }
};
