// A session's chat request body parsed without re-parsing its unchanged history. An agent's turn resends the
// whole conversation (~140 KB for 35k tokens); decoding and parsing it all costs ~0.35 ms a turn. When the
// bytes up to the end of message k are the previous body's, messages 0..k parse to what they parsed to then,
// so the previous objects are reused and JSON.parse reads the body with those messages cut out.
//
// Why it is exact: a JSON value's parse depends only on its own bytes, and the bytes before it fix where it
// sits (here: element i of the top-level "messages" array). The cut body is the same document minus those
// elements (and the comma after them), valid exactly when the whole body is, given the checks in tailOf (no
// trailing comma left, no later "messages" key overriding the array). The cut is at ASCII bytes, so UTF-8
// decoding (with its U+FFFD replacements) gives the same strings. Anything unexpected parses the whole body.
// The reused objects are shared with the previous turn: nothing may modify parsed messages.

/** What the next turn needs from this one. */
export interface ChatBodyState {
  /** This body (a copy, in a buffer the next turn reuses: see parseChatBody). */
  readonly bytes: Buffer;
  /** Offset of the '[' of the top-level "messages" array (the last such key: JSON.parse keeps the last). */
  readonly open: number;
  /** Offset just past each element of that array. */
  readonly ends: readonly number[];
  /** Its parsed elements. */
  readonly messages: readonly unknown[];
}

