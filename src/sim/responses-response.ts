// POST /v1/responses answered as vLLM's Responses serving answers it for a non-Harmony model without parsers
// (vllm/entrypoints/openai/responses/{serving,protocol,streaming_events}.py; api_router.py), from the same run
// as a chat completion:
// - whole: ResponsesResponse.model_dump() — every field, nulls included; id resp_<hex>; one output message
//   msg_<hex> (its content empty when no text); status "incomplete" with incomplete_details
//   {reason: max_output_tokens} when max_output_tokens ended it; usage with input_tokens_details.cached_tokens
//   (the engine's count, always reported here) and output_tokens_details, per-turn lists empty as vLLM leaves them;
// - streamed: `event: <type>\ndata: <json>\n\n`, every event with sequence_number from 0: response.created and
//   response.in_progress as soon as the request is accepted, then at the first text output_item.added and
//   content_part.added, output_text.delta per text, then output_text.done, content_part.done,
//   output_item.done, and response.completed with the whole response. The streamed item's id is a bare hex
//   uuid while the completed response builds its output anew (msg_<hex>), as vLLM does.
import { randomBytes } from 'node:crypto';
import type { FinishReason } from './engine-types.js';
import { errorJson } from './http-errors.js';
import type { HttpError } from './http-errors.js';
import type { ChoiceResult, UsageCounts } from './openai-response.js';
import type { OutputFormat, RunInfo } from './output-format.js';

/** vLLM's random_uuid(): uuid4().hex. */
export const randomHex = (): string => randomBytes(16).toString('hex');

/** The request's fields a response object echoes, read once from the body. */
export interface ResponseEcho {
  instructions: string | null;
  metadata: unknown;
  parallelToolCalls: boolean;
  temperature: number;
  toolChoice: unknown;
  tools: unknown[];
  topP: number;
  maxToolCalls: number | null;
  previousResponseId: string | null;
  reasoning: unknown;
  serviceTier: string;
  text: unknown;
  truncation: string;
  user: string | null;
}

/** ResponseEcho from a validated body (the fields responsesToChat already checked, the rest defaulted as vLLM does). */
export function responseEcho (b: Record<string, unknown>): ResponseEcho {
  const r = b.reasoning as Record<string, unknown> | null | undefined;
  const num = (v: unknown, d: number): number => (typeof v === 'number' ? v : d);
  return {
    instructions: typeof b.instructions === 'string' ? b.instructions : null,
    metadata: b.metadata ?? null,
    parallelToolCalls: b.parallel_tool_calls !== false,
    temperature: num(b.temperature, 1.0),
    toolChoice: b.tool_choice ?? 'auto',
    tools: Array.isArray(b.tools) ? b.tools : [],
    topP: num(b.top_p, 1.0),
    maxToolCalls: typeof b.max_tool_calls === 'number' ? b.max_tool_calls : null,
    previousResponseId: typeof b.previous_response_id === 'string' ? b.previous_response_id : null,
    reasoning: r === null || r === undefined || typeof r !== 'object' ? null : { effort: r.effort ?? null, generate_summary: r.generate_summary ?? null, summary: r.summary ?? null },
    serviceTier: typeof b.service_tier === 'string' ? b.service_tier : 'auto',
    text: b.text ?? null,
    truncation: typeof b.truncation === 'string' ? b.truncation : 'disabled',
    user: typeof b.user === 'string' ? b.user : null
  };
}

type Status = 'in_progress' | 'completed' | 'incomplete';

export function responsesUsage (u: UsageCounts): Record<string, unknown> {
  return {
    input_tokens: u.promptTokens,
    input_tokens_details: { cached_tokens: u.cachedTokens, input_tokens_per_turn: [], cached_tokens_per_turn: [] },
    output_tokens: u.completionTokens,
    output_tokens_details: { reasoning_tokens: 0, tool_output_tokens: 0, output_tokens_per_turn: [], tool_output_tokens_per_turn: [] },
    total_tokens: u.promptTokens + u.completionTokens
  };
}

const outputText = (text: string, logprobs: unknown[] | null): Record<string, unknown> => ({ annotations: [], text, type: 'output_text', logprobs });

