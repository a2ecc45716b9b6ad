// What the gateway and the simulator need from a tokenizer and a chat template.

/** One part of a multi-part message content (OpenAI format); only text parts contribute tokens here. */
export interface ContentPart {
  type: string;
  text?: string;
  [k: string]: unknown;
}

/** An OpenAI chat message as clients send it. */
export interface ChatMessage {
  role: string;
  content?: string | ContentPart[] | null;
  name?: string;
  tool_calls?: unknown[];
  tool_call_id?: string;
  reasoning_content?: string;
  [k: string]: unknown;
}

export interface RenderOptions {
  addGenerationPrompt: boolean;
  continueFinalMessage?: boolean;
  tools?: unknown[];
  chatTemplateKwargs?: Record<string, unknown>;
}

/** Renders messages to the exact prompt text the engine would build from them. */
export interface ChatTemplate {
  readonly name: string;
  render (messages: ChatMessage[], opts: RenderOptions): string;
}

export interface Tokenizer {
  /** The name it was created from, e.g. 'character', 'tiktoken:o200k_base', 'hf:qwen3'. */
  readonly name: string;
  readonly vocabSize: number;
  /** Token ids that end generation. */
  readonly eosTokenIds: readonly number[];
  /** The chat template that goes with this tokenizer. */
  readonly chatTemplate: ChatTemplate;
  /** Text → token ids. Special-token text (e.g. <|im_start|>) maps to the special ids, as engines do for rendered chat. */
  encode (text: string, opts?: { addSpecialTokens?: boolean }): number[];
  /**
   * Optional: encode(text, { addSpecialTokens: false }) as a typed array, for tokenizers that can build one
   * directly; hashing copies it into shared memory in one native call instead of id by id.
   */
  encodeIds? (text: string): Uint32Array;
  decode (ids: ArrayLike<number>): string;
}
