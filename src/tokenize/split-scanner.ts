// Hand-written scanners for the split regexes of the common byte-level BPE encodings, ~4x faster than V8
// running the regex (the split is most of an encode once pieces hit the cache). Each follows the regex's own
// semantics: alternatives tried in order at each position, greedy quantifiers with the backtracking the regex
// would do; character classes come from V8's Unicode tables pinned to Unicode 16 (classOf), so a scanner splits
// exactly as splitRegExp(pattern) does (test/tokenize/split-scanner.test.ts checks it on random text).
//
// cl100k family:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   (cl100k_base and Llama 3 with D = 3; Qwen2/2.5/3 with \p{N} alone, D = 1)
// o200k:  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|…|'d)?
//        |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|…|'d)?
//        |\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+

import { pinnedProperty, WHITE_SPACE } from './unicode-16.js';

export const CL100K_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
export const QWEN2_PATTERN = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
export const O200K_PATTERN = "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// Character class bits.
const WS = 1; // Unicode White_Space
const L = 2; // \p{L}
const N = 4; // \p{N}
const UP = 8; // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
const LO = 16; // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
const UNKNOWN = 255;

const oneOf = (...props: string[]): RegExp => new RegExp(`^[${props.map((p) => pinnedProperty(`\\p{${p}}`)).join('')}]$`, 'v');
const RE_WS = new RegExp(`^[${WHITE_SPACE}]$`, 'v');
const RE_L = oneOf('L');
const RE_N = oneOf('N');
const RE_UP = oneOf('Lu', 'Lt', 'Lm', 'Lo', 'M');
const RE_LO = oneOf('Ll', 'Lm', 'Lo', 'M');

function computeClass (cp: number): number {
  const s = String.fromCodePoint(cp);
  return (RE_WS.test(s) ? WS : 0) | (RE_L.test(s) ? L : 0) | (RE_N.test(s) ? N : 0) | (RE_UP.test(s) ? UP : 0) | (RE_LO.test(s) ? LO : 0);
}

// Classes are filled in on first sight (ASCII up front), in one byte per code point (1.1 MB, a fixed bound).
const classes = new Uint8Array(0x110000).fill(UNKNOWN);
for (let c = 0; c < 128; c++) classes[c] = computeClass(c);

function classOf (cp: number): number {
  const k = classes[cp];
  return k !== UNKNOWN ? k : (classes[cp] = computeClass(cp));
}

/** The code point at i (a lone surrogate stands for itself). */
function cpAt (s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length) {
    const d = s.charCodeAt(i + 1);
    if (d >= 0xdc00 && d < 0xe000) return 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
  }
  return c;
}

/** End of the longest run from i of code points having any of `bits`. */
function run (s: string, i: number, bits: number): number {
  while (i < s.length) {
    const cp = cpAt(s, i);
    if ((classOf(cp) & bits) === 0) break;
    i += cp > 0xffff ? 2 : 1;
  }
  return i;
}

/** End of the longest run from i of code points that are none of whitespace, letter, number. */
function otherRun (s: string, i: number): number {
  while (i < s.length) {
    const cp = cpAt(s, i);
    if ((classOf(cp) & (WS | L | N)) !== 0) break;
    i += cp > 0xffff ? 2 : 1;
  }
  return i;
}

/** End of (?i:'s|'t|'re|'ve|'m|'ll|'d) at i, or -1. (Case folding: s ~ S ~ ſ.) */
function contraction (s: string, i: number): number {
  if (s.charCodeAt(i) !== 39) return -1;
  const a = s.charCodeAt(i + 1);
  const la = a | 0x20;
  if (la === 0x73 || la === 0x74 || la === 0x6d || la === 0x64 || a === 0x17f) return i + 2; // s t m d ſ
  const lb = s.charCodeAt(i + 2) | 0x20;
  if ((la === 0x72 || la === 0x76) && lb === 0x65) return i + 3; // re ve
  if (la === 0x6c && lb === 0x6c) return i + 3; // ll
  return -1;
}

/** Whether cp may be the optional leading [^\r\n\p{L}\p{N}]. */
function isLead (cp: number, k: number): boolean {
  return (k & (L | N)) === 0 && cp !== 13 && cp !== 10;
}

