// Byte-level rank BPE in TypeScript: tiktoken's algorithm, for tiktoken's encodings and for Hugging Face
// byte-level BPE files whose merges follow their ranks (ranked-bpe.ts). Exactly what tiktoken computes:
// special-token text is cut out first (longest first); the text between is split by the encoding's regex;
// a piece whose bytes are one token is that token; any other piece is rank-BPE'd over its UTF-8 bytes
// (repeatedly join the adjacent pair whose joined bytes have the lowest rank, leftmost on ties).
//
// Why it is fast: the split is a hand-written scanner for the common patterns (split-scanner.ts) that reports
// pieces as ranges of the text, so no substring is made; most pieces are one token, found by a hash lookup on
// the piece's UTF-16 code units (piece-table.ts: no UTF-8 encoding, no string hash); the other pieces repeat
// constantly in agent traffic, so their ids are cached the same way. A cache miss encodes into reused buffers;
// a short piece (most are 2-12 bytes) is merged by tiktoken's simple array loop, a longer one with a heap,
// O(n log n) in the piece length, so a long run of punctuation or spaces cannot make it quadratic. On a miss
// the time goes to rank lookups in a table of ~8 MB (memory latency), so each reads one cache line.
//
// Bounds: the piece cache holds at most `cacheEntries` pieces of at most MAX_CACHED_PIECE chars (so at most
// 64k × 128 code units of keys, 16 MB, and their ids); at the bound it is cleared (counted in
// stats().cacheClears), which costs one refill and keeps no per-entry bookkeeping.

import { PieceTable, shareArray, type FrozenPieceTable } from './piece-table.js';
import { splitterFor, type Splitter } from './split-pattern.js';

const NONE = -1;
const TWO32 = 4294967296;
/** Longer pieces are encoded every time: rare, and they would make the cache's memory unbounded in practice. */
const MAX_CACHED_PIECE = 128;
/** Merge scratch kept between calls is at most this many bytes of piece (~41 bytes of scratch per byte);
 * a longer piece gets scratch that is dropped after it. */
const MAX_RETAINED_SCRATCH = 1 << 16;
/** Pieces of up to this many bytes are merged by #mergeShort (no heap). */
const SHORT_PIECE = 32;
/** #mergeShort's rank of a pair that is no token: above every id. */
const NO_PAIR = 0x7fffffff;

export interface ByteBpeStats {
  /** Pieces found in the cache, and pieces that were BPE'd (and cached when short enough). */
  cacheHits: number;
  cacheMisses: number;
  /** Times the cache reached its bound and was emptied. */
  cacheClears: number;
  cacheSize: number;
}

/** Token bytes by id: id i is bytes[offsets[i] .. offsets[i + 1]]; an empty span is an unassigned id. */
export interface TokenTable {
  bytes: Uint8Array;
  offsets: Int32Array;
}

export interface ByteBpeOptions {
  /** The pre-tokenizer's pattern, tiktoken's or the HF file's (split-pattern.ts builds the splitter). */
  pattern: string;
  /** Special-token text → id; cut out of the text before splitting, and decoded to its text. */
  specials: Record<string, number>;
  /** Piece cache bound. Default 65536. */
  cacheEntries?: number;
  /** Times the constructor encodes WARM_UP_TEXT (then empties the cache and zeroes the counters). Default 100. */
  warmUpRounds?: number;
}

/**
 * What a ByteBpe builds from its token table (~25 MB for a 150-200k vocabulary; with the file's parse, 0.3-0.9 s and
 * 80-150 MB of garbage), frozen: structured-clonable, its arrays on SharedArrayBuffers, so another thread makes an
 * encoder of it (ByteBpe.thaw) without the file and without a copy. Nothing in it is written after the build.
 */
export interface FrozenByteBpe {
  pattern: string;
  specials: Record<string, number>;
  cacheEntries: number;
  vocabSize: number;
  table: Int32Array;
  byteToken: Int32Array;
  twoByte: Int32Array;
  whole: FrozenPieceTable;
  bytes: Uint8Array;
  offsets: Int32Array;
}

/** The tables built from a token table (ByteBpe's constructor). */
type Tables = Omit<FrozenByteBpe, 'pattern' | 'specials' | 'cacheEntries' | 'whole'> & { whole: PieceTable };

