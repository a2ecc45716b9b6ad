// Character classes as the engines' regexes see them (Unicode 16), for V8 regexes (flag v). Node 20's ICU is
// Unicode 17, whose ~4.7k new code points the engines' regex tables (Rust regex in tiktoken and in its WASM
// build, Oniguruma in HF tokenizers) do not know yet and so treat as unassigned: \p{…} must leave them out.

/** Unicode White_Space (V8's \s differs: it has U+FEFF, lacks U+0085), as a character-class body. */
export const WHITE_SPACE = '\\t-\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000';

/** Code points first assigned in Unicode 17.0 (found by comparing V8's classes with tiktoken's WASM on every code point). */
const NEW_IN_UNICODE_17 = '\\u088f\\u0c5c\\u0cdc\\u1acf-\\u1add\\u1ae0-\\u1aeb\\ua7ce\\ua7cf\\ua7d2\\ua7d4\\ua7f1' +
  '\\u{10940}-\\u{10959}\\u{10ec5}-\\u{10ec7}\\u{10efa}\\u{10efb}\\u{11b60}-\\u{11b67}\\u{11db0}-\\u{11ddb}\\u{11de0}-\\u{11de9}' +
  '\\u{16ea0}-\\u{16eb8}\\u{16ebb}-\\u{16ed3}\\u{16ff2}-\\u{16ff6}\\u{187f8}-\\u{187ff}\\u{18d09}-\\u{18d1e}\\u{18d80}-\\u{18df2}' +
  '\\u{1e6c0}-\\u{1e6de}\\u{1e6e0}-\\u{1e6f5}\\u{1e6fe}\\u{1e6ff}\\u{2b73a}-\\u{2b73f}\\u{2cea2}-\\u{2cead}\\u{323b0}-\\u{33479}';

/** A Unicode property escape (`\\p{L}`, `\\P{N}`) as a v-mode class of Unicode 16's assignments; usable inside a class too. */
export function pinnedProperty (escape: string): string {
  const positive = `[${escape.replace(/^\\P/, '\\p')}--[${NEW_IN_UNICODE_17}]]`;
  return escape.startsWith('\\P') ? `[^${positive.slice(1, -1)}]` : positive;
}

