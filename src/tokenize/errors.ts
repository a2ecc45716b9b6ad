// Errors of the tokenize subsystem, each with a stable code so the HTTP edge can map them to OpenAI-style errors.
export type TokenizeErrorCode =
  | 'EAR_ERR_TOKENIZER_UNKNOWN' // a tokenizer name that is not in the registry
  | 'EAR_ERR_TOKENIZER_LOAD' // tokenizer files missing or unreadable
  | 'EAR_ERR_TOKEN_ID' // decode got an id outside the vocabulary
  | 'EAR_ERR_CHAT_TEMPLATE'; // messages the template cannot render

export class TokenizeError extends Error {
  readonly code: TokenizeErrorCode;
  constructor (code: TokenizeErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'TokenizeError';
    this.code = code;
  }
}

/** Throws unless every id is an integer in [0, vocabSize). */
export function checkTokenIds (ids: ArrayLike<number>, vocabSize: number, tokenizer: string): void {
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
      throw new TokenizeError('EAR_ERR_TOKEN_ID', `token id ${String(id)} at index ${i} is outside the vocabulary of ${tokenizer} (0..${vocabSize - 1})`);
    }
  }
}
