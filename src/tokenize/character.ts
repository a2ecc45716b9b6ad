// The `character` tokenizer: the UTF-8 bytes of the text are the token ids 0..255, and the ChatML markers of
// EAR's ChatML template get ids of their own above 255 so a rendered chat encodes and decodes losslessly:
//   256 = <|im_start|>   257 = <|im_end|>   258 = <|endoftext|>
// The marker text anywhere in the input maps to its id (as engines do for special-token text), so
// decode(encode(s)) === s for every well-formed string. Used in approximate mode and by the simulator.
import type { ChatTemplate, Tokenizer } from './types.js';
import { checkTokenIds } from './errors.js';

export const CHARACTER_SPECIALS: readonly string[] = ['<|im_start|>', '<|im_end|>', '<|endoftext|>'];
const FIRST_SPECIAL = 256;
const SPECIAL_RE = /<\|(?:im_start|im_end|endoftext)\|>/g;
const SPECIAL_BYTES: readonly Uint8Array[] = CHARACTER_SPECIALS.map((m) => new TextEncoder().encode(m));
const LT = 0x3c;

/** Copies bytes[from, to) to out at k; returns the next k. Short runs by hand: a view for set() costs more. */
function copyRun (bytes: Uint8Array, from: number, to: number, out: Uint32Array, k: number): number {
  if (to - from > 64) {
    out.set(bytes.subarray(from, to), k);
    return k + to - from;
  }
  for (let i = from; i < to; i++) out[k++] = bytes[i];
  return k;
}

/** The id of the marker whose bytes start at `at` in bytes[0, len), or -1. */
function markerAt (bytes: Uint8Array, at: number, len: number): number {
  for (let m = 0; m < SPECIAL_BYTES.length; m++) {
    const mb = SPECIAL_BYTES[m];
    if (at + mb.length > len) continue;
    let i = 1;
    while (i < mb.length && bytes[at + i] === mb[i]) i++;
    if (i === mb.length) return FIRST_SPECIAL + m;
  }
  return -1;
}

export class CharacterTokenizer implements Tokenizer {
  readonly name = 'character';
  readonly vocabSize = FIRST_SPECIAL + CHARACTER_SPECIALS.length;
  /** <|im_end|> ends a ChatML turn, <|endoftext|> a document. */
  readonly eosTokenIds: readonly number[] = [257, 258];
  readonly chatTemplate: ChatTemplate;
  readonly #encoder = new TextEncoder();
  readonly #decoder = new TextDecoder('utf-8', { ignoreBOM: true }); // a leading U+FEFF is text (a token), not a byte-order mark to drop
  /** encodeIds's UTF-8 buffer (grown to the longest text seen, 3 bytes a UTF-16 unit) and its marker list. */
  #bytes = new Uint8Array(4096);
  readonly #marks: number[] = [];

  constructor (chatTemplate: ChatTemplate) {
    this.chatTemplate = chatTemplate;
  }

  encode (text: string): number[] {
    // Encode the pieces first and fill one array of the final size: growing it by push cost 3× as much
    // (3.2 ms against 1.1 ms for a 130 KB prompt).
    const { parts, n } = this.#pieces(text);
    const out = new Array<number>(n);
    let k = 0;
    for (const p of parts) {
      if (typeof p === 'number') out[k++] = p;
      else for (let i = 0; i < p.length; i++) out[k++] = p[i];
    }
    return out;
  }

  /**
   * The same ids in a typed array: the text encoded once into a reused buffer, the markers found in its bytes
   * (ASCII, so a byte match is a text match), each run between them copied in one native call. No array per
   * piece: a short chat's three TextEncoder arrays and the regex's matches were most of its tokenizing.
   */
  encodeIds (text: string): Uint32Array {
    if (this.#bytes.length <= text.length * 3) this.#bytes = new Uint8Array(Math.max(text.length * 3 + 1, this.#bytes.length * 2));
    const bytes = this.#bytes;
    const len = this.#encoder.encodeInto(text, bytes).written;
    bytes[len] = LT; // a sentinel: the search below stops here, not in what a longer text left behind
    // Markers as (byte position, id) pairs; their bytes are replaced by one id each.
    const marks = this.#marks;
    marks.length = 0;
    let n = len;
    for (let at = bytes.indexOf(LT, 0); at < len; at = bytes.indexOf(LT, at + 1)) {
      const id = markerAt(bytes, at, len);
      if (id < 0) continue;
      marks.push(at, id);
      n -= SPECIAL_BYTES[id - FIRST_SPECIAL].length - 1;
      at += SPECIAL_BYTES[id - FIRST_SPECIAL].length - 1;
    }
    const out = new Uint32Array(n);
    let from = 0;
    let k = 0;
    for (let i = 0; i < marks.length; i += 2) {
      const at = marks[i];
      k = copyRun(bytes, from, at, out, k);
      out[k++] = marks[i + 1];
      from = at + SPECIAL_BYTES[marks[i + 1] - FIRST_SPECIAL].length;
    }
    copyRun(bytes, from, len, out, k);
    return out;
  }

  /** The UTF-8 bytes of the text between special-token markers, and the markers' ids, in order. */
  #pieces (text: string): { parts: Array<Uint8Array | number>; n: number } {
    const parts: Array<Uint8Array | number> = [];
    let n = 0;
    let from = 0;
    for (const m of text.matchAll(SPECIAL_RE)) {
      if (m.index > from) {
        const b = this.#encoder.encode(text.slice(from, m.index));
        parts.push(b);
        n += b.length;
      }
      parts.push(FIRST_SPECIAL + CHARACTER_SPECIALS.indexOf(m[0]));
      n++;
      from = m.index + m[0].length;
    }
    if (from < text.length) {
      const b = this.#encoder.encode(from === 0 ? text : text.slice(from));
      parts.push(b);
      n += b.length;
    }
    return { parts, n };
  }

  decode (ids: ArrayLike<number>): string {
    checkTokenIds(ids, this.vocabSize, this.name);
    let text = '';
    let start = 0;
    const flush = (end: number): void => {
      if (end > start) text += this.#decoder.decode(Uint8Array.from(Array.prototype.slice.call(ids, start, end) as number[]));
    };
    for (let i = 0; i < ids.length; i++) {
      if (ids[i] >= FIRST_SPECIAL) {
        flush(i);
        text += CHARACTER_SPECIALS[ids[i] - FIRST_SPECIAL];
        start = i + 1;
      }
    }
    flush(ids.length);
    return text;
  }
}
