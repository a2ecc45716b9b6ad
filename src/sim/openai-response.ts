// Response bodies and SSE chunks with vLLM's field order and presence (vllm-wire.md §3.2): non-stream
// responses carry every field (nulls included); stream chunks carry only the fields vLLM sets.
import type { FinishReason } from './engine-types.js';
import { errorJson } from './http-errors.js';
import type { HttpError } from './http-errors.js';
import type { OutputFormat, RunInfo } from './output-format.js';

export interface UsageCounts {
  promptTokens: number;
  completionTokens: number;
  cachedTokens: number;
}

export type StopReason = number | string | null;

export interface ChoiceResult {
  index: number;
  text: string;
  finishReason: FinishReason | null;
  stopReason: StopReason;
}

/** prompt_tokens_details is filled only with --enable-prompt-tokens-details and a non-zero cached count, as vLLM does. */
export function usageJson (u: UsageCounts, promptTokensDetails: boolean): Record<string, unknown> {
  return {
    prompt_tokens: u.promptTokens,
    total_tokens: u.promptTokens + u.completionTokens,
    completion_tokens: u.completionTokens,
    prompt_tokens_details: promptTokensDetails && u.cachedTokens > 0 ? { cached_tokens: u.cachedTokens } : null
  };
}

/** The stream's usage chunk is serialised with exclude_none: a null prompt_tokens_details disappears. */
export function streamUsageJson (u: UsageCounts, promptTokensDetails: boolean): Record<string, unknown> {
  const full = usageJson(u, promptTokensDetails);
  if (full.prompt_tokens_details === null) delete full.prompt_tokens_details;
  return full;
}

export function chatCompletionBody (id: string, created: number, model: string, choices: ChoiceResult[],
  usage: Record<string, unknown>, kvTransferParams: Record<string, unknown> | null): string {
  return JSON.stringify({
    id,
    object: 'chat.completion',
    created,
    model,
    choices: choices.map((c) => ({
      index: c.index,
      message: {
        role: 'assistant',
        content: c.text,
        refusal: null,
        annotations: null,
        audio: null,
        function_call: null,
        tool_calls: [],
        reasoning: null,
        reasoning_content: null
      },
      logprobs: null,
      finish_reason: c.finishReason,
      stop_reason: c.stopReason,
      token_ids: null
    })),
    service_tier: null,
    system_fingerprint: null,
    usage,
    prompt_logprobs: null,
    prompt_token_ids: null,
    kv_transfer_params: kvTransferParams
  });
}

export function completionBody (id: string, created: number, model: string, choices: ChoiceResult[],
  usage: Record<string, unknown>, kvTransferParams: Record<string, unknown> | null): string {
  return JSON.stringify({
    id,
    object: 'text_completion',
    created,
    model,
    choices: choices.map((c) => ({
      index: c.index,
      text: c.text,
      logprobs: null,
      finish_reason: c.finishReason,
      stop_reason: c.stopReason,
      token_ids: null,
      prompt_logprobs: null,
      prompt_token_ids: null
    })),
    service_tier: null,
    system_fingerprint: null,
    usage,
    kv_transfer_params: kvTransferParams
  });
}

export const sseEvent = (obj: unknown): string => `data: ${JSON.stringify(obj)}\n\n`;
export const SSE_DONE = 'data: [DONE]\n\n';

/** One SSE chunk of either endpoint; `usage` is attached only when continuous usage stats are on. */
export class ChunkWriter {
  private readonly object: string;

  constructor (private readonly endpoint: 'chat' | 'completion', private readonly id: string,
    private readonly created: number, private readonly model: string) {
    this.object = endpoint === 'chat' ? 'chat.completion.chunk' : 'text_completion';
  }

  private head (): Record<string, unknown> {
    return { id: this.id, object: this.object, created: this.created, model: this.model };
  }

  /** Chat only: the first chunk of every choice. */
  role (index: number): string {
    return sseEvent({ ...this.head(), choices: [{ index, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }] });
  }

  /** A content chunk; the last one of a choice carries finish_reason and stop_reason. */
  content (index: number, text: string, finish: FinishReason | null, stopReason: StopReason, usage?: Record<string, unknown>): string {
    let choice: Record<string, unknown>;
    if (this.endpoint === 'chat') {
      choice = { index, delta: { content: text }, logprobs: null, finish_reason: finish };
      if (finish !== null) choice.stop_reason = stopReason;
    } else {
      choice = { index, text, logprobs: null, finish_reason: finish, stop_reason: stopReason };
    }
    const chunk: Record<string, unknown> = { ...this.head(), choices: [choice] };
    if (usage !== undefined) chunk.usage = usage;
    return sseEvent(chunk);
  }

  usage (usage: Record<string, unknown>): string {
    return sseEvent({ ...this.head(), choices: [], usage });
  }

  error (message: string, type: string, code: number): string {
    return sseEvent({ error: { message, type, param: null, code } });
  }
}

export interface OpenAiFormatOptions {
  /** Streamed: send the usage chunk (stream_options.include_usage or --enable-force-include-usage). */
  includeUsage: boolean;
  /** Streamed: usage on every chunk (stream_options.continuous_usage_stats). */
  continuousUsage: boolean;
  /** --enable-prompt-tokens-details. */
  promptTokensDetails: boolean;
}

/** /v1/chat/completions and /v1/completions, streamed or whole. */
export class OpenAiFormat implements OutputFormat {
  #writer: ChunkWriter | null = null;
  #info: RunInfo | null = null;

  constructor (private readonly endpoint: 'chat' | 'completion', private readonly opts: OpenAiFormatOptions) {}

  begin (info: RunInfo): void {
    this.#info = info;
    this.#writer = new ChunkWriter(this.endpoint, info.id, info.created, info.model);
  }

  streamPrelude (): string {
    return '';
  }

  streamStart (choiceIndexes: readonly number[]): string {
    return this.endpoint === 'chat' ? choiceIndexes.map((i) => this.#writer!.role(i)).join('') : '';
  }

  streamDelta (index: number, text: string, finish: FinishReason | null, stopReason: StopReason, promptTokens: number, generated: number): string {
    let usage: Record<string, unknown> | undefined;
    if (this.opts.includeUsage && this.opts.continuousUsage) {
      usage = { prompt_tokens: promptTokens, total_tokens: promptTokens + generated, completion_tokens: generated };
    }
    return this.#writer!.content(index, text, finish, stopReason, usage);
  }

  streamEnd (usage: UsageCounts, engineDead: boolean): string {
    const w = this.#writer!;
    if (engineDead) return w.error('EngineCore encountered an issue. See stack trace for the root cause.', 'InternalServerError', 500) + SSE_DONE;
    return (this.opts.includeUsage ? w.usage(streamUsageJson(usage, this.opts.promptTokensDetails)) : '') + SSE_DONE;
  }

  body (results: ChoiceResult[], usage: UsageCounts, kvTransferParams: Record<string, unknown> | null): string {
    const { id, created, model } = this.#info!;
    const u = usageJson(usage, this.opts.promptTokensDetails);
    return this.endpoint === 'chat'
      ? chatCompletionBody(id, created, model, results, u, kvTransferParams)
      : completionBody(id, created, model, results, u, kvTransferParams);
  }

  errorBody (err: HttpError): string {
    return errorJson(err);
  }
}
