// Reads one streamed answer of each API the e2e driver speaks: when the first generated text arrived, the
// usage the API reports, and (text APIs) the answer's text, which the session's next turn sends back.
// - completions / chat: `data:` chunks, usage in the last one (prompt_tokens_details.cached_tokens);
// - messages (Anthropic): message_start (usage.input_tokens), content_block_delta (text_delta), message_delta
//   (usage.output_tokens); vLLM reports no cached tokens on this API: cachedTokens is null here;
// - responses: response.output_text.delta, then response.completed (or .incomplete) with usage input_tokens,
//   input_tokens_details.cached_tokens and output_tokens.
// An error the stream carries (an error chunk or event) is thrown as an HttpStatusError with its status.
import { request, type Dispatcher } from 'undici';
import { HttpStatusError } from '../metrics/index.js';
import type { ApiRequest, E2eApi } from './api-requests.js';

export interface StreamResult {
  /** Prompt tokens as the engine counted them; null when the stream says nothing (completions: not read). */
  promptTokens: number | null;
  /** Prompt tokens served from the prefix cache; null when the API does not report them (messages). */
  cachedTokens: number | null;
  outputTokens: number;
  /** The generated text (text APIs; '' for completions). */
  text: string;
  /** The engine the gateway chose (its x-ear-backend header), or null. */
  backend: string | null;
}

type Doc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Anthropic error types and the statuses Anthropic sends them with. */
const ANTHROPIC_STATUS: Readonly<Record<string, number>> = {
  invalid_request_error: 400, authentication_error: 401, permission_error: 403, not_found_error: 404,
  request_too_large: 413, rate_limit_error: 429, api_error: 500, overloaded_error: 529
};

/** Applies one event's JSON to `r`; true when it carried the first generated text. Throws on an error event. */
type EventReader = (doc: Doc, r: StreamResult) => boolean;

const readCompletion: EventReader = (doc, r) => {
  if (doc.error) throw new HttpStatusError(typeof doc.error.code === 'number' ? doc.error.code : 500, JSON.stringify(doc));
  if (doc.usage) {
    r.cachedTokens = doc.usage.prompt_tokens_details?.cached_tokens ?? 0;
    r.outputTokens = doc.usage.completion_tokens ?? 0;
  }
  return Boolean(doc.choices?.[0]?.text);
};

const readChat: EventReader = (doc, r) => {
  if (doc.error) throw new HttpStatusError(typeof doc.error.code === 'number' ? doc.error.code : 500, JSON.stringify(doc));
  if (doc.usage) {
    r.promptTokens = doc.usage.prompt_tokens ?? null;
    r.cachedTokens = doc.usage.prompt_tokens_details?.cached_tokens ?? 0;
    r.outputTokens = doc.usage.completion_tokens ?? 0;
  }
  const text = doc.choices?.[0]?.delta?.content;
  if (typeof text !== 'string' || text === '') return false;
  r.text += text;
  return true;
};

const readMessages: EventReader = (doc, r) => {
  switch (doc.type) {
    case 'error': throw new HttpStatusError(ANTHROPIC_STATUS[doc.error?.type] ?? 500, JSON.stringify(doc));
    case 'message_start':
      r.promptTokens = doc.message?.usage?.input_tokens ?? null;
      return false;
    case 'content_block_delta': {
      const text = doc.delta?.type === 'text_delta' ? doc.delta.text : undefined;
      if (typeof text !== 'string' || text === '') return false;
      r.text += text;
      return true;
    }
    case 'message_delta':
      if (typeof doc.usage?.input_tokens === 'number') r.promptTokens = doc.usage.input_tokens;
      r.outputTokens = doc.usage?.output_tokens ?? r.outputTokens;
      return false;
    default: return false;
  }
};

const readResponses: EventReader = (doc, r) => {
  switch (doc.type) {
    case 'error':
    case 'response.failed':
      throw new HttpStatusError(500, JSON.stringify(doc));
    case 'response.output_text.delta':
      if (typeof doc.delta !== 'string' || doc.delta === '') return false;
      r.text += doc.delta;
      return true;
    case 'response.completed':
    case 'response.incomplete': {
      const u = doc.response?.usage;
      if (u) {
        r.promptTokens = u.input_tokens ?? null;
        r.cachedTokens = u.input_tokens_details?.cached_tokens ?? 0;
        r.outputTokens = u.output_tokens ?? 0;
      }
      return false;
    }
    default: return false;
  }
};

const READERS: Readonly<Record<E2eApi, EventReader>> = { completions: readCompletion, chat: readChat, messages: readMessages, responses: readResponses };

/** The `data:` line of one SSE event (after any `event:` line), or null. */
function eventData (ev: string): string | null {
  if (ev.startsWith('data: ')) return ev.slice(6);
  const i = ev.indexOf('\ndata: ');
  return i < 0 ? null : ev.slice(i + 7);
}

/** Sends `req` to the gateway at `url` and reads its stream; `onFirst` runs when the first generated text arrives. */
export async function readStream (api: E2eApi, dispatcher: Dispatcher, url: string, req: ApiRequest, onFirst: () => void): Promise<StreamResult> {
  const res = await request(`${url}${req.path}`, { method: 'POST', dispatcher, headers: { 'content-type': 'application/json', ...req.headers }, body: req.body });
  if (res.statusCode !== 200) throw new HttpStatusError(res.statusCode, await res.body.text());
  const backend = res.headers['x-ear-backend'];
  const r: StreamResult = { promptTokens: null, cachedTokens: api === 'messages' ? null : 0, outputTokens: 0, text: '', backend: typeof backend === 'string' ? backend : null };
  const read = READERS[api];
  const utf8 = new TextDecoder();
  let carry = '';
  let first = false;
  for await (const chunk of res.body) {
    carry += utf8.decode(chunk, { stream: true });
    let i;
    while ((i = carry.indexOf('\n\n')) >= 0) {
      const data = eventData(carry.slice(0, i));
      carry = carry.slice(i + 2);
      if (data === null || data === '[DONE]') continue;
      if (read(JSON.parse(data), r) && !first) { first = true; onFirst(); }
    }
  }
  return r;
}
