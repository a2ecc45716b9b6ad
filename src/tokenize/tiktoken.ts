// OpenAI's BPE encodings through the `tiktoken` WASM build. One encoder per encoding per process (the
// registry caches it), so the WASM memory tiktoken allocates is never leaked per request.
//
// OpenAI publishes no chat template or ChatML ids for these encodings; EAR's choice: the ChatML markers get
// the ids they had in OpenAI's ChatML (cl100k: <|im_start|>=100264, <|im_end|>=100265) and the same offset
// above 200000 for o200k_base (200264, 200265), and EAR's ChatML template (templates/chatml.ts) renders chat.
import { createRequire } from 'node:module';
import type { Tiktoken, TiktokenEncoding } from 'tiktoken';
import type { ChatTemplate, Tokenizer } from './types.js';
import { checkTokenIds, TokenizeError } from './errors.js';

const require = createRequire(import.meta.url);

interface EncodingSpec {
  /** Ids of the base encoding, its own special tokens included. */
  baseVocab: number;
  chatml: Record<string, number>;
  endoftext: number;
}

export const TIKTOKEN_ENCODINGS: Record<string, EncodingSpec> = {
  o200k_base: { baseVocab: 200019, chatml: { '<|im_start|>': 200264, '<|im_end|>': 200265 }, endoftext: 199999 },
  cl100k_base: { baseVocab: 100277, chatml: { '<|im_start|>': 100264, '<|im_end|>': 100265 }, endoftext: 100257 }
};

export class TiktokenTokenizer implements Tokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly eosTokenIds: readonly number[];
  readonly chatTemplate: ChatTemplate;
  readonly #enc: Tiktoken;
  readonly #decoder = new TextDecoder('utf-8');

  constructor (encoding: string, chatTemplate: ChatTemplate) {
    const spec = TIKTOKEN_ENCODINGS[encoding];
    if (spec === undefined) throw new TokenizeError('EAR_ERR_TOKENIZER_UNKNOWN', `unknown tiktoken encoding ${encoding}`);
    const { get_encoding } = require('tiktoken') as typeof import('tiktoken');
    this.#enc = get_encoding(encoding as TiktokenEncoding, spec.chatml);
    this.name = `tiktoken:${encoding}`;
    this.vocabSize = Math.max(spec.baseVocab, ...Object.values(spec.chatml).map((id) => id + 1));
    // <|endoftext|> is the encoding's eos; <|im_end|> ends a turn of the ChatML template.
    this.eosTokenIds = [spec.endoftext, spec.chatml['<|im_end|>']];
    this.chatTemplate = chatTemplate;
  }

  /** No BOS/EOS is ever added by these encodings, so addSpecialTokens changes nothing. */
  encode (text: string): number[] {
    // 'all': special-token text (ChatML markers, <|endoftext|>) becomes the special ids, as for a rendered chat.
    return Array.from(this.#enc.encode(text, 'all'));
  }

  decode (ids: ArrayLike<number>): string {
    checkTokenIds(ids, this.vocabSize, this.name);
    try {
      return this.#decoder.decode(this.#enc.decode(Uint32Array.from(ids)));
    } catch (err) {
      // ids inside the range that the encoding leaves unassigned
      throw new TokenizeError('EAR_ERR_TOKEN_ID', `${this.name} cannot decode these ids: ${String(err)}`, { cause: err });
    }
  }

  /** Frees the WASM encoder; only for owners that created it outside the registry's cache. */
  free (): void {
    this.#enc.free();
  }
}
