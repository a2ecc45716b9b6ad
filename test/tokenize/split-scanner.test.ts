// The hand-written split scanners against V8 running the (rewritten) split regexes they stand for.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { CL100K_PATTERN, O200K_PATTERN, QWEN2_PATTERN, splitCl100k, splitO200k } from '../../src/tokenize/split-scanner.js';
import { splitRegExp, splitterFor, UnsupportedPatternError, type Splitter } from '../../src/tokenize/split-pattern.js';

const pieces = (split: Splitter, s: string): string[] => {
  const out: string[] = [];
  split(s, (from, to) => out.push(s.slice(from, to)));
  return out;
};

/** Text that stresses the patterns: letters of every case class, marks, digits, contractions, whitespace runs. */
export const trickyText = (maxLength = 60): fc.Arbitrary<string> => fc.array(fc.oneof(
  fc.string({ unit: 'binary', maxLength: 8 }),
  fc.string({ unit: 'grapheme-ascii', maxLength: 12 }),
  fc.constantFrom("'s", "'S", "'\u017fx", "'LL", "'re", "'Ve", "'m", "'d", "'t", "'x", "don't", "I'M", 'HELLOworld', 'ǅungla', 'ʰello',
    'A\u0301B', '\u0301a', 'ä', 'a\u0308', '123456', '٣٤٥', '½', ' 1', '\t', '\n', '\r\n', ' \n ', '    ', '  x', ' \u00a0', '\u0085',
    '\ufeff', '\u3000', '//', '\n//', '=== ', ' {', '🚀', '👍🏽', '你好', 'ß', 'ﬁ', '\u2028', '\u1acf', '\u{10940}', '\u{323b0}x')
), { maxLength: 12 }).map((parts) => parts.join('')).filter((s) => s.length <= maxLength * 4);

test('split scanners equal V8 running the split regexes, on tricky text', () => {
  const cases: [string, Splitter][] = [
    [O200K_PATTERN, splitO200k],
    [CL100K_PATTERN, (s, piece) => splitCl100k(s, 3, piece)],
    [QWEN2_PATTERN, (s, piece) => splitCl100k(s, 1, piece)]
  ];
  for (const [pattern, scan] of cases) {
    const re = splitRegExp(pattern);
    assert.notEqual(splitterFor(pattern), undefined);
    fc.assert(fc.property(trickyText(), (s) => {
      assert.deepEqual(pieces(scan, s), s.match(re) ?? []);
    }), { numRuns: 1500, seed: 6 });
  }
});

test('split pattern rewrite: \\s is Unicode White_Space, (?i:) folds s to ſ, unsupported constructs are refused', () => {
  const re = splitRegExp(CL100K_PATTERN);
  assert.deepEqual(' \u0085x'.match(re), [' ', '\u0085x'], 'U+0085 is whitespace, then the lead char of a word');
  assert.deepEqual('a \ufeffb'.match(re), ['a', ' \ufeff', 'b'], 'U+FEFF is not whitespace');
  assert.deepEqual("x'\u017f".match(re), ['x', "'\u017f"]);
  for (const p of ['\\w+', '\\bx', '(?m)^x', '[[a]]', '(?<n>x)']) assert.throws(() => splitRegExp(p), UnsupportedPatternError, p);
  assert.deepEqual('a-b/c'.match(splitRegExp('[a-z/-]+|.')), ['a-b/c']);
  assert.deepEqual(pieces(splitterFor('[a-z]+'), 'ab, cd!'), ['ab', 'cd'], 'unmatched text is skipped, as the engines do');
});
