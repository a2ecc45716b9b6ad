// A fast encoder for byte-level BPE tokenizer.json files whose merges are the ones tiktoken's rank-BPE
// implies: merges in token-id order, and each token's merge (a, b) is the last pair rank-BPE joins when it
// builds that token from its bytes (how vocabularies converted from tiktoken ranks are made: Qwen2/2.5/3,
// Llama 3). Then "apply the lowest-ranked merge" (HF) and "join the adjacent pair whose bytes have the lowest
// rank" (tiktoken) produce the same tokens, so rank-BPE (byte-bpe.ts), given the vocabulary as ranks and the
// file's split regex, encodes like the HF tokenizer at ~15x the speed of the pure-JS port. Checked in full
// at load; a file outside this shape gets null and the caller uses the general (pure JS) implementation.
// Unicode classes are pinned to Unicode 16 (unicode-16.ts), as in the engines' regex tables; the pure-JS engine
// reads them from Node's ICU (Unicode 17), so the two may split the ~4.7k code points new in 17 differently.
import { ByteBpe, tokenTable, type ByteBpeStats, type FrozenByteBpe } from './byte-bpe.js';
import { splitterFor, UnsupportedPatternError } from './split-pattern.js';

// GPT-2's ByteLevel pre-tokenizer regex (used when ByteLevel has use_regex: true).
const GPT2_PATTERN = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/** GPT-2's byte ↔ printable-character table that byte-level vocabularies are written in. */
export function byteLevelDecoding (): Map<string, number> {
  const direct: number[] = [];
  for (let b = 33; b <= 126; b++) direct.push(b);
  for (let b = 161; b <= 172; b++) direct.push(b);
  for (let b = 174; b <= 255; b++) direct.push(b);
  const map = new Map<string, number>();
  for (const b of direct) map.set(String.fromCodePoint(b), b);
  let n = 0;
  for (let b = 0; b < 256; b++) if (!direct.includes(b)) map.set(String.fromCodePoint(256 + n++), b);
  return map;
}

