// byte-bpe.ts against the WASM encoders it replaced (wasm-reference.ts): tiktoken's o200k_base and cl100k_base,
// and hf:qwen3 against tiktoken's WASM given Qwen3's vocabulary as ranks (the previous hf:qwen3 engine).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import { qwen3Files } from '../../src/tokenize/hf.js';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import type { TiktokenEncoding } from 'tiktoken';
import { ByteBpe, tokenTable, tokenTableFromTiktoken } from '../../src/tokenize/byte-bpe.js';
import { CL100K_PATTERN } from '../../src/tokenize/split-scanner.js';
import { NEW_IN_UNICODE_17 } from '../../src/tokenize/unicode-16.js';
import { wasmRankedBpe, wasmTiktoken } from './wasm-reference.js';
import { trickyText } from './split-scanner.test.js';

const CODE = fc.constantFrom('function f(x) {\n  return x * 2;\n}\n', 'const a = [1, 2, 3];', '{"path": "src/a.ts", "n": 12}', '    if (x) {\n\t\treturn;\n    }',
  '// comment\n', '#include <stdio.h>', 'SELECT * FROM t WHERE id=42;', '$ npm run build && node dist/x.js', 'https://example.com/a?b=c&d=e',
  '0x7fffffff', '3.14159e-10', '2026-11-22T13:04:31Z', '==========', '-----\n', '\r\n\r\n', '   \n\n\t ', '..."', 'naïve café', 'Ünïcödé',
  '日本語のテキスト', 'Привет, мир', 'مرحبا', '🚀🔥👍🏽', '👨‍👩‍👧', "it's", "WE'LL", "y'all'd've", '<|im_start|>user\n', '<|im_end|>', '<|endoftext|>',
  '<|endofprompt|>', '<|fim_prefix|>', '<|im_start', 'im_end|>', '<think>', '</tool_call>', '<|box_start|>');
const TEXT = fc.array(fc.oneof(trickyText(20), CODE, fc.string({ unit: 'grapheme', maxLength: 30 }), fc.string({ unit: 'binary', maxLength: 30 })), { maxLength: 10 })
  .map((parts) => parts.join(''));

for (const encoding of ['o200k_base', 'cl100k_base']) {
  test(`tiktoken:${encoding} encodes exactly as tiktoken's WASM build`, () => {
    const tok = createTokenizerSync(`tiktoken:${encoding}`);
    const wasm = wasmTiktoken(encoding);
    fc.assert(fc.property(TEXT, (s) => {
      assert.deepEqual(tok.encode(s), wasm.encode(s));
    }), { numRuns: 2000, seed: 42 });
    // long pieces (the heap merge), lone surrogates (U+FFFD, as TextEncoder gives the WASM), empty text
    for (const s of ['='.repeat(5000), '=-+'.repeat(10_000), ' '.repeat(3000) + 'x', '9'.repeat(1000), 'ab'.repeat(3000), '!@#$%^&*'.repeat(400), '\ud800x\udc00', '']) {
      assert.deepEqual(tok.encode(s), wasm.encode(s), JSON.stringify(s.slice(0, 20)));
    }
    // a piece far longer than the scratch kept between calls (the WASM is quadratic on it: not compared)
    const huge = '=-+'.repeat(100_000);
    assert.equal(tok.decode(tok.encode(huge)), huge);
    assert.deepEqual(tok.encode('x = y; // ok'), wasm.encode('x = y; // ok'));
  });
}

test('every 16th code point and all those new in Unicode 17 (pinned out) encode as the WASM builds do, in letter/digit/space contexts', () => {
  const cps: number[] = [];
  for (let cp = 0; cp < 0x110000; cp += 16) if (cp < 0xd800 || cp > 0xdfff) cps.push(cp);
  for (const [a, b] of NEW_IN_UNICODE_17) for (let cp = a; cp <= b; cp++) cps.push(cp);
  const inContext = (cp: number): string => { const c = String.fromCodePoint(cp); return `x${c}x ${c}'s 1${c}2\n${c}A${c}a ${c}${c} \u0301${c}`; };
  for (const encoding of ['o200k_base', 'cl100k_base']) {
    const tok = createTokenizerSync(`tiktoken:${encoding}`);
    const wasm = wasmTiktoken(encoding);
    for (let i = 0; i < cps.length; i += 256) {
      const s = cps.slice(i, i + 256).map(inContext).join('');
      assert.deepEqual(tok.encode(s), wasm.encode(s), `${encoding}, code points from U+${cps[i].toString(16)}`);
    }
  }
});