export class ResponsesFormat implements OutputFormat {
  #info: RunInfo | null = null;
  #seq = 0;
  #finish: FinishReason | null = null;
  /** The streamed message item's id, once opened. */
  #itemId: string | null = null;
  #text = '';

  /** `onDone` receives the final response object (to store it). */
  constructor (private readonly echo: ResponseEcho, private readonly onDone: (response: Record<string, unknown>) => void) {}

  begin (info: RunInfo): void {
    this.#info = info;
  }

  #response (status: Status, output: unknown[], usage: Record<string, unknown> | null): Record<string, unknown> {
    const { id, created, model, maxTokens } = this.#info!;
    const e = this.echo;
    return {
      id,
      created_at: created,
      incomplete_details: status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
      instructions: e.instructions,
      metadata: e.metadata,
      model,
      object: 'response',
      output,
      parallel_tool_calls: e.parallelToolCalls,
      temperature: e.temperature,
      tool_choice: e.toolChoice,
      tools: e.tools,
      top_p: e.topP,
      background: false,
      max_output_tokens: maxTokens,
      max_tool_calls: e.maxToolCalls,
      previous_response_id: e.previousResponseId,
      prompt: null,
      reasoning: e.reasoning,
      service_tier: e.serviceTier,
      status,
      text: e.text,
      top_logprobs: null,
      truncation: e.truncation,
      usage,
      user: e.user,
      input_messages: null,
      output_messages: null
    };
  }

  #final (text: string, finish: FinishReason | null, usage: UsageCounts): Record<string, unknown> {
    const item = { id: `msg_${randomHex()}`, content: text !== '' ? [outputText(text, null)] : [], role: 'assistant', status: 'completed', type: 'message' };
    const response = this.#response(finish === 'length' ? 'incomplete' : 'completed', [item], responsesUsage(usage));
    this.onDone(response);
    return response;
  }

  /** One SSE event; keys in the openai models' order (`after` holds the keys that sort after sequence_number). */
  #event (type: string, fields: Record<string, unknown>, after: Record<string, unknown> = {}): string {
    return `event: ${type}\ndata: ${JSON.stringify({ ...fields, sequence_number: this.#seq++, ...after, type })}\n\n`;
  }

  streamPrelude (): string {
    const initial = this.#response('in_progress', [], null);
    return this.#event('response.created', { response: initial }) + this.#event('response.in_progress', { response: initial });
  }

  streamStart (): string {
    return '';
  }

  streamDelta (_index: number, text: string, finish: FinishReason | null): string {
    if (finish !== null) this.#finish = finish;
    if (text === '') return '';
    let out = '';
    if (this.#itemId === null) {
      this.#itemId = randomHex();
      out += this.#event('response.output_item.added', {
        item: { id: this.#itemId, content: [], role: 'assistant', status: 'in_progress', type: 'message' },
        output_index: 0
      });
      out += this.#event('response.content_part.added', { content_index: 0, item_id: this.#itemId, output_index: 0, part: outputText('', []) });
    }
    this.#text += text;
    return out + this.#event('response.output_text.delta', { content_index: 0, delta: text, item_id: this.#itemId, logprobs: [], output_index: 0 });
  }

  streamEnd (usage: UsageCounts, engineDead: boolean): string {
    if (engineDead) {
      return this.#event('error', { code: 'InternalServerError', message: 'EngineCore encountered an issue. See stack trace for the root cause.', param: null });
    }
    let out = '';
    if (this.#itemId !== null) {
      const part = outputText(this.#text, null);
      out += this.#event('response.output_text.done', { content_index: 0, item_id: this.#itemId, logprobs: [], output_index: 0 }, { text: this.#text });
      out += this.#event('response.content_part.done', { content_index: 0, item_id: this.#itemId, output_index: 0, part });
      out += this.#event('response.output_item.done', {
        item: { id: this.#itemId, content: this.#text !== '' ? [part] : [], role: 'assistant', status: 'completed', type: 'message', summary: [] },
        output_index: 0
      });
    }
    return out + this.#event('response.completed', { response: this.#final(this.#text, this.#finish, usage) });
  }

  body (results: ChoiceResult[], usage: UsageCounts): string {
    return JSON.stringify(this.#final(results[0].text, results[0].finishReason, usage));
  }

  errorBody (err: HttpError): string {
    return errorJson(err);
  }
}
