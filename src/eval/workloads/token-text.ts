// The text a workload's token ids stand for, for the drivers that send text (chat, Anthropic Messages, OpenAI
// Responses) rather than token ids. Each id is decoded on its own with the engines' tokenizer and a prompt's
// text is the concatenation of its ids' texts: so the text of a token prefix is a prefix of the text, and two
// prompts that share leading blocks share leading text (decoding a whole run at once would not give that: a
// run that ends inside a multi-byte character decodes differently once it goes on). An id whose bytes are not
// a whole character on their own decodes to U+FFFD, as the tokenizer does. The table is bounded by the ids a
// workload draws (TOKEN_SPAN entries from TOKEN_MIN, prompt-builder.ts).
import type { Tokenizer } from '../../tokenize/types.js';
import { TOKEN_MIN, TOKEN_SPAN } from './prompt-builder.js';

export class TokenText {
  readonly #decode: (ids: ArrayLike<number>) => string;
  readonly #table: Array<string | undefined> = new Array(TOKEN_SPAN);

  constructor (tokenizer: Pick<Tokenizer, 'decode'>) {
    this.#decode = (ids) => tokenizer.decode(ids);
  }

  /** The text of one workload token id (decoded once, then kept). */
  of (id: number): string {
    const i = id - TOKEN_MIN;
    if (!(i >= 0 && i < TOKEN_SPAN) || !Number.isInteger(i)) throw new RangeError(`token id ${id} is outside the workload's ids [${TOKEN_MIN}, ${TOKEN_MIN + TOKEN_SPAN})`);
    let s = this.#table[i];
    if (s === undefined) this.#table[i] = s = this.#decode([id]);
    return s;
  }

  /** The text of tokens[from, to). */
  text (tokens: ArrayLike<number>, from = 0, to = tokens.length): string {
    if (!(from >= 0 && from <= to && to <= tokens.length)) throw new RangeError(`range [${from}, ${to}) is outside ${tokens.length} tokens`);
    const parts: string[] = new Array(to - from);
    for (let i = from; i < to; i++) parts[i - from] = this.of(tokens[i]);
    return parts.join('');
  }
}
