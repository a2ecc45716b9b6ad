import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Template } from '@huggingface/jinja';
import { pythonStrip } from '../../src/tokenize/jinja-python-strip.js';

const render = (src: string, s: unknown): string => new Template(src).render({ s });

test('strip, lstrip and rstrip take the characters to strip, as in Python', () => {
  assert.equal(render("{{ s.rstrip('\\n') }}|", 'a \n\n'), 'a |');
  assert.equal(render("{{ s.lstrip('\\n') }}|", '\n\n  a'), '  a|');
  assert.equal(render("{{ s.strip('ab') }}|", 'abcaba'), 'c|');
  assert.equal(render("{{ s.strip('') }}|", ' a '), ' a |');
  assert.equal(render("{{ s.rstrip(none) }}|", 'a \t'), 'a|');
});

test('without an argument they strip Python\'s whitespace, which is not JavaScript\'s', () => {
  // U+FEFF is whitespace to String.prototype.trim, not to Python; U+0085 and U+001C..U+001F the other way round.
  assert.equal(render('{{ s.strip() }}|', '\ufeff a \x85\x1c'), '\ufeff a|');
  assert.equal(render('{{ s.lstrip() }}|', ' \u3000a '), 'a |');
});

test('a non-string argument is an error, as in Python', () => {
  assert.throws(() => render('{{ s.strip(1) }}', 'a'), /strip arg must be None or str/);
});

test('pythonStrip equals a character-by-character reference on any text (property)', () => {
  const chars = fc.constantFrom('a', 'b', ' ', '\n', '\t', '\ufeff', '\x85', '😀', 'é');
  fc.assert(fc.property(fc.array(chars, { maxLength: 12 }), fc.array(chars, { maxLength: 3 }), fc.boolean(), fc.boolean(), (cs, set, left, right) => {
    const strip = (c: string): boolean => (set as string[]).includes(c);
    const s = cs.join('');
    let i = 0;
    let j = cs.length;
    if (left) while (i < j && strip(cs[i])) i++;
    if (right) while (j > i && strip(cs[j - 1])) j--;
    assert.equal(pythonStrip(s, left, right, strip), cs.slice(i, j).join(''));
  }), { seed: 7, numRuns: 300 });
});
