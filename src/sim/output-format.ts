// How one generation is written to the client: the same engine run (generation-handler.ts) answers in the
// shape of the API that asked — OpenAI chat/completions, Anthropic Messages, OpenAI Responses. A format is
// created per request and may keep state (the text so far, the ids it made up).
import type { FinishReason } from './engine-types.js';
import type { HttpError } from './http-errors.js';
import type { ChoiceResult, StopReason, UsageCounts } from './openai-response.js';

/** What the run knows before the first output. */
export interface RunInfo {
  /** The request id (chatcmpl-…, cmpl-…, resp_…). */
  id: string;
  /** Unix seconds. */
  created: number;
  /** The model name reported. */
  model: string;
  /** The first prompt's tokens and max tokens (the dialects run one prompt). */
  promptTokens: number;
  maxTokens: number;
}

export interface OutputFormat {
  begin (info: RunInfo): void;
  /** Streamed: bytes written as soon as the request is accepted (before any output), or ''. */
  streamPrelude (): string;
  /** Streamed: bytes written before a request's first output (chat: one role chunk per choice). */
  streamStart (choiceIndexes: readonly number[]): string;
  /**
   * Streamed: one choice's new text; the last one carries its finish reason. `promptTokens` and `generated`
   * (its tokens so far) are for continuous usage. May return '' (nothing to send).
   */
  streamDelta (index: number, text: string, finish: FinishReason | null, stopReason: StopReason, promptTokens: number, generated: number): string;
  /** Streamed: the closing bytes, or the error event when the engine died. */
  streamEnd (usage: UsageCounts, engineDead: boolean): string;
  /** Whole: the JSON body. */
  body (results: ChoiceResult[], usage: UsageCounts, kvTransferParams: Record<string, unknown> | null): string;
  /** An error answered before any byte of the response (not streamed yet): status, headers, body. */
  errorBody (err: HttpError): string;
}