/**
 * Text of the kinds agent prompts carry (prose, code, JSON, a table, box drawing, long punctuation runs, CJK,
 * Cyrillic, emoji), encoded by the constructor so that V8 has optimized the encoder before the first request:
 * a process's first 130k-token encode otherwise runs mostly unoptimized, 3-5× slower (bench/tokenize.ts,
 * "first encode of the process"). 100 rounds cost ~50-80 ms (they run before V8 has optimized anything), next
 * to the 0.2-0.7 s the tables take to build; a first encode of 130k tokens after them takes ~25 ms, not ~110 ms.
 */
const WARM_UP_TEXT = `The router's cache holds 1,024 sessions; each one is ~33.6k tokens (p99: 130k).
export function route (req: Request): number {
  const keys = hasher.keys(req.prompt); // block keys, 16 tokens each
  if (keys.length === 0) return -1;
  return index.longestPrefix(keys) >>> 0;
}
{"model": "qwen3", "messages": [{"role": "user", "content": "Résumé naïve café — 日本語のテキスト, Привет, мир! 🚀"}], "max_tokens": 256}
| name | value |
|------|------:|
| latency_p50_ms | 0.313 |
┌─────────┬──────┐
│ Stat    │ 2.5% │
└─────────┴──────┘
======================================================================
    interface HTMLElementEventMap { "fullscreenchange": Event; "fullscreenerror": Event; }
def main(argv):\n\treturn sum(int(x) for x in argv[1:]) if argv else 0
We'll see; they've said it's fine, and I'd agree. 0x7fffffff 3.14159e-10 2026-11-22T13:04:31Z https://example.com/a?b=c&d=e
`;

/** ES2024 string methods (Node 20 has them; the compile target's lib does not declare them). */
interface WellFormed { isWellFormed (): boolean; toWellFormed (): string }