export interface ParsedChatBody {
  /** JSON.parse(body): the same value, its leading messages possibly the previous turn's objects. */
  doc: unknown;
  /** For the next turn; null if the body has no top-level "messages" array. */
  state: ChatBodyState | null;
  /** Leading messages taken from the previous turn. */
  reused: number;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const MESSAGES = Buffer.from('messages');

function isSpace (c: number): boolean {
  return c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;
}

function skipSpace (b: Buffer, i: number): number {
  while (i < b.length && isSpace(b[i])) i++;
  return i;
}

/** End (past the closing quote) of the string starting at b[i] === '"', or -1. */
function stringEnd (b: Buffer, i: number): number {
  for (let j = i + 1; ;) {
    const q = b.indexOf(QUOTE, j);
    if (q < 0) return -1;
    let slashes = 0;
    for (let k = q - 1; k > i && b[k] === BACKSLASH; k--) slashes++;
    if (slashes % 2 === 0) return q + 1;
    j = q + 1;
  }
}

/** End of the JSON value starting at b[i] (not validated: JSON.parse does that), or -1. */
function valueEnd (b: Buffer, i: number): number {
  const c = b[i];
  if (c === QUOTE) return stringEnd(b, i);
  if (c === 0x7b || c === 0x5b) { // { [
    let depth = 0;
    for (let j = i; j < b.length;) {
      const d = b[j];
      if (d === QUOTE) {
        j = stringEnd(b, j);
        if (j < 0) return -1;
        continue;
      }
      if (d === 0x7b || d === 0x5b) depth++;
      else if (d === 0x7d || d === 0x5d) {
        if (--depth === 0) return j + 1;
      }
      j++;
    }
    return -1;
  }
  let j = i;
  while (j < b.length && !isSpace(b[j]) && b[j] !== 0x2c && b[j] !== 0x5d && b[j] !== 0x7d && b[j] !== 0x3a) j++;
  return j > i ? j : -1;
}

/** Whether the key string b[s, e) (quotes included) is "messages", escapes decoded. */
function isMessagesKey (b: Buffer, s: number, e: number): boolean {
  let escaped = false;
  for (let i = s + 1; i < e - 1 && !escaped; i++) escaped = b[i] === BACKSLASH;
  if (!escaped) return e - s === MESSAGES.length + 2 && MESSAGES.compare(b, s + 1, e - 1) === 0;
  try { return JSON.parse(b.toString('utf8', s, e)) === 'messages'; } catch { return false; }
}

/** Elements of the array whose ']' or first element is at or after i (inside the array): their ends and the ']'. */
function elements (b: Buffer, i: number, ends: number[]): number {
  i = skipSpace(b, i);
  if (b[i] === 0x5d) return i;
  for (;;) {
    const e = valueEnd(b, i);
    if (e < 0) return -1;
    ends.push(e);
    i = skipSpace(b, e);
    if (b[i] === 0x5d) return i;
    if (b[i] !== 0x2c) return -1;
    i = skipSpace(b, i + 1);
    if (b[i] === 0x5d) return -1; // a trailing comma
  }
}

/**
 * The rest of the top-level object after the messages array's ']' at `close`: true if it has no further
 * "messages" key (which would replace the array). Structure only; JSON.parse validates.
 */
function noLaterMessages (b: Buffer, close: number): boolean {
  let i = skipSpace(b, close + 1);
  while (b[i] === 0x2c) {
    i = skipSpace(b, i + 1);
    if (b[i] !== QUOTE) return false;
    const ke = stringEnd(b, i);
    if (ke < 0 || isMessagesKey(b, i, ke)) return false;
    i = skipSpace(b, ke);
    if (b[i] !== 0x3a) return false;
    i = valueEnd(b, skipSpace(b, i + 1));
    if (i < 0) return false;
    i = skipSpace(b, i);
  }
  return b[i] === 0x7d;
}

/** The top-level "messages" array of a valid JSON body: its '[' and element ends; null if there is none. */
function locate (b: Buffer): { open: number; ends: number[] } | null {
  let i = skipSpace(b, 0);
  if (b[i] !== 0x7b) return null;
  let found: { open: number; ends: number[] } | null = null;
  i = skipSpace(b, i + 1);
  if (b[i] === 0x7d) return null;
  for (;;) {
    if (b[i] !== QUOTE) return null;
    const ke = stringEnd(b, i);
    if (ke < 0) return null;
    const key = isMessagesKey(b, i, ke);
    i = skipSpace(b, ke);
    if (b[i] !== 0x3a) return null;
    i = skipSpace(b, i + 1);
    if (key) {
      found = null; // a later "messages" replaces an earlier one
      if (b[i] === 0x5b) {
        const ends: number[] = [];
        const close = elements(b, i + 1, ends);
        if (close < 0) return null;
        found = { open: i, ends };
        i = close + 1;
      } else i = valueEnd(b, i);
    } else i = valueEnd(b, i);
    if (i < 0) return null;
    i = skipSpace(b, i);
    if (b[i] === 0x7d) return found;
    if (b[i] !== 0x2c) return null;
    i = skipSpace(b, i + 1);
  }
}

/** Length of the common prefix of a and b (native compares, large chunks first). */
function commonPrefix (a: Buffer, b: Buffer): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  for (const step of [16384, 1024, 64]) {
    while (i + step <= n && a.compare(b, i, i + step, i, i + step) === 0) i += step;
  }
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/**
 * A copy of `raw` for the next turn, in `prev`'s buffer when it is large enough: its first `same` bytes are
 * raw's already, so only the rest is copied (a fresh 140 KB buffer costs ~40 µs to allocate and fill).
 */
function keep (raw: Buffer, prev: ChatBodyState | null, same: number): Buffer {
  const old = prev?.bytes;
  if (old === undefined || old.buffer.byteLength < raw.length || old.byteOffset !== 0) {
    const b = Buffer.allocUnsafeSlow(Math.max(raw.length, Math.ceil(raw.length * 1.25)));
    raw.copy(b);
    return b.subarray(0, raw.length);
  }
  const b = Buffer.from(old.buffer, 0, raw.length);
  raw.copy(b, same, same);
  return b;
}

function fullParse (raw: Buffer, prev: ChatBodyState | null, same: number): ParsedChatBody {
  const doc: unknown = JSON.parse(raw.toString('utf8'));
  const at = locate(raw);
  const messages = doc !== null && typeof doc === 'object' ? (doc as Record<string, unknown>).messages : undefined;
  const state = at !== null && Array.isArray(messages) && messages.length === at.ends.length
    ? { bytes: keep(raw, prev, same), open: at.open, ends: at.ends, messages }
    : null;
  return { doc, state, reused: 0 };
}

/**
 * JSON.parse of a chat body, reusing `prev`'s leading messages where the bytes allow. Throws as JSON.parse does
 * (then `prev` is untouched). Otherwise `prev` is consumed: the new state keeps the body in prev's buffer.
 */
export function parseChatBody (raw: Buffer, prev: ChatBodyState | null): ParsedChatBody {
  if (prev === null) return fullParse(raw, null, 0);
  const same = commonPrefix(prev.bytes, raw);
  let k = prev.ends.length;
  while (k > 0 && prev.ends[k - 1] > same) k--;
  if (k === 0) return fullParse(raw, prev, same);
  // After element k-1: either ']' (no new element) or ',' and the next one, which starts the cut body's array.
  const after = skipSpace(raw, prev.ends[k - 1]);
  let cut: number;
  if (raw[after] === 0x5d) cut = after;
  else if (raw[after] === 0x2c) {
    cut = skipSpace(raw, after + 1);
    if (raw[cut] === 0x5d) return fullParse(raw, prev, same); // a trailing comma: invalid, let JSON.parse say so
  } else return fullParse(raw, prev, same);
  const ends: number[] = prev.ends.slice(0, k);
  const close = elements(raw, cut, ends);
  if (close < 0 || !noLaterMessages(raw, close)) return fullParse(raw, prev, same);
  let doc: unknown;
  try {
    doc = JSON.parse(raw.toString('utf8', 0, prev.open + 1) + raw.toString('utf8', cut));
  } catch {
    return fullParse(raw, prev, same); // the same error from the whole body
  }
  const d = doc as Record<string, unknown>;
  if (!Array.isArray(d.messages)) return fullParse(raw, prev, same);
  const messages = prev.messages.slice(0, k).concat(d.messages as unknown[]);
  if (messages.length !== ends.length) return fullParse(raw, prev, same);
  d.messages = messages;
  return { doc, state: { bytes: keep(raw, prev, same), open: prev.open, ends, messages }, reused: k };
}
