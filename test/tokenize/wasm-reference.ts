// The encoders EAR used before byte-bpe.ts, as references for its exactness tests and its benchmark:
// tiktoken's WASM build for OpenAI's encodings, and the same WASM fed an HF vocabulary as ranks (what
// ranked-bpe.ts did). Each call builds a new WASM encoder: callers keep it for the test file's life.
import { createRequire } from 'node:module';
import type { Tiktoken, TiktokenEncoding } from 'tiktoken';
import { TIKTOKEN_ENCODINGS } from '../../src/tokenize/tiktoken.js';
import type { HfFiles } from '../../src/tokenize/hf.js';
import { byteLevelDecoding } from '../../src/tokenize/ranked-bpe.js';

const require = createRequire(import.meta.url);
const tiktoken = (): typeof import('tiktoken') => require('tiktoken') as typeof import('tiktoken');

export interface ReferenceEncoder {
  encode (text: string): number[];
}

const wrap = (enc: Tiktoken): ReferenceEncoder => ({ encode: (text) => Array.from(enc.encode(text, 'all')) });

/** tiktoken's WASM encoder for `encoding`, with EAR's ChatML ids as specials (as tiktoken.ts gives them). */
export function wasmTiktoken (encoding: string): ReferenceEncoder {
  return wrap(tiktoken().get_encoding(encoding as TiktokenEncoding, TIKTOKEN_ENCODINGS[encoding].chatml));
}

/** tiktoken's WASM BPE over a byte-level tokenizer.json's vocabulary (ranks = ids), split regex and added tokens. */
export function wasmRankedBpe (files: HfFiles): ReferenceEncoder {
  const json = files.tokenizerJSON as { model: { vocab: Record<string, number> }; added_tokens: { id: number; content: string }[]; pre_tokenizer: { pretokenizers: { pattern?: { Regex: string } }[] } };
  const byteOf = byteLevelDecoding();
  const b64: string[] = [];
  for (const [token, id] of Object.entries(json.model.vocab)) b64[id] = Buffer.from([...token].map((ch) => byteOf.get(ch)!)).toString('base64');
  const specials: Record<string, number> = {};
  for (const a of json.added_tokens) specials[a.content] = a.id;
  const pattern = json.pre_tokenizer.pretokenizers[0].pattern!.Regex;
  return wrap(new (tiktoken().Tiktoken)(`! 0 ${b64.join(' ')}`, specials, pattern));
}
