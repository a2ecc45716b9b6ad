// The fast ranked-BPE engine against the general pure-JS engine, on the shipped Qwen3 file and on small
// Llama-3-shaped files written here.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { HfTokenizer, qwen3Files, type HfFiles } from '../../src/tokenize/hf.js';
import { RankedBpe } from '../../src/tokenize/ranked-bpe.js';

test('the shipped Qwen3 tokenizer.json passes the full merge check (so hf:qwen3 may skip it at load)', () => {
  const files = qwen3Files();
  assert.equal(files.mergesVerified, true);
  assert.notEqual(RankedBpe.tryFrom(files.tokenizerJSON, files.tokenizerConfig), null);
});

// GPT-2's byte → printable character table, as byte-level vocabularies write bytes.
const BYTE_CHAR: string[] = (() => {
  const direct: number[] = [];
  for (let b = 33; b <= 126; b++) direct.push(b);
  for (let b = 161; b <= 172; b++) direct.push(b);
  for (let b = 174; b <= 255; b++) direct.push(b);
  const out: string[] = [];
  let n = 0;
  for (let b = 0; b < 256; b++) out[b] = String.fromCodePoint(direct.includes(b) ? b : 256 + n++);
  return out;
})();
const toByteLevel = (s: string): string => [...Buffer.from(s, 'utf8')].map((b) => BYTE_CHAR[b]).join('');

const LLAMA3_SPLIT = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** A byte-level BPE file from a vocabulary (byte-level strings in id order after the 256 bytes) and merges. */
function files (tokens: string[], merges: string[]): HfFiles {
  const vocab: Record<string, number> = {};
  BYTE_CHAR.forEach((c, b) => { vocab[c] = b; });
  tokens.forEach((t, i) => { vocab[t] = 256 + i; });
  const n = 256 + tokens.length;
  const specials = ['<|begin_of_text|>', '<|eot_id|>', '<|start_header_id|>', '<|end_header_id|>'];
  return {
    tokenizerJSON: {
      version: '1.0',
      added_tokens: specials.map((content, i) => ({ id: n + i, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true })),
      normalizer: null,
      pre_tokenizer: { type: 'Sequence', pretokenizers: [
        { type: 'Split', pattern: { Regex: LLAMA3_SPLIT }, behavior: 'Isolated', invert: false },
        { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }
      ] },
      post_processor: { type: 'Sequence', processors: [
        { type: 'ByteLevel', add_prefix_space: true, trim_offsets: false, use_regex: true },
        { type: 'TemplateProcessing',
          single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }],
          pair: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }, { Sequence: { id: 'B', type_id: 1 } }],
          special_tokens: { '<|begin_of_text|>': { id: '<|begin_of_text|>', ids: [n], tokens: ['<|begin_of_text|>'] } } }
      ] },
      decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
      model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null, fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges }
    },
    tokenizerConfig: { tokenizer_class: 'PreTrainedTokenizerFast', bos_token: '<|begin_of_text|>', eos_token: '<|eot_id|>', clean_up_tokenization_spaces: true }
  };
}

/** Ranks grown the way tiktoken vocabularies are, with each token's merge derived from the ranks (as converters do). */
function rankDerivedFiles (): HfFiles {
  const candidates = ['he', 'll', 'hell', 'hello', ' w', 'or', ' wor', 'ld', ' world', 'in', 'ing', ' t', 'th', ' th', ' the', 'er',
    'an', 'and', ' and', '\n\n', '  ', '    ', 'é', ' é', 'ca', 'caf', 'café', '12', '123', "'s", ' I', 'ss', 'ing ', 'ng'];
  const rank = new Map<string, number>();
  for (let b = 0; b < 256; b++) rank.set(BYTE_CHAR[b], b);
  const tokens: string[] = [];
  const merges: string[] = [];
  for (const c of candidates) {
    const bytes = [...toByteLevel(c)];
    // rank-BPE over the candidate's bytes with the ranks so far: a token is added where it ends in two parts
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      for (let i = 0; i + 1 < bytes.length; i++) {
        const r = rank.get(bytes[i] + bytes[i + 1]);
        if (r !== undefined && r < bestRank) { bestRank = r; best = i; }
      }
      if (best < 0 || bytes.length === 2) break;
      bytes.splice(best, 2, bytes[best] + bytes[best + 1]);
    }
    if (bytes.length !== 2 || rank.has(bytes.join(''))) continue;
    rank.set(bytes.join(''), 256 + tokens.length);
    tokens.push(bytes.join(''));
    merges.push(`${bytes[0]} ${bytes[1]}`);
  }
  assert.ok(tokens.length > 25);
  return files(tokens, merges);
}

test('a Llama-3-shaped file with rank-derived merges: both engines agree, BOS from the post-processor', () => {
  const f = rankDerivedFiles();
  const fast = new HfTokenizer('tiny', f);
  const js = new HfTokenizer('tiny (js)', f, undefined, { engine: 'js' });
  assert.equal(fast.engine, 'ranked-bpe');
  const bos = js.encode('')[0];
  assert.deepEqual(fast.encode('hello world'), js.encode('hello world'));
  assert.equal(fast.encode('hello world')[0], bos);
  assert.deepEqual(fast.encode('hello world', { addSpecialTokens: false }), js.encode('hello world', { addSpecialTokens: false }));
  const alphabet = fc.constantFrom(...'helowrdingtacé123 \n\'IsS'.split(''), '<|eot_id|>', '<|start_header_id|>', 'ü', '😀');
  fc.assert(fc.property(fc.array(alphabet, { maxLength: 40 }), fc.boolean(), (chars, add) => {
    const s = chars.join('');
    const ids = fast.encode(s, { addSpecialTokens: add });
    assert.deepEqual(ids, js.encode(s, { addSpecialTokens: add }));
    assert.equal(fast.decode(ids), js.decode(ids));
  }), { numRuns: 1000 });
});

test('merges that rank-BPE would not reproduce keep the general engine', () => {
  // "abc" is merged as a + bc, but by ranks a+b (256) joins first and (ab, c) is no merge: in "abcd" HF gives
  // [ab, c, d] where rank-BPE would give [abc, d].
  const f = files(['ab', 'bc', 'abc'], ['a b', 'b c', 'a bc']);
  const t = new HfTokenizer('skewed', f);
  assert.equal(t.engine, 'js');
  assert.deepEqual(t.encode('abcd', { addSpecialTokens: false }), [256, 99, 100]);
  const unchecked = RankedBpe.tryFrom(f.tokenizerJSON, f.tokenizerConfig, { mergesVerified: true });
  assert.deepEqual(unchecked?.encode('abcd', false), [258, 100], 'what the check protects against');
  assert.equal(RankedBpe.tryFrom(f.tokenizerJSON, f.tokenizerConfig), null);
});