test('hf:qwen3 encodes exactly as tiktoken\'s WASM BPE given Qwen3\'s vocabulary (its previous engine)', () => {
  const qwen = createTokenizerSync('hf:qwen3');
  const wasm = wasmRankedBpe(qwen3Files());
  // NFC text: the NFC step before the encoder is unchanged and tested against HF in hf.test.ts
  fc.assert(fc.property(TEXT.map((s) => s.normalize('NFC')), (s) => {
    assert.deepEqual(qwen.encode(s, { addSpecialTokens: false }), wasm.encode(s));
  }), { numRuns: 2000, seed: 43 });
  for (const s of ['='.repeat(5000), '\t'.repeat(2000), '12345678901234567890']) assert.deepEqual(qwen.encode(s), wasm.encode(s));
});

test('a pattern without a scanner (GPT-2\'s, through V8\'s regex) encodes exactly as tiktoken\'s WASM gpt2', () => {
  const require = createRequire(import.meta.url);
  const json = JSON.parse(readFileSync(require.resolve('tiktoken/encoders/gpt2.json'), 'utf8')) as { pat_str: string; special_tokens: Record<string, number>; bpe_ranks: string };
  const bpe = new ByteBpe(tokenTableFromTiktoken(json.bpe_ranks), { pattern: json.pat_str, specials: json.special_tokens });
  const wasm = (require('tiktoken') as typeof import('tiktoken')).get_encoding('gpt2' as TiktokenEncoding);
  fc.assert(fc.property(TEXT, (s) => {
    assert.deepEqual(bpe.encode(s), Array.from(wasm.encode(s, 'all')));
  }), { numRuns: 1000, seed: 44 });
  wasm.free();
});

test('the piece cache is bounded: at the bound it is cleared and counted, and ids stay the same', () => {
  const tokens: Uint8Array[] = [];
  for (let b = 0; b < 256; b++) tokens.push(Uint8Array.of(b));
  for (const t of ['ab', 'abc', ' a', ' ab']) tokens.push(new TextEncoder().encode(t));
  const small = new ByteBpe(tokenTable(tokens), { pattern: CL100K_PATTERN, specials: { '<s>': 300 }, cacheEntries: 4 });
  const big = new ByteBpe(tokenTable(tokens), { pattern: CL100K_PATTERN, specials: { '<s>': 300 } });
  // the constructor's JIT warm-up leaves no trace in the cache or the counters
  assert.deepEqual(big.stats(), { cacheHits: 0, cacheMisses: 0, cacheClears: 0, cacheSize: 0 });
  const text = Array.from({ length: 50 }, (_, i) => ` abc${String.fromCharCode(97 + (i % 26))}x<s>`).join('');
  assert.deepEqual(small.encode(text), big.encode(text));
  const s = small.stats();
  assert.ok(s.cacheSize <= 4 && s.cacheClears > 0 && s.cacheMisses > 0, JSON.stringify(s));
  assert.equal(big.stats().cacheClears, 0);
  // ' a' 258 and 'ab' 256: 'ab' joins first; then ' ab' 259 and 'abc' 257: 'abc' wins
  assert.deepEqual(small.encode(' abc<s>'), [32, 257, 300]);
  assert.deepEqual(small.encode(' ab'), [259]);
  assert.equal(new TextDecoder().decode(small.decodeBytes([32, 257, 300])), ' abc<s>');
  assert.throws(() => small.decodeBytes([299]), RangeError);
});

test('real text (TypeScript declarations, package READMEs, this repo\'s source) encodes as the WASM builds do, cache cold and warm', () => {
  const root = new URL('../../../', import.meta.url).pathname; // dist/test/tokenize → repo root
  const files = ['node_modules/typescript/lib/lib.dom.d.ts', 'node_modules/undici/README.md', 'node_modules/piscina/README.md', 'src/tokenize/byte-bpe.ts']
    .map((f) => root + f);
  const text = files.map((f) => readFileSync(f, 'utf8').slice(0, 60_000)).join('\n');
  for (const [name, wasm] of [['tiktoken:o200k_base', wasmTiktoken('o200k_base')], ['tiktoken:cl100k_base', wasmTiktoken('cl100k_base')], ['hf:qwen3', wasmRankedBpe(qwen3Files())]] as const) {
    const tok = createTokenizerSync(name) as unknown as { encode (s: string, o: object): number[]; clearCache (): void };
    const expected = wasm.encode(name === 'hf:qwen3' ? text.normalize('NFC') : text);
    tok.clearCache();
    assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), expected, `${name}, cold`);
    assert.deepEqual(tok.encode(text, { addSpecialTokens: false }), expected, `${name}, warm`);
  }
});
