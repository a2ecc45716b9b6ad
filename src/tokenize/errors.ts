// Errors of the tokenize subsystem, each with a stable code (what each means: src/errors/errors.ts).
import { EarError } from '../errors/errors.js';

export type TokenizeErrorCode = 'EAR_ERR_TOKENIZER_UNKNOWN' | 'EAR_ERR_TOKENIZER_LOAD' | 'EAR_ERR_TOKEN_ID' | 'EAR_ERR_CHAT_TEMPLATE';

export class TokenizeError extends EarError {
  declare readonly code: TokenizeErrorCode;
  constructor (code: TokenizeErrorCode, message: string, options?: { cause?: unknown }) {
    super(code, message, options);
    this.name = 'TokenizeError';
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