interface AddedTokenJson { id: number; content: string; lstrip?: boolean; rstrip?: boolean; single_word?: boolean; normalized?: boolean }
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function escapeRegExp (s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The split regex of a supported pre_tokenizer, or null. */
function splitPattern (pre: Json | null): string | null {
  if (pre === null || typeof pre !== 'object') return null;
  if (pre.type === 'ByteLevel') return pre.use_regex !== false && pre.add_prefix_space !== true ? GPT2_PATTERN : null;
  if (pre.type !== 'Sequence' || !Array.isArray(pre.pretokenizers) || pre.pretokenizers.length !== 2) return null;
  const [split, bl] = pre.pretokenizers as Json[];
  if (split.type !== 'Split' || typeof split.pattern?.Regex !== 'string' || split.behavior !== 'Isolated' || split.invert === true) return null;
  if (bl.type !== 'ByteLevel' || bl.use_regex === true || bl.add_prefix_space === true) return null;
  return split.pattern.Regex as string;
}

/** Ids the post-processor puts around a single sequence when special tokens are added. */
function postProcessorIds (post: Json | null): { prefix: number[]; suffix: number[] } | null {
  if (post === null || post === undefined) return { prefix: [], suffix: [] };
  if (post.type === 'ByteLevel') return { prefix: [], suffix: [] };
  if (post.type === 'Sequence' && Array.isArray(post.processors)) {
    const rest = (post.processors as Json[]).filter((p) => p.type !== 'ByteLevel');
    if (rest.length === 0) return { prefix: [], suffix: [] };
    return rest.length === 1 ? postProcessorIds(rest[0]) : null;
  }
  if (post.type !== 'TemplateProcessing' || !Array.isArray(post.single)) return null;
  const prefix: number[] = [];
  const suffix: number[] = [];
  let seenSequence = false;
  for (const piece of post.single as Json[]) {
    if (piece.Sequence !== undefined) {
      if (seenSequence) return null;
      seenSequence = true;
    } else if (piece.SpecialToken !== undefined) {
      const ids = post.special_tokens?.[piece.SpecialToken.id]?.ids;
      if (!Array.isArray(ids)) return null;
      (seenSequence ? suffix : prefix).push(...(ids as number[]));
    } else return null;
  }
  return seenSequence ? { prefix, suffix } : null;
}

/** transformers' clean_up_tokenization, applied by decode when the config asks for it. */
function cleanUpTokenization (text: string): string {
  return text.replace(/ \./g, '.').replace(/ \?/g, '?').replace(/ !/g, '!').replace(/ ,/g, ',')
    .replace(/ ' /g, "'").replace(/ n't/g, "n't").replace(/ 'm/g, "'m").replace(/ 's/g, "'s")
    .replace(/ 've/g, "'ve").replace(/ 're/g, "'re");
}

/** Byte-level token text → its bytes as a latin1 string (one char per byte), or null if not byte-level. */
function tokenBytes (token: string, decodeChar: Map<string, number>): string | null {
  let out = '';
  for (const ch of token) {
    const b = decodeChar.get(ch);
    if (b === undefined) return null;
    out += String.fromCharCode(b);
  }
  return out;
}

/**
 * Whether every merge is the one rank-BPE implies (see the head of this file): merges in id order, and for each
 * merged token, rank-BPE over its bytes using only lower ranks ends in exactly its merge's two parts.
 */
function mergesFollowRanks (vocab: Record<string, number>, merges: (string | [string, string])[], decodeChar: Map<string, number>): boolean {
  if (!Array.isArray(merges)) return false;
  const rank = new Map<string, number>();
  const bytesOf: string[] = [];
  for (const [token, id] of Object.entries(vocab)) {
    const bytes = tokenBytes(token, decodeChar);
    if (bytes === null) return false;
    rank.set(bytes, id);
    bytesOf[id] = bytes;
  }
  let last = -1;
  const parts: string[] = [];
  const pairRank: number[] = []; // pairRank[i]: rank of parts[i] + parts[i + 1], or Infinity
  const rankOf = (i: number, below: number): number => {
    const r = rank.get(parts[i] + parts[i + 1]);
    return r !== undefined && r < below ? r : Infinity;
  };
  for (const m of merges) {
    const [a, b] = typeof m === 'string' ? m.split(' ') : m;
    const ia = vocab[a];
    const ib = vocab[b];
    const id = vocab[a + b];
    if (ia === undefined || ib === undefined || id === undefined || id <= last) return false;
    last = id;
    // rank-BPE over the token's bytes, joining only pairs whose rank is below the token's own
    const bytes = bytesOf[id];
    parts.length = 0;
    for (let i = 0; i < bytes.length; i++) parts.push(bytes[i]);
    pairRank.length = 0;
    for (let i = 0; i + 1 < parts.length; i++) pairRank.push(rankOf(i, id));
    while (parts.length > 2) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i < pairRank.length; i++) if (pairRank[i] < bestRank) { bestRank = pairRank[i]; best = i; }
      if (best < 0) break;
      parts.splice(best, 2, parts[best] + parts[best + 1]);
      pairRank.splice(best, 1);
      if (best < pairRank.length) pairRank[best] = rankOf(best, id);
      if (best > 0) pairRank[best - 1] = rankOf(best - 1, id);
    }
    if (parts.length !== 2 || parts[0] !== bytesOf[ia] || parts[1] !== bytesOf[ib]) return false;
  }
  return true;
}

/** A RankedBpe as RankedBpe.thaw rebuilds it on another thread: its encoder's tables are shared, not copied. */
export interface FrozenRankedBpe {
  bpe: FrozenByteBpe;
  vocabSize: number;
  nfc: boolean;
  added: string[];
  post: { prefix: number[]; suffix: number[] };
  cleanUp: boolean;
}

export class RankedBpe {
  readonly vocabSize: number;
  readonly #bpe: ByteBpe;
  readonly #nfc: boolean;
  readonly #addedTokens: string[];
  readonly #added: RegExp | null;
  readonly #post: { prefix: number[]; suffix: number[] };
  readonly #cleanUp: boolean;
  readonly #decoder = new TextDecoder('utf-8', { ignoreBOM: true }); // a leading U+FEFF is text (a token), not a byte-order mark to drop

  private constructor (bpe: ByteBpe, vocabSize: number, nfc: boolean, added: string[], post: { prefix: number[]; suffix: number[] }, cleanUp: boolean) {
    this.#bpe = bpe;
    this.vocabSize = vocabSize;
    this.#nfc = nfc;
    this.#addedTokens = added;
    this.#added = added.length > 0 ? new RegExp([...added].sort((a, b) => b.length - a.length).map(escapeRegExp).join('|'), 'g') : null;
    this.#post = post;
    this.#cleanUp = cleanUp;
  }

  /**
   * The fast encoder for this tokenizer.json, or null when the file is outside the supported shape.
   * `mergesVerified` skips the merge check (~1 s of CPU for a 150k vocabulary) for a file a test has checked.
   */
  static tryFrom (json: Json, config: Json, opts: { mergesVerified?: boolean } = {}): RankedBpe | null {
    const model = json.model as Json | undefined;
    if (model?.type !== 'BPE' || (model.dropout ?? null) !== null || model.byte_fallback === true) return null;
    if ((model.continuing_subword_prefix ?? '') !== '' || (model.end_of_word_suffix ?? '') !== '') return null;
    const nfc = json.normalizer?.type === 'NFC';
    if (!nfc && (json.normalizer ?? null) !== null) return null;
    if (json.decoder?.type !== 'ByteLevel') return null;
    const pattern = splitPattern(json.pre_tokenizer ?? null);
    const post = postProcessorIds(json.post_processor ?? null);
    if (pattern === null || post === null) return null;
    const addedTokens = (json.added_tokens ?? []) as AddedTokenJson[];
    if (addedTokens.some((a) => a.lstrip === true || a.rstrip === true || a.single_word === true || a.normalized === true)) return null;

    // Vocabulary as ranks: ids must be 0..n-1, each a byte-level string.
    const vocab = model.vocab as Record<string, number>;
    const decodeChar = byteLevelDecoding();
    const entries = Object.entries(vocab);
    const tokens: Uint8Array[] = new Array(entries.length);
    for (const [token, id] of entries) {
      if (!Number.isInteger(id) || id < 0 || id >= entries.length || tokens[id] !== undefined) return null;
      const bytes: number[] = [];
      for (const ch of token) {
        const b = decodeChar.get(ch);
        if (b === undefined) return null;
        bytes.push(b);
      }
      tokens[id] = Uint8Array.from(bytes);
    }
    if (opts.mergesVerified !== true && !mergesFollowRanks(vocab, model.merges as (string | [string, string])[], decodeChar)) return null;
    const specials: Record<string, number> = {};
    let maxId = entries.length - 1;
    for (const a of addedTokens) {
      specials[a.content] = a.id;
      if (a.id > maxId) maxId = a.id;
    }
    try {
      splitterFor(pattern);
    } catch (err) {
      if (err instanceof UnsupportedPatternError) return null; // a regex construct V8 would read differently
      throw err;
    }
    let bpe: ByteBpe;
    try {
      bpe = new ByteBpe(tokenTable(tokens), { pattern, specials });
    } catch {
      return null; // e.g. a byte that is no token
    }
    return new RankedBpe(bpe, maxId + 1, nfc, addedTokens.map((a) => a.content), post, config.clean_up_tokenization_spaces === true);
  }

  /** Everything but the per-thread piece cache, its tables on SharedArrayBuffers (RankedBpe.thaw). */
  freeze (): FrozenRankedBpe {
    return { bpe: this.#bpe.freeze(), vocabSize: this.vocabSize, nfc: this.#nfc, added: this.#addedTokens, post: this.#post, cleanUp: this.#cleanUp };
  }

  static thaw (f: FrozenRankedBpe): RankedBpe {
    return new RankedBpe(ByteBpe.thaw(f.bpe), f.vocabSize, f.nfc, f.added, f.post, f.cleanUp);
  }

  encode (text: string, addSpecialTokens: boolean): number[] {
    const ids = this.#bpe.encode(this.#normalize(text));
    if (!addSpecialTokens || (this.#post.prefix.length === 0 && this.#post.suffix.length === 0)) return ids;
    return [...this.#post.prefix, ...ids, ...this.#post.suffix];
  }

  /** NFC as HF applies it: to the text between added tokens, never across one. */
  #normalize (text: string): string {
    if (!this.#nfc) return text;
    const whole = text.normalize('NFC');
    if (whole === text || this.#added === null) return whole;
    let out = '';
    let from = 0;
    for (const m of text.matchAll(this.#added)) {
      out += text.slice(from, m.index).normalize('NFC') + m[0];
      from = m.index + m[0].length;
    }
    return out + text.slice(from).normalize('NFC');
  }

  /** Piece-cache counters of the encoder. */
  stats (): ByteBpeStats {
    return this.#bpe.stats();
  }

  clearCache (): void {
    this.#bpe.clearCache();
  }

  /** Throws on ids the vocabulary lacks (the caller range-checks first). */
  decode (ids: ArrayLike<number>): string {
    const text = this.#decoder.decode(this.#bpe.decodeBytes(ids));
    return this.#cleanUp ? cleanUpTokenization(text) : text;
  }
}
