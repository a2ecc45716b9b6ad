// Character classes as the engines' regexes see them (Unicode 16), for V8 regexes (flag v). Node 20's ICU is
// Unicode 17, whose ~4.7k new code points the engines' regex tables (Rust regex in tiktoken and in its WASM
// build, Oniguruma in HF tokenizers) do not know yet and so treat as unassigned: \p{…} must leave them out.

/** Unicode White_Space (V8's \s differs: it has U+FEFF, lacks U+0085), as a character-class body. */
export const WHITE_SPACE = '\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

/** Code point ranges first assigned in Unicode 17.0 (found by comparing V8's classes with tiktoken's WASM on every code point). */
export const NEW_IN_UNICODE_17: readonly (readonly [number, number])[] = [
  [0x088f, 0x088f], [0x0c5c, 0x0c5c], [0x0cdc, 0x0cdc], [0x1acf, 0x1add], [0x1ae0, 0x1aeb], [0xa7ce, 0xa7cf], [0xa7d2, 0xa7d2],
  [0xa7d4, 0xa7d4], [0xa7f1, 0xa7f1], [0x10940, 0x10959], [0x10ec5, 0x10ec7], [0x10efa, 0x10efb], [0x11b60, 0x11b67],
  [0x11db0, 0x11ddb], [0x11de0, 0x11de9], [0x16ea0, 0x16eb8], [0x16ebb, 0x16ed3], [0x16ff2, 0x16ff6], [0x187f8, 0x187ff],
  [0x18d09, 0x18d1e], [0x18d80, 0x18df2], [0x1e6c0, 0x1e6de], [0x1e6e0, 0x1e6f5], [0x1e6fe, 0x1e6ff], [0x2b73a, 0x2b73f],
  [0x2cea2, 0x2cead], [0x323b0, 0x33479]
];
const NEW_CLASS_BODY = NEW_IN_UNICODE_17.map(([a, b]) => a === b ? `\\u{${a.toString(16)}}` : `\\u{${a.toString(16)}}-\\u{${b.toString(16)}}`).join('');

/** A Unicode property escape (`\\p{L}`, `\\P{N}`) as a v-mode class of Unicode 16's assignments; usable inside a class too. */
export function pinnedProperty (escape: string): string {
  const positive = `[${escape.replace(/^\\P/, '\\p')}--[${NEW_CLASS_BODY}]]`;
  return escape.startsWith('\\P') ? `[^${positive.slice(1, -1)}]` : positive;
}

