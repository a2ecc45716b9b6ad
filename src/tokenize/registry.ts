// Tokenizers by name. One instance per name per process: tokenizers give the same output for their whole life
// (BPE piece caches change only speed) and are costly to build (Qwen3: ~0.7 s; tiktoken: ~0.3 s and ~15 MB of
// tables), so callers share them. The cache holds at most one entry per distinct name and template, which
// configuration bounds.
import type { Tokenizer } from './types.js';
import { TokenizeError } from './errors.js';
import { CharacterTokenizer } from './character.js';
import { TiktokenTokenizer, TIKTOKEN_ENCODINGS } from './tiktoken.js';
import { HfTokenizer, qwen3Files, readHfFiles, type FrozenHfTokenizer } from './hf.js';
import type { FrozenByteBpe } from './byte-bpe.js';
import { createChatTemplate } from './builtin-templates.js';

export const TOKENIZER_NAMES: readonly string[] = [
  'character',
  ...Object.keys(TIKTOKEN_ENCODINGS).map((e) => `tiktoken:${e}`),
  'hf:qwen3',
  'hf:<path to tokenizer.json or its folder>',
  'remote:<engine base URL>'
];

export interface TokenizerOptions {
  /** Chat template to use instead of the tokenizer's own: chatml, qwen3, llama3, llama3.1, or jinja source. */
  chatTemplate?: string;
}

const cache = new Map<string, Tokenizer>();

function build (name: string, opts: TokenizerOptions): Tokenizer {
  const override = opts.chatTemplate;
  if (name === 'character') return new CharacterTokenizer(createChatTemplate(override ?? 'chatml'));
  if (name.startsWith('tiktoken:')) {
    const encoding = name.slice('tiktoken:'.length);
    if (TIKTOKEN_ENCODINGS[encoding] !== undefined) return new TiktokenTokenizer(encoding, createChatTemplate(override ?? 'chatml'));
  } else if (name.startsWith('hf:') && name.length > 3) {
    const target = name.slice(3);
    const files = target === 'qwen3' ? qwen3Files() : readHfFiles(target);
    return new HfTokenizer(name, files, override === undefined ? undefined : (specials) => createChatTemplate(override, specials));
  }
  if (name.startsWith('remote:')) {
    throw new TokenizeError('EAR_ERR_TOKENIZER_UNKNOWN', `"${name}" asks the engine over HTTP: it is a RemoteTokenizer (remote.ts), not a local one`);
  }
  throw new TokenizeError('EAR_ERR_TOKENIZER_UNKNOWN', `unknown tokenizer "${name}"; valid names: ${TOKENIZER_NAMES.join(', ')}`);
}

/** The tokenizer for `name` (see TOKENIZER_NAMES), built on first use and shared afterwards. */
export function createTokenizerSync (name: string, opts: TokenizerOptions = {}): Tokenizer {
  if (typeof name !== 'string') throw new TokenizeError('EAR_ERR_TOKENIZER_UNKNOWN', `tokenizer name must be a string; valid names: ${TOKENIZER_NAMES.join(', ')}`);
  const key = opts.chatTemplate === undefined ? name : `${name}\u0000${opts.chatTemplate}`;
  let tok = cache.get(key);
  if (tok === undefined) {
    tok = build(name, opts);
    cache.set(key, tok);
  }
  return tok;
}

/**
 * A tokenizer as another thread makes it at once (thawTokenizer): its tables on SharedArrayBuffers, shared by every
 * thread instead of built by each (a route thread's Qwen3 cost ~0.9 s of CPU and ~170 MB of memory; now ~20 MB).
 */
export type FrozenTokenizer =
  | { kind: 'tiktoken'; name: string; encoding: string; bpe: FrozenByteBpe }
  | { kind: 'hf'; name: string; hf: FrozenHfTokenizer };

/** Frozen tokenizers by name, each made once (the copy to shared memory); as bounded as `cache`. */
const frozen = new Map<string, FrozenTokenizer | null>();

/**
 * The tokenizer `name`, built here if it is not yet, frozen for other threads; null where nothing is worth sharing:
 * `character`, `remote:` (its fallback is `character`), an HF file only the pure-JS engine takes.
 */
export function freezeTokenizer (name: string): FrozenTokenizer | null {
  if (name === 'character' || name.startsWith('remote:')) return null;
  let f = frozen.get(name);
  if (f !== undefined) return f;
  const tok = createTokenizerSync(name);
  f = null;
  if (tok instanceof TiktokenTokenizer) f = { kind: 'tiktoken', name, encoding: name.slice('tiktoken:'.length), bpe: tok.freeze() };
  else if (tok instanceof HfTokenizer) {
    const hf = tok.freeze();
    if (hf !== null) f = { kind: 'hf', name, hf };
  }
  frozen.set(name, f);
  // This thread too reads the shared tables from now on: the ones it built (and what their build left) go.
  if (f !== null) {
    cache.delete(name);
    thawTokenizer(f);
  }
  return f;
}

/** Makes `createTokenizerSync(f.name)` on this thread the frozen tokenizer: no file read, no table built. */
export function thawTokenizer (f: FrozenTokenizer): void {
  if (cache.has(f.name)) return;
  cache.set(f.name, f.kind === 'tiktoken' ? new TiktokenTokenizer(f.encoding, createChatTemplate('chatml'), f.bpe) : new HfTokenizer(f.name, f.hf));
}

export async function createTokenizer (name: string, opts: TokenizerOptions = {}): Promise<Tokenizer> {
  return createTokenizerSync(name, opts);
}
