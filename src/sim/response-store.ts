// The Responses API's store of finished responses, kept in process memory as vLLM keeps them when
// VLLM_ENABLE_RESPONSES_API_STORE=1 (a dict it never prunes), with the chat messages each was generated from,
// so a later request's previous_response_id continues the conversation and GET /v1/responses/{id} answers.
// Bounded, unlike vLLM's: past `capacity` entries the oldest is dropped, and its id then answers 404 as an
// unknown one does. Capacity 0 is vLLM's default (the store flag off): store=true is ignored, nothing is kept.
import type { ChatMessage } from '../tokenize/types.js';

export interface StoredResponse {
  /** The response object as served (its `output` feeds the next turn). */
  response: Record<string, unknown>;
  /** The chat messages that response was generated from. */
  messages: readonly ChatMessage[];
}

export class ResponseStore {
  readonly #entries = new Map<string, StoredResponse>();

  constructor (readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 0) throw new RangeError(`response store capacity must be an integer >= 0, got ${capacity}`);
  }

  get size (): number {
    return this.#entries.size;
  }

  get (id: string): StoredResponse | undefined {
    return this.#entries.get(id);
  }

  put (id: string, entry: StoredResponse): void {
    if (this.capacity === 0) return;
    this.#entries.delete(id);
    while (this.#entries.size >= this.capacity) {
      const oldest = this.#entries.keys().next().value as string;
      this.#entries.delete(oldest);
    }
    this.#entries.set(id, entry);
  }
}