function escapeRegExp (s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Decodes the UTF-8 bytes[from..to) into UTF-16 units (room for to - from); their count, or -1 if not valid UTF-8. */
function utf8ToUnits (bytes: Uint8Array, from: number, to: number, units: Uint16Array): number {
  let n = 0;
  for (let i = from; i < to;) {
    const b = bytes[i];
    let cp: number;
    let more: number;
    let min: number;
    if (b < 0x80) { cp = b; more = 0; min = 0; } else if (b >= 0xc2 && b < 0xe0) { cp = b & 0x1f; more = 1; min = 0x80; } else if (b >= 0xe0 && b < 0xf0) { cp = b & 0x0f; more = 2; min = 0x800; } else if (b >= 0xf0 && b < 0xf5) { cp = b & 0x07; more = 3; min = 0x10000; } else return -1;
    if (i + more >= to) return -1;
    for (let k = 1; k <= more; k++) {
      const c = bytes[i + k];
      if ((c & 0xc0) !== 0x80) return -1;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
    if (cp < 0x10000) units[n++] = cp;
    else {
      units[n++] = 0xd800 + ((cp - 0x10000) >> 10);
      units[n++] = 0xdc00 + ((cp - 0x10000) & 0x3ff);
    }
    i += more + 1;
  }
  return n;
}

/** Min-heap of numbers in heap[0..size): adds key at slot `size` and sifts it up. */
function heapPush (heap: Float64Array, size: number, key: number): void {
  let i = size;
  while (i > 0) {
    const parent = (i - 1) >> 1;
    if (heap[parent] <= key) break;
    heap[i] = heap[parent];
    i = parent;
  }
  heap[i] = key;
}

/** Removes heap[0] from a heap that held size + 1 keys (its last key, heap[size], takes the top and sifts down). */
function heapPopTop (heap: Float64Array, size: number): void {
  const last = heap[size];
  let i = 0;
  for (;;) {
    let c = 2 * i + 1;
    if (c >= size) break;
    if (c + 1 < size && heap[c + 1] < heap[c]) c++;
    if (heap[c] >= last) break;
    heap[i] = heap[c];
    i = c;
  }
  heap[i] = last;
}

/** rankKey's output: tag (hash with the low byte replaced by the length, capped at 255), first 8 bytes packed. */
const KEY = new Int32Array(3);

/** The rank table's key of bytes[from..to) into KEY: FNV-1a for the tag, the bytes little-endian, zero-padded. */
function rankKey (bytes: Uint8Array, from: number, to: number): void {
  let h = 0x811c9dc5;
  let lo = 0;
  let hi = 0;
  for (let i = from; i < to; i++) {
    const b = bytes[i];
    h = Math.imul(h ^ b, 0x01000193);
    const k = i - from;
    if (k < 4) lo |= b << (8 * k);
    else if (k < 8) hi |= b << (8 * (k - 4));
  }
  const len = to - from;
  KEY[0] = (h & ~0xff) | (len < 255 ? len : 255);
  KEY[1] = lo;
  KEY[2] = hi;
}

export class ByteBpe {
  /** One more than the largest assigned id (base tokens and specials). */
  readonly vocabSize: number;
  readonly #split: Splitter;
  readonly #special: RegExp | null;
  readonly #specialIds: Map<string, number>;
  /** Piece text → id for every base token whose bytes are valid UTF-8: the one-token pieces. */
  readonly #whole: PieceTable;
  /** Decode table: base tokens and specials. */
  readonly #bytes: Uint8Array;
  readonly #offsets: Int32Array;
  /** Open-addressing hash of base tokens' bytes for rank lookups during merges: slots of four (id + 1 or 0 = empty,
   * tag, first 8 bytes), so a lookup of a token of up to 8 bytes reads one cache line, and a longer one reads the
   * arena only when the tags agree. Two-byte tokens: #twoByte. */
  readonly #table: Int32Array;
  readonly #mask: number;
  readonly #byteToken: Int32Array;
  readonly #twoByte: Int32Array;
  readonly #pattern: string;
  readonly #specials: Record<string, number>;
  readonly #cacheEntries: number;
  /** Piece text → offset in #cachedIds of [count, ids…]. */
  readonly #cache: PieceTable;
  #cachedIds = new Int32Array(1 << 16);
  #cachedIdsUsed = 0;
  #stats = { cacheHits: 0, cacheMisses: 0, cacheClears: 0 };
  // The text and output of the encode in progress, for #piece (the splitter's callback).
  #text = '';
  #out: number[] = [];
  readonly #piece = (from: number, to: number): void => this.#encodePiece(from, to);
  // Merge scratch, grown on demand: piece bytes, per-part next/prev/token/pair rank, heap of (rank, part).
  #buf = new Uint8Array(256);
  #next = new Int32Array(256);
  #prev = new Int32Array(256);
  #tok = new Int32Array(256);
  #pair = new Int32Array(256);
  #heap = new Float64Array(768);

  /** `base` holds the mergeable tokens (rank = id); specials are never merged into. Frozen tables are used as they are. */
  constructor (base: TokenTable | FrozenByteBpe, opts: ByteBpeOptions) {
    this.#split = splitterFor(opts.pattern);
    this.#pattern = opts.pattern;
    this.#specials = opts.specials;
    this.#cacheEntries = opts.cacheEntries ?? 65536;
    this.#cache = new PieceTable(this.#cacheEntries);
    const specials = Object.entries(opts.specials).filter(([t]) => t.length > 0);
    this.#specialIds = new Map(specials);
    this.#special = specials.length === 0 ? null
      : new RegExp(specials.map(([t]) => t).sort((a, b) => b.length - a.length).map(escapeRegExp).join('|'), 'g');
    const t: Tables = 'table' in base ? { ...base, whole: PieceTable.thaw(base.whole) } : buildTables(base, specials);
    this.#table = t.table;
    this.#mask = t.table.length / 4 - 1;
    this.#byteToken = t.byteToken;
    this.#twoByte = t.twoByte;
    this.#whole = t.whole;
    this.vocabSize = t.vocabSize;
    this.#bytes = t.bytes;
    this.#offsets = t.offsets;

    for (let i = opts.warmUpRounds ?? 100; i > 0; i--) {
      this.encode(WARM_UP_TEXT);
      this.clearCache();
    }
    this.#stats = { cacheHits: 0, cacheMisses: 0, cacheClears: 0 };
  }

  /** An encoder over frozen tables (ByteBpe.freeze, maybe another thread's): no build, no copy; its own piece cache. */
  static thaw (frozen: FrozenByteBpe, warmUpRounds?: number): ByteBpe {
    return new ByteBpe(frozen, { pattern: frozen.pattern, specials: frozen.specials, cacheEntries: frozen.cacheEntries, warmUpRounds });
  }

  /** This encoder's tables on SharedArrayBuffers (copied), for ByteBpe.thaw on other threads. */
  freeze (): FrozenByteBpe {
    return {
      pattern: this.#pattern, specials: this.#specials, cacheEntries: this.#cacheEntries, vocabSize: this.vocabSize,
      table: shareArray(this.#table), byteToken: shareArray(this.#byteToken), twoByte: shareArray(this.#twoByte),
      whole: this.#whole.freeze(), bytes: shareArray(this.#bytes), offsets: shareArray(this.#offsets)
    };
  }

  stats (): ByteBpeStats {
    return { ...this.#stats, cacheSize: this.#cache.size };
  }

  /** Empties the piece cache (not counted as a clear at the bound). */
  clearCache (): void {
    this.#cache.clear();
    this.#cachedIdsUsed = 0;
  }

  /** Text → ids; special-token text becomes the special ids. Lone surrogates encode as U+FFFD (as TextEncoder does). */
  encode (text: string): number[] {
    const wf = text as unknown as WellFormed;
    if (!wf.isWellFormed()) text = wf.toWellFormed();
    const out: number[] = [];
    const special = this.#special;
    let from = 0;
    if (special !== null) {
      special.lastIndex = 0;
      for (let m = special.exec(text); m !== null; m = special.exec(text)) {
        if (m.index > from) this.#encodeOrdinary(text.slice(from, m.index), out);
        out.push(this.#specialIds.get(m[0])!);
        from = m.index + m[0].length;
      }
    }
    if (from < text.length) this.#encodeOrdinary(from === 0 ? text : text.slice(from), out);
    return out;
  }

  /** The bytes of these ids, concatenated. Throws RangeError on an id that is not assigned. */
  decodeBytes (ids: ArrayLike<number>): Uint8Array {
    const off = this.#offsets;
    let n = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      const len = Number.isInteger(id) && id >= 0 && id < this.vocabSize ? off[2 * id + 1] - off[2 * id] : 0;
      if (len <= 0) throw new RangeError(`token id ${id} is not assigned`);
      n += len;
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      out.set(this.#bytes.subarray(off[2 * id], off[2 * id + 1]), at);
      at += off[2 * id + 1] - off[2 * id];
    }
    return out;
  }

  #encodeOrdinary (text: string, out: number[]): void {
    this.#text = text;
    this.#out = out;
    this.#split(text, this.#piece);
    this.#text = '';
  }

  #encodePiece (from: number, to: number): void {
    const text = this.#text;
    const out = this.#out;
    const id = this.#whole.get(text, from, to);
    if (id >= 0) {
      out.push(id);
      return;
    }
    const at = this.#cache.get(text, from, to);
    if (at >= 0) {
      this.#stats.cacheHits++;
      const ids = this.#cachedIds;
      for (let i = at + 1, end = at + 1 + ids[at]; i < end; i++) out.push(ids[i]);
      return;
    }
    this.#stats.cacheMisses++;
    const start = out.length;
    this.#merge(text, from, to, out);
    if (to - from > MAX_CACHED_PIECE) return;
    const count = out.length - start;
    if (this.#cache.size >= this.#cache.capacity) {
      this.#cache.clear();
      this.#cachedIdsUsed = 0;
      this.#stats.cacheClears++;
    }
    if (this.#cachedIdsUsed + count + 1 > this.#cachedIds.length) {
      const grown = new Int32Array(Math.max(this.#cachedIds.length * 2, this.#cachedIdsUsed + count + 1));
      grown.set(this.#cachedIds.subarray(0, this.#cachedIdsUsed));
      this.#cachedIds = grown;
    }
    const ids = this.#cachedIds;
    const at2 = this.#cachedIdsUsed;
    ids[at2] = count;
    for (let i = 0; i < count; i++) ids[at2 + 1 + i] = out[start + i];
    this.#cachedIdsUsed += count + 1;
    this.#cache.set(text, from, to, at2);
  }

  /** The id of the base token whose bytes are buf[from..to), or NONE. */
  #rank (from: number, to: number): number {
    const buf = this.#buf;
    const len = to - from;
    if (len === 2) return this.#twoByte[(buf[from] << 8) | buf[from + 1]];
    rankKey(buf, from, to);
    const tag = KEY[0];
    const table = this.#table;
    const mask = this.#mask;
    for (let slot = (tag >>> 8) & mask; ; slot = (slot + 1) & mask) {
      const id = table[4 * slot] - 1;
      if (id < 0) return NONE;
      if (table[4 * slot + 1] !== tag) continue;
      if (len <= 8) {
        if (table[4 * slot + 2] === KEY[1] && table[4 * slot + 3] === KEY[2]) return id;
        continue;
      }
      // longer tokens are compared in the arena
      const bytes = this.#bytes;
      const s = this.#offsets[2 * id];
      if (this.#offsets[2 * id + 1] - s !== len) continue;
      let i = 0;
      while (i < len && bytes[s + i] === buf[from + i]) i++;
      if (i === len) return id;
    }
  }

  /** UTF-8 of text[from..to) into #buf (grown as needed); returns the byte count. */
  #utf8 (text: string, from: number, to: number): number {
    if (this.#buf.length < (to - from) * 3) this.#grow((to - from) * 3);
    const buf = this.#buf;
    let n = 0;
    for (let i = from; i < to; i++) {
      let c = text.charCodeAt(i);
      if (c < 0x80) buf[n++] = c;
      else if (c < 0x800) { buf[n++] = 0xc0 | (c >> 6); buf[n++] = 0x80 | (c & 0x3f); } else if (c >= 0xd800 && c < 0xdc00) {
        // a well-formed string: a high surrogate is followed by its low one
        c = 0x10000 + ((c - 0xd800) << 10) + (text.charCodeAt(++i) - 0xdc00);
        buf[n++] = 0xf0 | (c >> 18); buf[n++] = 0x80 | ((c >> 12) & 0x3f); buf[n++] = 0x80 | ((c >> 6) & 0x3f); buf[n++] = 0x80 | (c & 0x3f);
      } else { buf[n++] = 0xe0 | (c >> 12); buf[n++] = 0x80 | ((c >> 6) & 0x3f); buf[n++] = 0x80 | (c & 0x3f); }
    }
    return n;
  }

  #grow (bytes: number): void {
    this.#buf = new Uint8Array(bytes);
    this.#next = new Int32Array(bytes + 1);
    this.#prev = new Int32Array(bytes + 1);
    this.#tok = new Int32Array(bytes + 1);
    this.#pair = new Int32Array(bytes + 1);
    this.#heap = new Float64Array(3 * bytes + 3);
  }

  /**
   * Rank-BPE of the n bytes in #buf (a short piece), ids appended to out: tiktoken's own loop over an array of
   * part starts, each with the rank of the pair it starts (its part joined with the next); the lowest rank,
   * leftmost, is joined and the array closed up. Quadratic in n, but no heap and no linked list, which for the
   * few bytes of most pieces is cheaper than #merge's heap.
   */
  #mergeShort (n: number, out: number[]): void {
    const start = this.#next;
    const rank = this.#pair;
    const tok = this.#tok;
    const buf = this.#buf;
    for (let i = 0; i < n; i++) {
      start[i] = i;
      tok[i] = this.#byteToken[buf[i]];
    }
    start[n] = n;
    for (let i = 0; i + 1 < n; i++) {
      const r = this.#twoByte[(buf[i] << 8) | buf[i + 1]];
      rank[i] = r === NONE ? NO_PAIR : r;
    }
    rank[n - 1] = NO_PAIR;
    let parts = n;
    while (parts > 1) {
      let best = NO_PAIR;
      let i = -1;
      for (let k = 0; k + 1 < parts; k++) if (rank[k] < best) { best = rank[k]; i = k; }
      if (i < 0) break;
      // part i absorbs part i + 1; the pairs that i and i - 1 start change
      tok[i] = best;
      const r = i + 2 < parts ? this.#rank(start[i], start[i + 3]) : NONE;
      rank[i] = r === NONE ? NO_PAIR : r;
      if (i > 0) {
        const p = this.#rank(start[i - 1], start[i + 2]);
        rank[i - 1] = p === NONE ? NO_PAIR : p;
      }
      for (let k = i + 1; k < parts; k++) {
        start[k] = start[k + 1];
        rank[k] = rank[k + 1];
        tok[k] = tok[k + 1];
      }
      parts--;
    }
    for (let k = 0; k < parts; k++) out.push(tok[k]);
  }

  /**
   * Rank-BPE of one piece, ids appended to out. Parts are named by their first byte's index and linked in a
   * list; the heap holds (pair rank, left part) keys, so the minimum is the lowest rank, leftmost on ties,
   * as tiktoken picks. Stale heap entries (a part merged away or its pair changed) are skipped when popped.
   */
  #merge (text: string, from: number, to: number, out: number[]): void {
    const n = this.#utf8(text, from, to);
    const buf = this.#buf;
    if (n === 1) {
      out.push(this.#byteToken[buf[0]]);
      if (this.#buf.length > MAX_RETAINED_SCRATCH) this.#grow(MAX_RETAINED_SCRATCH);
      return;
    }
    if (n <= SHORT_PIECE) {
      this.#mergeShort(n, out);
      return;
    }
    const next = this.#next;
    const prev = this.#prev;
    const tok = this.#tok;
    const pair = this.#pair;
    const heap = this.#heap;
    let size = 0;
    for (let i = 0; i < n; i++) {
      next[i] = i + 1;
      prev[i] = i - 1;
      tok[i] = this.#byteToken[buf[i]];
    }
    for (let i = 0; i + 1 < n; i++) {
      const r = this.#rank(i, i + 2);
      pair[i] = r;
      if (r !== NONE) heapPush(heap, size++, r * TWO32 + i);
    }
    pair[n - 1] = NONE;
    while (size > 0) {
      const key = heap[0];
      heapPopTop(heap, --size);
      const r = Math.floor(key / TWO32);
      const i = key - r * TWO32;
      if (pair[i] !== r || tok[i] === NONE) continue; // stale
      // join part i with the part after it
      const j = next[i];
      const k = next[j];
      tok[i] = r;
      tok[j] = NONE;
      next[i] = k;
      if (k < n) {
        prev[k] = i;
        const nr = this.#rank(i, next[k]);
        pair[i] = nr;
        if (nr !== NONE) heapPush(heap, size++, nr * TWO32 + i);
      } else pair[i] = NONE;
      const p = prev[i];
      if (p >= 0) {
        const pr = this.#rank(p, k);
        pair[p] = pr;
        if (pr !== NONE) heapPush(heap, size++, pr * TWO32 + p);
      }
    }
    for (let i = 0; i < n; i = next[i]) out.push(tok[i]);
    if (this.#buf.length > MAX_RETAINED_SCRATCH) this.#grow(MAX_RETAINED_SCRATCH);
  }
}

const BASE64 = new Int8Array(128).fill(-1);
for (let i = 0; i < 64; i++) BASE64['ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'.charCodeAt(i)] = i;

/** ByteBpe's lookup and decode tables for `base` and its specials. */
function buildTables (base: TokenTable, specials: [string, number][]): Tables {
  const baseCount = base.offsets.length - 1;
  let size = 1;
  while (size < baseCount * 2) size *= 2;
  const table = new Int32Array(size * 4);
  const mask = size - 1;
  const byteToken = new Int32Array(256).fill(NONE);
  const twoByte = new Int32Array(65536).fill(NONE);
  const whole = new PieceTable(Math.max(1, baseCount));
  let units = new Uint16Array(64);
  for (let id = 0; id < baseCount; id++) {
    const from = base.offsets[id];
    const to = base.offsets[id + 1];
    if (to <= from) continue;
    rankKey(base.bytes, from, to);
    let slot = (KEY[0] >>> 8) & mask;
    while (table[4 * slot] !== 0) slot = (slot + 1) & mask;
    table[4 * slot] = id + 1;
    table[4 * slot + 1] = KEY[0];
    table[4 * slot + 2] = KEY[1];
    table[4 * slot + 3] = KEY[2];
    if (to - from === 1) byteToken[base.bytes[from]] = id;
    if (to - from === 2) twoByte[(base.bytes[from] << 8) | base.bytes[from + 1]] = id;
    if (units.length < to - from) units = new Uint16Array(to - from);
    const len = utf8ToUnits(base.bytes, from, to, units);
    if (len >= 0) whole.setCodes(units, len, id);
  }
  for (let b = 0; b < 256; b++) if (byteToken[b] === NONE) throw new Error(`byte-level BPE: byte ${b} is not a token`);

  // Decode table over all ids: the base tokens' bytes, then the specials' UTF-8 after them.
  let maxId = baseCount - 1;
  for (const [, id] of specials) if (id > maxId) maxId = id;
  const vocabSize = maxId + 1;
  const encoder = new TextEncoder();
  const specialBytes = specials.map(([t, id]) => [encoder.encode(t), id] as const);
  const total = base.offsets[baseCount] + specialBytes.reduce((n, [b]) => n + b.length, 0);
  const bytes = new Uint8Array(total);
  bytes.set(base.bytes.subarray(0, base.offsets[baseCount]));
  const starts = new Int32Array(vocabSize);
  const ends = new Int32Array(vocabSize);
  for (let id = 0; id < baseCount; id++) { starts[id] = base.offsets[id]; ends[id] = base.offsets[id + 1]; }
  let at = base.offsets[baseCount];
  for (const [b, id] of specialBytes) {
    if (id < baseCount && ends[id] > starts[id]) continue; // an added token that is a base token too
    bytes.set(b, at);
    starts[id] = at;
    ends[id] = at + b.length;
    at += b.length;
  }
  // offsets as (start, end) pairs: specials are not contiguous with the base ids
  const offsets = new Int32Array(vocabSize * 2);
  for (let id = 0; id < vocabSize; id++) { offsets[2 * id] = starts[id]; offsets[2 * id + 1] = ends[id]; }
  return { table, byteToken, twoByte, whole, vocabSize, bytes, offsets };
}

/** tiktoken's rank file body ("! <first rank> <base64 token> …", one rank per token) as a token table. */
export function tokenTableFromTiktoken (ranks: string): TokenTable {
  const parts = ranks.split(' ');
  const bytes = new Uint8Array(Math.ceil(ranks.length * 3 / 4));
  const starts: number[] = [];
  const ends: number[] = [];
  let rank = 0;
  let n = 0;
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i];
    if (part === '!') {
      rank = Number(parts[++i]);
      if (!Number.isInteger(rank) || rank < starts.length) throw new Error(`tiktoken ranks: bad rank marker "${parts[i]}"`);
      continue;
    }
    if (part === '') continue;
    // base64 → bytes, straight into the arena
    starts[rank] = n;
    let acc = 0;
    let bits = 0;
    for (let k = 0; k < part.length; k++) {
      const c = part.charCodeAt(k);
      if (c === 61) break; // '=' padding
      const v = c < 128 ? BASE64[c] : -1;
      if (v < 0) throw new Error(`tiktoken ranks: bad base64 "${part}"`);
      acc = (acc << 6) | v;
      bits += 6;
      if (bits >= 8) {
        bits -= 8;
        bytes[n++] = (acc >> bits) & 0xff;
      }
    }
    ends[rank++] = n;
  }
  const offsets = new Int32Array(starts.length + 1);
  const packed = new Uint8Array(n);
  let at = 0;
  for (let id = 0; id < starts.length; id++) {
    offsets[id] = at;
    if (starts[id] !== undefined) {
      packed.set(bytes.subarray(starts[id], ends[id]), at);
      at += ends[id] - starts[id];
    }
  }
  offsets[starts.length] = at;
  return { bytes: packed, offsets };
}

/** A token table from per-id bytes (holes are unassigned ids). */
export function tokenTable (tokens: (Uint8Array | undefined)[]): TokenTable {
  const offsets = new Int32Array(tokens.length + 1);
  let n = 0;
  for (let id = 0; id < tokens.length; id++) {
    offsets[id] = n;
    n += tokens[id]?.length ?? 0;
  }
  offsets[tokens.length] = n;
  const bytes = new Uint8Array(n);
  for (let id = 0; id < tokens.length; id++) if (tokens[id] !== undefined) bytes.set(tokens[id]!, offsets[id]);
  return { bytes, offsets };
}
