// OpenAI's BPE encodings, encoded by byte-bpe.ts from the rank files the `tiktoken` package ships
// (node_modules/tiktoken/encoders/<encoding>.json: the split regex, the specials and the ranks), ~4x faster than
// tiktoken's WASM build and exactly equal to it (test/tokenize/byte-bpe.test.ts). One encoder per encoding per
// process: the registry caches it.
//
// OpenAI publishes no chat template or ChatML ids for these encodings; EAR's choice: the ChatML markers get
// the ids they had in OpenAI's ChatML (cl100k: <|im_start|>=100264, <|im_end|>=100265) and the same offset
// above 200000 for o200k_base (200264, 200265), and EAR's ChatML template (templates/chatml.ts) renders chat.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { ChatTemplate, Tokenizer } from './types.js';
import { checkTokenIds, TokenizeError } from './errors.js';
import { ByteBpe, tokenTableFromTiktoken, type ByteBpeStats, type FrozenByteBpe } from './byte-bpe.js';

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
  readonly #bpe: ByteBpe;
  readonly #decoder = new TextDecoder('utf-8', { ignoreBOM: true }); // a leading U+FEFF is text (a token), not a byte-order mark to drop

  /** `frozen`: the encoder's tables as another thread built them (freeze()); without, they are built from the rank file. */
  constructor (encoding: string, chatTemplate: ChatTemplate, frozen?: FrozenByteBpe) {
    const spec = TIKTOKEN_ENCODINGS[encoding];
    if (spec === undefined) throw new TokenizeError('EAR_ERR_TOKENIZER_UNKNOWN', `unknown tiktoken encoding ${encoding}`);
    if (frozen !== undefined) this.#bpe = ByteBpe.thaw(frozen);
    else {
      const file = require.resolve(`tiktoken/encoders/${encoding}.json`);
      let json: { pat_str: string; special_tokens: Record<string, number>; bpe_ranks: string };
      try {
        json = JSON.parse(readFileSync(file, 'utf8'));
      } catch (err) {
        throw new TokenizeError('EAR_ERR_TOKENIZER_LOAD', `cannot read ${file}: ${(err as Error).message}`, { cause: err });
      }
      this.#bpe = new ByteBpe(tokenTableFromTiktoken(json.bpe_ranks), { pattern: json.pat_str, specials: { ...json.special_tokens, ...spec.chatml } });
    }
    this.name = `tiktoken:${encoding}`;
    this.vocabSize = Math.max(spec.baseVocab, ...Object.values(spec.chatml).map((id) => id + 1));
    // <|endoftext|> is the encoding's eos; <|im_end|> ends a turn of the ChatML template.
    this.eosTokenIds = [spec.endoftext, spec.chatml['<|im_end|>']];
    this.chatTemplate = chatTemplate;
  }

  /** The encoder's tables on SharedArrayBuffers, for `new TiktokenTokenizer(encoding, template, frozen)` on another thread. */
  freeze (): FrozenByteBpe {
    return this.#bpe.freeze();
  }

  /** No BOS/EOS is ever added by these encodings, so addSpecialTokens changes nothing. */
  encode (text: string): number[] {
    // All special-token text (ChatML markers, <|endoftext|>) becomes the special ids, as for a rendered chat.
    return this.#bpe.encode(text);
  }

  decode (ids: ArrayLike<number>): string {
    checkTokenIds(ids, this.vocabSize, this.name);
    try {
      return this.#decoder.decode(this.#bpe.decodeBytes(ids));
    } catch (err) {
      // ids inside the range that the encoding leaves unassigned
      throw new TokenizeError('EAR_ERR_TOKEN_ID', `${this.name} cannot decode these ids: ${String(err)}`, { cause: err });
    }
  }

  /** Piece-cache counters of the encoder. */
  stats (): ByteBpeStats {
    return this.#bpe.stats();
  }

  /** Empties the encoder's piece cache (ids do not change; the next encodes run cold). */
  clearCache (): void {
    this.#bpe.clearCache();
  }
}