/** The whitespace alternatives \s*[\r\n]+ | \s+(?!\S) | \s+ at i (a whitespace char). All White_Space is BMP. */
function whitespace (s: string, i: number): number {
  let j = i;
  let lastNewline = -1;
  while (j < s.length) {
    const c = s.charCodeAt(j);
    if ((classOf(c) & WS) === 0) break;
    if (c === 10 || c === 13) lastNewline = j;
    j++;
  }
  if (lastNewline >= 0) return lastNewline + 1;
  if (j === s.length || j - i === 1) return j;
  return j - 1; // leave the last space to the piece after it
}

/** ` ?[^\s\p{L}\p{N}]+` then a run of `tail` chars ([\r\n] or [\r\n/]), at i; or -1. */
function punctuation (s: string, i: number, cp: number, k: number, slash: boolean): number {
  let j = -1;
  if (cp === 32 && i + 1 < s.length) {
    const e = otherRun(s, i + 1);
    if (e > i + 1) j = e;
  }
  if (j < 0 && (k & (WS | L | N)) === 0) j = otherRun(s, i);
  if (j < 0) return -1;
  for (;;) {
    const c = s.charCodeAt(j);
    if (c === 10 || c === 13 || (slash && c === 47)) j++;
    else return j;
  }
}

/** End of \p{N}{1,max} whose first number character ends at `from`: at most max - 1 more of them. */
function digits (s: string, from: number, max: number): number {
  let e = from;
  for (let d = 1; d < max && e < s.length; d++) {
    const c = cpAt(s, e);
    if ((classOf(c) & N) === 0) break;
    e += c > 0xffff ? 2 : 1;
  }
  return e;
}

/** Reports the pieces of s, as the cl100k-family pattern with \p{N}{1,maxDigits} splits it, to piece(from, to). */
export function splitCl100k (s: string, maxDigits: number, piece: (from: number, to: number) => void): void {
  for (let i = 0; i < s.length;) {
    const cp = cpAt(s, i);
    const w = cp > 0xffff ? 2 : 1;
    const k = classOf(cp);
    let e = cp === 39 ? contraction(s, i) : -1;
    if (e < 0 && isLead(cp, k)) {
      const r = run(s, i + w, L);
      if (r > i + w) e = r;
    }
    if (e < 0 && (k & L) !== 0) e = run(s, i, L);
    if (e < 0 && (k & N) !== 0) e = digits(s, i + w, maxDigits);
    if (e < 0) e = punctuation(s, i, cp, k, false);
    if (e < 0) e = whitespace(s, i);
    piece(i, e);
    i = e;
  }
}

/** [UP]*[LO]+ at p (regex backtracking: if no LO follows the UP run, it ends after the run's last UP-and-LO char); or -1. */
function upperLower (s: string, p: number): number {
  let j = p;
  let lastBoth = -1;
  while (j < s.length) {
    const cp = cpAt(s, j);
    const k = classOf(cp);
    if ((k & UP) === 0) break;
    j += cp > 0xffff ? 2 : 1;
    if ((k & LO) !== 0) lastBoth = j;
  }
  const e = run(s, j, LO);
  return e > j ? e : lastBoth;
}

/** [UP]+[LO]* at p, or -1. */
function upperThenLower (s: string, p: number): number {
  const j = run(s, p, UP);
  return j > p ? run(s, j, LO) : -1;
}

/** Reports the pieces of s, as the o200k_base pattern splits it, to piece(from, to). */
export function splitO200k (s: string, piece: (from: number, to: number) => void): void {
  for (let i = 0; i < s.length;) {
    const cp = cpAt(s, i);
    const w = cp > 0xffff ? 2 : 1;
    const k = classOf(cp);
    const lead = isLead(cp, k);
    const letter = (k & (UP | LO)) !== 0; // else the attempts at i itself cannot match
    let e = lead ? upperLower(s, i + w) : -1;
    if (e < 0 && letter) e = upperLower(s, i);
    if (e < 0 && lead) e = upperThenLower(s, i + w);
    if (e < 0 && letter) e = upperThenLower(s, i);
    if (e >= 0) {
      const c = contraction(s, e);
      if (c > 0) e = c;
    } else if ((k & N) !== 0) {
      e = digits(s, i + w, 3);
    }
    if (e < 0) e = punctuation(s, i, cp, k, true);
    if (e < 0) e = whitespace(s, i);
    piece(i, e);
    i = e;
  }
}
