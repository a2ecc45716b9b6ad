// Incremental tokenization per session (issue 6 item 2): a turn re-encodes only the text after the last
// message boundary it shares with the session's previous turn.
//
// Why it is exact: every EAR tokenizer splits special-token text out of the input before anything else (HF's
// added-token splitter, tiktoken's special set, `character`), and encodes the pieces between specials
// independently. So the token ids before a special token that starts a message (<|im_start|>,
// <|start_header_id|>) do not depend on anything after it, and
//   encode(prefix + marker + rest) = encode(prefix) ++ encode(marker + rest).
// A turn renders its prompt in full (templates are not compositional: Qwen3 re-renders earlier assistant turns
// once a new query arrives), takes the longest common prefix with the previous turn's text, and keeps the
// previous tokens up to the last boundary inside that prefix. Markers that fail an independence check at
// construction (e.g. an added token with lstrip/rstrip, or text that is not one special id) are not used.
//
// A caller that knows the new prompt is the previous turn's text up to some offset plus a new tail (a chat rendered
// message by message, whose leading messages are unchanged: RenderedPieces) uses encodeSuffix, which touches only
// the tail and the text after the last boundary before the offset; the session's text is kept as parts for that,
// so no turn copies or compares the whole prompt.
//
// Bounds: at most `maxSessions` sessions and `maxBytes` of stored text and ids in all; the least recently used
// session is evicted first (counted in stats().evictions). A prompt larger than maxBytes alone is not stored.
import type { ChatMessage, RenderOptions, Tokenizer } from './types.js';

export interface IncrementalOptions {
  /** Sessions kept (LRU). Default 4096. */
  maxSessions?: number;
  /** Approximate bytes kept over all sessions: 2 per text char + 4 per token + 8 per boundary. Default 512 MiB. */
  maxBytes?: number;
  /** Special-token texts that start a message. Default: ChatML's and Llama 3's. */
  markers?: readonly string[];
}

export interface SuffixResult {
  /** The prompt's token ids. Shared with the session's stored state: read it, do not write to it; valid until the session's next turn. */
  ids: Uint32Array;
  /** Tokens taken from the session's previous turn without re-encoding. */
  reusedTokens: number;
  /** Names this turn's stored state: encodeSuffix takes it to check it extends the state it means. */
  turn: number;
}

export interface IncrementalResult extends SuffixResult {
  text: string;
}

export interface IncrementalStats {
  sessions: number;
  bytes: number;
  turns: number;
  reusedTokens: number;
  encodedTokens: number;
  evictions: number;
  /** Prompts not stored because they alone exceed maxBytes. */
  oversized: number;
}

interface SessionState {
  /** The prompt text, in parts (their concatenation); one part after a full encodeText. */
  parts: string[];
  /** Total length of the parts. */
  length: number;
  turn: number;
  /** Holds ids, with room to grow (reused by the next turn). */
  buf: Uint32Array;
  ids: Uint32Array;
  /** Pairs (char offset, token index) at each marker start, ascending; [0, 0] first. */
  cuts: Int32Array;
  bytes: number;
}

/** Parts kept per session before they are joined into one (each encodeSuffix adds one). */
const MAX_PARTS = 64;

/** The session's text as one string (joins the parts once). */
function textOf (s: SessionState): string {
  if (s.parts.length > 1) s.parts = [s.parts.join('')];
  return s.parts[0] ?? '';
}

/** Characters [from, to) of the session's text, touching only the parts that hold them. */
function charsOf (s: SessionState, from: number, to: number): string {
  let out = '';
  let at = s.length;
  for (let i = s.parts.length - 1; i >= 0 && at > from; i--) {
    const p = s.parts[i];
    const start = at - p.length;
    if (start < to) out = p.slice(Math.max(0, from - start), Math.min(p.length, to - start)) + out;
    at = start;
  }
  return out;
}

/** The parts of the session's text up to `end`. */
function partsUpTo (s: SessionState, end: number): string[] {
  const out: string[] = [];
  let at = 0;
  for (const p of s.parts) {
    if (at >= end) break;
    out.push(at + p.length <= end ? p : p.slice(0, end - at));
    at += p.length;
  }
  return out;
}

export const DEFAULT_MARKERS: readonly string[] = ['<|im_start|>', '<|start_header_id|>'];

