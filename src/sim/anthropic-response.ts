// POST /v1/messages answered as vLLM's Anthropic serving answers it (vllm/entrypoints/anthropic/serving.py:
// messages_full_converter, message_stream_converter; api_router.py), from the same run as a chat completion:
// - whole: the message with pydantic's exclude_none — id is the chat completion's (chatcmpl-…), content is one
//   text block when there is text, stop_reason maps stop → end_turn, length → max_tokens (a stop sequence is
//   still end_turn, stop_sequence absent), usage is {input_tokens, output_tokens} only: vLLM reports no cache
//   fields (cache_read_input_tokens) on this API;
// - streamed: `event: <type>\ndata: <json>\n\n` with exclude_unset, in vLLM's order: message_start (at the first
//   output; its message has no type/role, which vLLM leaves unset), then per text: content_block_start (at the
//   first non-empty text) and content_block_delta (text_delta), then content_block_stop, message_delta
//   (stop_reason, usage) and message_stop. No ping: vLLM sends none.
// The simulated model never calls a tool (no tool parser), so no tool_use block or stop_reason comes out.
import type { FinishReason } from './engine-types.js';
import { anthropicErrorJson } from './http-errors.js';
import type { HttpError } from './http-errors.js';
import type { ChoiceResult, UsageCounts } from './openai-response.js';
import type { OutputFormat, RunInfo } from './output-format.js';

const STOP_REASONS: Partial<Record<FinishReason, string>> = { stop: 'end_turn', length: 'max_tokens' };

export const anthropicEvent = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/** The count_tokens answer (exclude_none). */
export function countTokensBody (inputTokens: number): string {
  return JSON.stringify({ input_tokens: inputTokens, context_management: { original_input_tokens: inputTokens } });
}

export class AnthropicFormat implements OutputFormat {
  #info: RunInfo | null = null;
  #finish: FinishReason | null = null;
  /** The open text block's index, or -1. */
  #open = -1;
  #nextIndex = 0;

  begin (info: RunInfo): void {
    this.#info = info;
  }

  streamPrelude (): string {
    return '';
  }

  streamStart (): string {
    const { id, model, promptTokens } = this.#info!;
    return anthropicEvent('message_start', {
      type: 'message_start',
      message: { id, content: [], model, stop_reason: null, stop_sequence: null, usage: { input_tokens: promptTokens, output_tokens: 0 } }
    });
  }

  streamDelta (_index: number, text: string, finish: FinishReason | null): string {
    if (finish !== null) this.#finish = finish;
    if (text === '') return '';
    let out = '';
    if (this.#open < 0) {
      this.#open = this.#nextIndex;
      out += anthropicEvent('content_block_start', { type: 'content_block_start', content_block: { type: 'text', text: '' }, index: this.#open });
    }
    return out + anthropicEvent('content_block_delta', { type: 'content_block_delta', delta: { type: 'text_delta', text }, index: this.#open });
  }

  streamEnd (usage: UsageCounts, engineDead: boolean): string {
    // vLLM's converter cannot read the chat stream's error chunk and ends with its own error event.
    if (engineDead) return anthropicEvent('error', { type: 'error', error: { type: 'internal_error', message: 'EngineCore encountered an issue. See stack trace for the root cause.' } });
    let out = '';
    if (this.#open >= 0) {
      out += anthropicEvent('content_block_stop', { type: 'content_block_stop', index: this.#open });
      this.#open = -1;
      this.#nextIndex++;
    }
    out += anthropicEvent('message_delta', {
      type: 'message_delta',
      delta: { stop_reason: STOP_REASONS[this.#finish ?? 'stop'] ?? null },
      usage: { input_tokens: usage.promptTokens, output_tokens: usage.completionTokens }
    });
    return out + anthropicEvent('message_stop', { type: 'message_stop' });
  }

  body (results: ChoiceResult[], usage: UsageCounts, kvTransferParams: Record<string, unknown> | null): string {
    const { id, model } = this.#info!;
    const r = results[0];
    const msg: Record<string, unknown> = {
      id,
      type: 'message',
      role: 'assistant',
      content: r.text !== '' ? [{ type: 'text', text: r.text }] : [],
      model
    };
    const stop = r.finishReason === null ? undefined : STOP_REASONS[r.finishReason];
    if (stop !== undefined) msg.stop_reason = stop;
    msg.usage = { input_tokens: usage.promptTokens, output_tokens: usage.completionTokens };
    if (kvTransferParams !== null) msg.kv_transfer_params = kvTransferParams;
    return JSON.stringify(msg);
  }

  errorBody (err: HttpError): string {
    return anthropicErrorJson(err);
  }
}
