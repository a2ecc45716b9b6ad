import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import { IncrementalDetokenizer } from '../../src/sim/incremental-detokenizer.js';

const tk = createTokenizerSync('character');

test('a character split across tokens is held back until complete', () => {
  const d = new IncrementalDetokenizer(tk);
  assert.equal(d.push([104], false), 'h');
  assert.equal(d.push([195], false), '');
  assert.equal(d.push([169, 33], false), 'é!');
  assert.equal(d.text, 'hé!');
  // An incomplete character at the very end is flushed as U+FFFD.
  assert.equal(d.push([226, 130], true), '\uFFFD');
});

test('the deltas add up to the whole decode, however the tokens are chunked', () => {
  fc.assert(fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }), fc.array(fc.integer({ min: 1, max: 4 }), { minLength: 1, maxLength: 10 }), (s, cuts) => {
    const ids = tk.encode(s);
    const d = new IncrementalDetokenizer(tk);
    let out = '';
    for (let i = 0, k = 0; i < ids.length; k++) {
      const n = cuts[k % cuts.length];
      out += d.push(ids.slice(i, i + n), i + n >= ids.length);
      i += n;
    }
    assert.equal(out, tk.decode(ids));
    assert.equal(d.text, out);
  }), { numRuns: 500 });
});