function escapeRegExp (s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** Length of the longest common prefix of a and b; compares in large slices first (native compare). */
export function commonPrefixLength (a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  if (a.length <= b.length && b.startsWith(a)) return n;
  let i = 0;
  for (const step of [65536, 4096, 256]) {
    while (i + step <= n && a.slice(i, i + step) === b.slice(i, i + step)) i += step;
  }
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

export class IncrementalTokenizer {
  readonly tokenizer: Tokenizer;
  readonly markers: readonly string[];
  readonly #maxSessions: number;
  readonly #maxBytes: number;
  readonly #split: RegExp | null;
  /** Length of the longest marker. */
  readonly #maxMarker: number;
  #turns = 0;
  readonly #sessions = new Map<string, SessionState>(); // insertion order = LRU order
  #bytes = 0;
  #stats = { turns: 0, reusedTokens: 0, encodedTokens: 0, evictions: 0, oversized: 0 };

  constructor (tokenizer: Tokenizer, opts: IncrementalOptions = {}) {
    this.tokenizer = tokenizer;
    this.#maxSessions = opts.maxSessions ?? 4096;
    this.#maxBytes = opts.maxBytes ?? 512 * 2 ** 20;
    if (!(this.#maxSessions >= 1) || !(this.#maxBytes >= 1)) throw new RangeError('maxSessions and maxBytes must be >= 1');
    this.markers = (opts.markers ?? DEFAULT_MARKERS).filter((m) => this.#isBoundary(m));
    this.#split = this.markers.length > 0 ? new RegExp(this.markers.map(escapeRegExp).join('|'), 'g') : null;
    this.#maxMarker = Math.max(0, ...this.markers.map((m) => m.length));
  }

  /** A marker is a boundary if it is one token and the text on either side encodes independently of it. */
  #isBoundary (marker: string): boolean {
    const enc = (s: string): number[] => this.tokenizer.encode(s, { addSpecialTokens: false });
    const id = enc(marker);
    if (id.length !== 1) return false;
    for (const [a, b] of [['a ', ' b'], ['x\n', '\ny'], ['1', '2']]) {
      if (enc(a + marker + b).join() !== [...enc(a), id[0], ...enc(b)].join()) return false;
    }
    return true;
  }

  /** Renders `messages` with the tokenizer's chat template and encodes the prompt, reusing the session's previous turn. */
  encodeChat (session: string, messages: ChatMessage[], opts: RenderOptions): IncrementalResult {
    return this.encodeText(session, this.tokenizer.chatTemplate.render(messages, opts));
  }

  /** Encodes `text` (with addSpecialTokens=false, as engines tokenize a rendered chat), reusing the session's previous turn. */
  encodeText (session: string, text: string): IncrementalResult {
    this.#stats.turns++;
    const turn = ++this.#turns;
    const prev = this.#sessions.get(session);
    let keepChars = 0;
    let keepTokens = 0;
    let keepCuts = 1;
    let recordFirst = false; // whether the marker at keepChars still needs its boundary recorded
    if (prev !== undefined) {
      this.#remove(session, prev);
      const prevText = textOf(prev);
      if (prevText === text) {
        this.#stats.reusedTokens += prev.ids.length;
        prev.turn = turn;
        this.#store(session, prev);
        return { text, ids: prev.ids, reusedTokens: prev.ids.length, turn };
      }
      const lcp = commonPrefixLength(prevText, text);
      const cuts = prev.cuts;
      if (lcp === prevText.length && this.#markerLengthAt(text, lcp) > 0) {
        // The previous prompt is a prefix and a message starts right after it: keep all of it.
        keepChars = lcp;
        keepTokens = prev.ids.length;
        keepCuts = cuts.length / 2;
        recordFirst = true;
      }
      // Else the last boundary whose whole marker lies in the common prefix (so `text` has the marker there too).
      for (let j = cuts.length / 2 - 1; j >= 1 && !recordFirst; j--) {
        const at = cuts[2 * j];
        if (at + this.#markerLengthAt(prevText, at) <= lcp) {
          keepChars = at;
          keepTokens = cuts[2 * j + 1];
          keepCuts = j + 1;
          break;
        }
      }
    }
    const ids = this.#finish(session, prev, [text], text.length, turn, text.slice(keepChars), keepChars, keepTokens, keepCuts, recordFirst);
    return { text, ids, reusedTokens: keepTokens, turn };
  }

  /**
   * Encodes the prompt made of the session's previous text up to char `at`, then `tail`, touching only `tail`
   * and the text after the last boundary before `at`. `turn` is the previous turn's (its result's `turn`):
   * null when the session's state is not that turn's any more (evicted, or another call came between), and
   * then the caller encodes the whole text with encodeText.
   */
  encodeSuffix (session: string, turn: number, at: number, tail: string): SuffixResult | null {
    const prev = this.#sessions.get(session);
    if (prev === undefined || prev.turn !== turn || !(at >= 0 && at <= prev.length)) return null;
    this.#stats.turns++;
    const next = ++this.#turns;
    this.#remove(session, prev);
    const cuts = prev.cuts;
    const tailMarker = this.#markerLengthAt(tail, 0) > 0;
    let keepChars = 0;
    let keepTokens = 0;
    let keepCuts = 1;
    let recordFirst = false;
    if (at === prev.length && tailMarker) {
      // A message starts right after the whole previous prompt: keep all of it.
      keepChars = at;
      keepTokens = prev.ids.length;
      keepCuts = cuts.length / 2;
      recordFirst = true;
    } else {
      // The last boundary at or before `at` that the new text has too: its marker lies wholly before `at`,
      // or it is at `at` and the tail starts with a marker.
      for (let j = cuts.length / 2 - 1; j >= 1; j--) {
        const c = cuts[2 * j];
        if (c > at) continue;
        const ok = c === at ? tailMarker : c + this.#markerLengthAt(charsOf(prev, c, Math.min(prev.length, c + this.#maxMarker)), 0) <= at;
        if (ok) {
          keepChars = c;
          keepTokens = cuts[2 * j + 1];
          keepCuts = j + 1;
          break;
        }
      }
    }
    const parts = partsUpTo(prev, at);
    parts.push(tail);
    const ids = this.#finish(session, prev, parts, at + tail.length, next, charsOf(prev, keepChars, at) + tail, keepChars, keepTokens, keepCuts, recordFirst);
    return { ids, reusedTokens: keepTokens, turn: next };
  }

  /** Encodes `rest` (the text from char keepChars on) after the kept tokens and stores the session's new state. */
  #finish (session: string, prev: SessionState | undefined, parts: string[], length: number, turn: number, rest: string,
    keepChars: number, keepTokens: number, keepCuts: number, recordFirst: boolean): Uint32Array {
    const tail = this.#encodeFrom(rest, keepChars, keepTokens, recordFirst);
    const n = keepTokens + tail.ids.length;
    // The previous turn's buffer, when it has room, already holds the kept tokens: only the new ones are written.
    let buf = prev?.buf;
    if (buf === undefined || buf.length < n) {
      buf = new Uint32Array(Math.max(n, Math.ceil(n * 1.25)));
      if (prev !== undefined && keepTokens > 0) buf.set(prev.ids.subarray(0, keepTokens));
    }
    tail.ids.writeTo(buf, keepTokens);
    const ids = buf.subarray(0, n);
    const cuts = new Int32Array(2 * keepCuts + tail.cuts.length);
    if (prev !== undefined) cuts.set(prev.cuts.subarray(0, 2 * keepCuts));
    cuts.set(tail.cuts, 2 * keepCuts);
    this.#stats.reusedTokens += keepTokens;
    this.#stats.encodedTokens += tail.ids.length;
    const state: SessionState = { parts, length, turn, buf, ids, cuts, bytes: 2 * length + 4 * buf.length + 4 * cuts.length };
    if (parts.length > MAX_PARTS) textOf(state);
    this.#store(session, state);
    return ids;
  }

  #markerLengthAt (text: string, at: number): number {
    for (const m of this.markers) if (text.startsWith(m, at)) return m.length;
    return 0;
  }

  /**
   * Encodes `rest` (the prompt from char `offset` on) piece by piece at marker starts, recording a boundary
   * (prompt offset, token index) at each; a marker at the start of `rest` is recorded only if `recordFirst`.
   */
  #encodeFrom (rest: string, offset: number, firstToken: number, recordFirst: boolean): { ids: Pieces; cuts: number[] } {
    const ids = new Pieces();
    const cuts: number[] = [];
    const tok = this.tokenizer;
    // A typed array per piece where the tokenizer makes one (character: one native copy), kept as it came: the
    // pieces are written once, into the session's buffer (pushing each id into one array was most of a turn).
    const enc = (a: number, b: number): void => {
      if (b <= a) return;
      const text = rest.slice(a, b);
      ids.add(tok.encodeIds !== undefined ? tok.encodeIds(text) : tok.encode(text, { addSpecialTokens: false }));
    };
    let start = 0;
    if (this.#split !== null) {
      // A marker at the start begins the first piece; its boundary is usually among the kept ones already.
      this.#split.lastIndex = recordFirst ? 0 : 1;
      for (let m = this.#split.exec(rest); m !== null; m = this.#split.exec(rest)) {
        if (m.index + offset === 0) continue; // offset 0 is always the first boundary
        enc(start, m.index);
        cuts.push(offset + m.index, firstToken + ids.length);
        start = m.index;
      }
    }
    enc(start, rest.length);
    return { ids, cuts };
  }

  #store (session: string, state: SessionState): void {
    if (state.bytes > this.#maxBytes) { this.#stats.oversized++; return; }
    while (this.#sessions.size >= this.#maxSessions || this.#bytes + state.bytes > this.#maxBytes) {
      const [oldest, s] = this.#sessions.entries().next().value as [string, SessionState];
      this.#remove(oldest, s);
      this.#stats.evictions++;
    }
    this.#sessions.set(session, state);
    this.#bytes += state.bytes;
  }

  #remove (session: string, state: SessionState): void {
    this.#sessions.delete(session);
    this.#bytes -= state.bytes;
  }

  /** Drops a session's state (e.g. when the session ends). */
  forget (session: string): void {
    const s = this.#sessions.get(session);
    if (s !== undefined) this.#remove(session, s);
  }

  stats (): IncrementalStats {
    return { sessions: this.#sessions.size, bytes: this.#bytes, ...this.#stats };
  }
}

/** Token ids in pieces, written out once. */
class Pieces {
  readonly #parts: Array<Uint32Array | readonly number[]> = [];
  length = 0;

  add (ids: Uint32Array | readonly number[]): void {
    if (ids.length === 0) return;
    this.#parts.push(ids);
    this.length += ids.length;
  }

  writeTo (out: Uint32Array, at: number): void {
    for (const p of this.#parts) {
      out.set(p, at);
      at += p.length;
    }
  }
}
