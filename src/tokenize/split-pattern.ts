// Pre-tokenizer split regexes as tiktoken and Hugging Face tokenizers write them (Rust `regex` / Oniguruma
// syntax), rewritten for V8 so that they match the same pieces:
// - `\s` is Unicode White_Space there; V8's `\s` also matches U+FEFF and misses U+0085, so it is spelled out;
// - `(?i:…)` (a scoped case-insensitive group, which Node 20's V8 lacks) becomes explicit case classes, with
//   the Unicode simple case folds of ASCII letters (s ~ ſ U+017F, k ~ K U+212A) that Rust's regex applies;
// - `\d` is Unicode Nd, `.` is anything but \n;
// - Unicode properties are pinned to Unicode 16 (unicode-16.ts), as the engines' tables are.
// Anything else whose meaning differs between the engines (\w, \b, inline flags, nested classes…) is refused,
// so the caller falls back to an engine that reads the pattern itself.
import { pinnedProperty, WHITE_SPACE } from './unicode-16.js';
import { CL100K_PATTERN, O200K_PATTERN, QWEN2_PATTERN, splitCl100k, splitO200k } from './split-scanner.js';

/** ASCII letters whose Unicode simple case folding has a third member. */
const EXTRA_FOLDS: Record<string, string> = { s: '\\u017f', k: '\\u212a' };

/** Characters a v-mode regex lets be escaped outside a class, and more inside one. */
const SYNTAX = '^$\\.*+?()[]{}|/';
const CLASS_PUNCTUATORS = '&-!#%,:;<=>@`~';
/** Characters that must be escaped when literal inside a v-mode class. */
const CLASS_RESERVED = '(){}/|&!#%,:;<=>@`~';

export class UnsupportedPatternError extends Error {}

/** The V8 regex (flags gv) that splits text as `pattern` does in tiktoken / HF tokenizers. Throws UnsupportedPatternError. */
export function splitRegExp (pattern: string): RegExp {
  let out = '';
  let inClass = false;
  let classStart = false; // just after [ or [^
  const groups: boolean[] = []; // per open group: case-insensitive?
  const caseless = (): boolean => groups.includes(true);
  const bad = (what: string): never => { throw new UnsupportedPatternError(`split pattern: ${what} is not supported`); };
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    const atClassStart = classStart;
    classStart = false;
    if (c === '\\') {
      const e = pattern[++i];
      if (e === undefined) bad('a trailing backslash');
      if (e === 's') out += inClass ? WHITE_SPACE : `[${WHITE_SPACE}]`;
      else if (e === 'S') out += inClass ? bad('\\S inside a class') : `[^${WHITE_SPACE}]`;
      else if (e === 'd' || e === 'D') out += pinnedProperty(`\\${e === 'd' ? 'p' : 'P'}{Nd}`);
      else if (e === 'p' || e === 'P') {
        let name: string;
        if (pattern[i + 1] === '{') {
          const end = pattern.indexOf('}', i);
          if (end < 0) bad('an unterminated \\p{');
          name = pattern.slice(i + 2, end);
          i = end;
        } else name = pattern[++i] ?? bad('a bare \\p');
        out += pinnedProperty(`\\${e}{${name}}`);
      } else if ('rntfv0'.includes(e)) out += `\\${e}`;
      else if (e === 'x' && pattern[i + 1] === '{') {
        const end = pattern.indexOf('}', i);
        if (end < 0) bad('an unterminated \\x{');
        out += `\\u{${pattern.slice(i + 2, end)}}`;
        i = end;
      } else if (e === 'x' || e === 'u') out += `\\${e}`;
      else if (/[A-Za-z0-9]/.test(e)) bad(`\\${e}`);
      else if (SYNTAX.includes(e) || (inClass && CLASS_PUNCTUATORS.includes(e))) out += `\\${e}`;
      else out += `\\u{${e.codePointAt(0)!.toString(16)}}`;
    } else if (inClass) {
      if (c === ']') inClass = false;
      else if (c === '[') bad('a nested class');
      else if (caseless() && /[A-Za-z]/.test(c)) bad('a letter inside a class in a case-insensitive group');
      if (c === '-' && (atClassStart || pattern[i + 1] === ']')) out += '\\-';
      else out += CLASS_RESERVED.includes(c) ? `\\${c}` : c;
    } else if (c === '[') {
      inClass = true;
      classStart = true;
      out += c;
      if (pattern[i + 1] === '^') out += pattern[++i];
      if (pattern[i + 1] === ']') bad('a class that starts with ]');
    } else if (c === '(') {
      if (pattern.startsWith('(?i:', i)) {
        groups.push(true);
        out += '(?:';
        i += 3;
      } else if (pattern[i + 1] !== '?' || /^\(\?(:|=|!|<=|<!)/.test(pattern.slice(i, i + 4))) {
        groups.push(false);
        out += c;
      } else bad(`the group ${pattern.slice(i, i + 4)}`);
    } else if (c === ')') {
      groups.pop();
      out += c;
    } else if (c === '.') out += '[^\\n]';
    else if (caseless() && /[A-Za-z]/.test(c)) {
      const l = c.toLowerCase();
      out += `[${l}${l.toUpperCase()}${EXTRA_FOLDS[l] ?? ''}]`;
    } else out += c;
  }
  if (inClass || groups.length > 0) bad('an unbalanced class or group');
  try {
    return new RegExp(out, 'gv');
  } catch (err) {
    throw new UnsupportedPatternError(`split pattern: V8 refuses ${out}: ${(err as Error).message}`);
  }
}

/** Reports text's pre-tokenizer pieces in order, as ranges text[from..to), to piece(). */
export type Splitter = (text: string, piece: (from: number, to: number) => void) => void;

/** The splitter for `pattern`: a hand-written scanner for the common ones, else V8 running the rewritten regex. */
export function splitterFor (pattern: string): Splitter {
  if (pattern === O200K_PATTERN) return splitO200k;
  if (pattern === CL100K_PATTERN) return (text, piece) => splitCl100k(text, 3, piece);
  if (pattern === QWEN2_PATTERN) return (text, piece) => splitCl100k(text, 1, piece);
  const re = splitRegExp(pattern);
  // text the regex does not match is skipped, as the engines' find-all does
  return (text, piece) => {
    for (const m of text.matchAll(re)) if (m[0].length > 0) piece(m.index, m.index + m[0].length);
  };
}
