// Encode time per tokenizer for prompts of ~1k, 33.6k and 130k tokens (p50 over a few runs, each on a different
// text so the BPE piece caches see realistic hit rates), with the WASM encoders EAR used before byte-bpe.ts as
// baselines. Run: `npm run build && node dist/bench/tokenize.js [runs]` (writes its section of RESULTS.md).
import { loadavg } from 'node:os';
import { pathToFileURL } from 'node:url';
import { createTokenizerSync, IncrementalTokenizer, type Tokenizer } from '../src/tokenize/index.js';
import { HfTokenizer, qwen3Files } from '../src/tokenize/hf.js';
import { wasmRankedBpe, wasmTiktoken } from '../test/tokenize/wasm-reference.js';
import { gitCommit, machine } from './machine.js';
import { writeSection } from './results-file.js';
import { fitToTokens, realTextOfChars, realTextOfTokens } from './real-text.js';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export interface TokenizeBenchRow {
  tokenizer: string;
  /** Token count of the prompt that was encoded (the target, hit to within one text piece). */
  tokens: number;
  chars: number;
  /** Median encode time over `runs` texts, ms. */
  p50Ms: number;
  /** Encode throughput at the median, tokens per ms. */
  tokensPerMs: number;
  runs: number;
}

/** Baselines: hf:qwen3's files through the general pure-JS engine, and the WASM encoders before byte-bpe.ts. */
export const QWEN3_PURE_JS = 'hf:qwen3 (pure-JS engine)';
const WASM = ' (old: tiktoken WASM)';
const BASELINES: Record<string, () => (t: string) => number[]> = {
  [QWEN3_PURE_JS]: () => {
    const t = new HfTokenizer(QWEN3_PURE_JS, qwen3Files(), undefined, { engine: 'js' });
    return (s) => t.encode(s, { addSpecialTokens: false });
  },
  [`tiktoken:o200k_base${WASM}`]: () => wasmTiktoken('o200k_base').encode,
  [`tiktoken:cl100k_base${WASM}`]: () => wasmTiktoken('cl100k_base').encode,
  // the old engine normalized to NFC first as well
  [`hf:qwen3${WASM}`]: () => { const w = wasmRankedBpe(qwen3Files()); return (s) => w.encode(s.normalize('NFC')); }
};
export const BENCH_TOKENIZERS = ['character', 'tiktoken:o200k_base', `tiktoken:o200k_base${WASM}`, 'tiktoken:cl100k_base', `tiktoken:cl100k_base${WASM}`,
  'hf:qwen3', `hf:qwen3${WASM}`, QWEN3_PURE_JS];

function encoderFor (name: string): (t: string) => number[] {
  const baseline = BASELINES[name];
  if (baseline !== undefined) return baseline();
  const tok = createTokenizerSync(name);
  return (t) => tok.encode(t, { addSpecialTokens: false });
}
export const BENCH_SIZES = [1_000, 33_600, 130_000];

const WORDS = ('the of and to in is for that on with as are this be it by from at or an was can not have which ' +
  'function return const value request session cache token prefix engine router latency error result file line ' +
  'def class import self data model user assistant tool call json string number array object true false null').split(' ');
const SNIPPETS = [
  '\n```ts\nexport function f (x: number): number {\n  return x * 2;\n}\n```\n',
  '\n{"name": "read_file", "arguments": {"path": "src/index.ts", "offset": 120}}\n',
  ' 2026-11-22T11:17:57Z ', ' 42 ', ' 3.14159 ', ' 你好，世界 ', ' naïve café ', ' 🚀 ', '\n\n', ', ', '. '
];

/** Deterministic text of roughly agent-trace shape: prose, code, JSON, numbers, a little non-Latin. */
export function textOfChars (chars: number, seed: number): string {
  let s = seed >>> 0 || 1;
  const rnd = (n: number): number => { s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0; return s % n; };
  const parts: string[] = [];
  let len = 0;
  while (len < chars) {
    const r = rnd(100);
    let p: string;
    if (r < 8) p = SNIPPETS[rnd(SNIPPETS.length)];
    else if (r < 14) p = ' ' + Array.from({ length: 2 + rnd(4) }, () => 'bcdfglmnprstvz'[rnd(14)] + 'aeiou'[rnd(5)]).join('');
    else p = ' ' + WORDS[rnd(WORDS.length)];
    parts.push(p);
    len += p.length;
  }
  return parts.join('').slice(0, chars);
}

/** A text of the decision bench's kind that encodes to about `tokens` tokens with `encode`. */
export function textOfTokens (encode: (t: string) => number[], tokens: number, seed: number): string {
  return fitToTokens(textOfChars, encode, tokens, seed);
}

function median (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

export function runTokenizeBench (opts: { runs?: number; tokenizers?: string[]; sizes?: number[] } = {}): TokenizeBenchRow[] {
  const runs = opts.runs ?? 5;
  const rows: TokenizeBenchRow[] = [];
  for (const name of opts.tokenizers ?? BENCH_TOKENIZERS) {
    const encode = encoderFor(name);
    encode(textOfChars(20_000, 999)); // warm-up: JIT and first-use allocations
    for (const size of opts.sizes ?? BENCH_SIZES) {
      const times: number[] = [];
      let tokens = 0;
      let chars = 0;
      for (let r = 0; r < runs; r++) {
        const text = textOfTokens(encode, size, 1 + r);
        const t0 = performance.now();
        const ids = encode(text);
        times.push(performance.now() - t0);
        tokens = ids.length;
        chars = text.length;
      }
      const p50 = median(times);
      rows.push({ tokenizer: name, tokens, chars, p50Ms: p50, tokensPerMs: tokens / p50, runs });
    }
  }
  return rows;
}

export interface RealTextBenchRow {
  tokenizer: string;
  tokens: number;
  chars: number;
  /** p50 over `runs` texts: the first encode with the piece cache emptied (JIT already warm on other text). */
  coldMs: number;
  /** The same text encoded again at once: every piece of it is cached. */
  warmMs: number;
  /** Cache misses (pieces BPE'd) of a cold encode, p50; null for encoders without a piece cache. */
  misses: number | null;
  runs: number;
}

/** An encoder's piece cache, when it has one (byte-bpe.ts behind tiktoken and hf:qwen3). */
interface PieceCached { clearCache (): void; stats (): { cacheMisses: number } | null }
const pieceCache = (t: unknown): PieceCached | null =>
  t !== null && typeof (t as PieceCached).clearCache === 'function' && (t as PieceCached).stats() !== null ? t as PieceCached : null;

export const REAL_TEXT_TOKENIZERS = ['tiktoken:o200k_base', `tiktoken:o200k_base${WASM}`, 'tiktoken:cl100k_base', `tiktoken:cl100k_base${WASM}`, 'hf:qwen3', `hf:qwen3${WASM}`];

/**
 * Real text (real-text.ts: declarations, READMEs, source), whose pieces are mostly new to the piece cache:
 * each run encodes a different stretch with the cache emptied first (cold), then the same text again (warm).
 * The JIT is warmed on another stretch first, so "cold" is the cache's, not the compiler's.
 */
export function runRealTextBench (opts: { runs?: number; tokenizers?: string[]; sizes?: number[] } = {}): RealTextBenchRow[] {
  const runs = opts.runs ?? 5;
  const rows: RealTextBenchRow[] = [];
  for (const name of opts.tokenizers ?? REAL_TEXT_TOKENIZERS) {
    const baseline = BASELINES[name];
    const tok = baseline === undefined ? createTokenizerSync(name) : null;
    const encode = baseline !== undefined ? baseline() : (t: string) => tok!.encode(t, { addSpecialTokens: false });
    const cache = pieceCache(tok);
    encode(realTextOfTokens(encode, 130_000, 1000)); // warm-up: JIT, first-use allocations
    for (const size of opts.sizes ?? BENCH_SIZES) {
      const cold: number[] = [];
      const warm: number[] = [];
      const misses: number[] = [];
      let tokens = 0;
      let chars = 0;
      for (let r = 0; r < runs; r++) {
        const text = realTextOfTokens(encode, size, r);
        cache?.clearCache();
        const before = cache?.stats()?.cacheMisses ?? 0;
        let t0 = performance.now();
        const ids = encode(text);
        cold.push(performance.now() - t0);
        misses.push((cache?.stats()?.cacheMisses ?? 0) - before);
        t0 = performance.now();
        encode(text);
        warm.push(performance.now() - t0);
        tokens = ids.length;
        chars = text.length;
      }
      rows.push({ tokenizer: name, tokens, chars, coldMs: median(cold), warmMs: median(warm), misses: cache === null ? null : median(misses), runs });
    }
  }
  return rows;
}

export interface FirstEncodeRow {
  tokenizer: string;
  tokens: number;
  /** p50 over `runs` fresh processes of the process's first encode (JIT and piece cache both cold), ms. */
  firstMs: number;
  /** The same text encoded right after in that process, ms. */
  secondMs: number;
  runs: number;
}

/** The first encode of a fresh process (real text of ~`tokens` tokens), measured in child processes: what a new
 * worker's first long request pays before V8 has optimized the encoder. */
export function runFirstEncodeBench (opts: { runs?: number; tokenizers?: string[]; tokens?: number } = {}): FirstEncodeRow[] {
  const runs = opts.runs ?? 3;
  const rows: FirstEncodeRow[] = [];
  for (const name of opts.tokenizers ?? ['tiktoken:o200k_base', `tiktoken:o200k_base${WASM}`, 'hf:qwen3']) {
    // the text is sized here, so the child encodes nothing before the timed call
    const chars = realTextOfTokens(encoderFor(name), opts.tokens ?? 130_000, 0).length;
    const first: number[] = [];
    const second: number[] = [];
    let tokens = 0;
    for (let r = 0; r < runs; r++) {
      const out = execFileSync(process.execPath, [fileURLToPath(import.meta.url), FIRST_ENCODE_CHILD, name, String(chars)], { encoding: 'utf8' });
      const m = JSON.parse(out) as { tokens: number; firstMs: number; secondMs: number };
      first.push(m.firstMs);
      second.push(m.secondMs);
      tokens = m.tokens;
    }
    rows.push({ tokenizer: name, tokens, firstMs: median(first), secondMs: median(second), runs });
  }
  return rows;
}
const FIRST_ENCODE_CHILD = '--first-encode-child';

function firstEncodeChild (name: string, chars: number): void {
  const encode = encoderFor(name);
  const text = realTextOfChars(chars, 0);
  let t0 = performance.now();
  const ids = encode(text);
  const firstMs = performance.now() - t0;
  t0 = performance.now();
  encode(text);
  console.log(JSON.stringify({ tokens: ids.length, firstMs, secondMs: performance.now() - t0 }));
}

export interface IncrementalBenchRow {
  tokenizer: string;
  /** Tokens of the conversation before the turn. */
  contextTokens: number;
  /** Tokens the turn added. */
  newTokens: number;
  /** Median time of a turn (render + incremental encode), ms, and of a full re-encode of the same prompt. */
  incrementalMs: number;
  fullMs: number;
  runs: number;
}

/** A turn that appends ~1k tokens to a ~130k-token conversation: incremental against full re-encoding. */
export function runIncrementalBench (opts: { runs?: number; tokenizers?: string[]; contextTokens?: number } = {}): IncrementalBenchRow[] {
  const runs = opts.runs ?? 5;
  const rows: IncrementalBenchRow[] = [];
  for (const name of opts.tokenizers ?? BENCH_TOKENIZERS.filter((n) => BASELINES[n] === undefined)) {
    const tok: Tokenizer = createTokenizerSync(name);
    const encode = (t: string): number[] => tok.encode(t, { addSpecialTokens: false });
    const inc = new IncrementalTokenizer(tok);
    const inc_ms: number[] = [];
    const full_ms: number[] = [];
    let contextTokens = 0;
    let newTokens = 0;
    for (let r = 0; r < runs; r++) {
      const history = [
        { role: 'system', content: 'You are a coding agent.' },
        { role: 'user', content: textOfTokens(encode, opts.contextTokens ?? 130_000, 100 + r) }
      ];
      const before = inc.encodeChat(`s${r}`, history, { addGenerationPrompt: true });
      const turn = [...history, { role: 'assistant', content: 'Done.' }, { role: 'user', content: textOfTokens(encode, 1000, 200 + r) }];
      let t0 = performance.now();
      const after = inc.encodeChat(`s${r}`, turn, { addGenerationPrompt: true });
      inc_ms.push(performance.now() - t0);
      t0 = performance.now();
      encode(tok.chatTemplate.render(turn, { addGenerationPrompt: true }));
      full_ms.push(performance.now() - t0);
      contextTokens = before.ids.length;
      newTokens = after.ids.length - before.ids.length;
    }
    rows.push({ tokenizer: name, contextTokens, newTokens, incrementalMs: median(inc_ms), fullMs: median(full_ms), runs });
  }
  return rows;
}

if (process.argv[2] === FIRST_ENCODE_CHILD) firstEncodeChild(process.argv[3], Number(process.argv[4]));
else if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const runs = Number(process.argv[2] ?? 5);
  const command = `node dist/bench/tokenize.js${process.argv[2] !== undefined ? ` ${runs}` : ''}`;
  const rows = runTokenizeBench({ runs });
  const table = [
    '| tokenizer | tokens | chars | p50 ms | tokens/µs | vs old (WASM) |',
    '|---|---:|---:|---:|---:|---:|',
    ...rows.map((r) => {
      const old = rows.find((o) => o.tokenizer === `${r.tokenizer}${WASM}` && o.tokens > 0 && Math.abs(o.tokens - r.tokens) <= r.tokens * 0.01);
      return `| ${r.tokenizer} | ${r.tokens} | ${r.chars} | ${r.p50Ms.toFixed(2)} | ${(r.tokensPerMs / 1000).toFixed(2)} | ${old === undefined ? '' : `${(old.p50Ms / r.p50Ms).toFixed(1)}×`} |`;
    })
  ].join('\n');
  console.log(table);
  const real = runRealTextBench({ runs });
  const perUs = (tokens: number, ms: number): string => (tokens / ms / 1000).toFixed(2);
  const realTable = [
    '| tokenizer | tokens | chars | cold p50 ms | cold tokens/µs | warm p50 ms | warm tokens/µs | cache misses (cold) | cold vs old (WASM) |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---:|',
    ...real.map((r) => {
      const old = real.find((o) => o.tokenizer === `${r.tokenizer}${WASM}` && Math.abs(o.tokens - r.tokens) <= r.tokens * 0.01);
      return `| ${r.tokenizer} | ${r.tokens} | ${r.chars} | ${r.coldMs.toFixed(2)} | ${perUs(r.tokens, r.coldMs)} | ${r.warmMs.toFixed(2)} | ${perUs(r.tokens, r.warmMs)} | ${r.misses ?? ''} | ${old === undefined ? '' : `${(old.coldMs / r.coldMs).toFixed(1)}×`} |`;
    })
  ].join('\n');
  console.log(`\n${realTable}`);
  const first = runFirstEncodeBench();
  const firstTable = [
    '| tokenizer | tokens | first encode of the process, p50 ms | tokens/µs | the same text again, ms | tokens/µs |',
    '|---|---:|---:|---:|---:|---:|',
    ...first.map((r) => `| ${r.tokenizer} | ${r.tokens} | ${r.firstMs.toFixed(1)} | ${perUs(r.tokens, r.firstMs)} | ${r.secondMs.toFixed(1)} | ${perUs(r.tokens, r.secondMs)} |`)
  ].join('\n');
  console.log(`\n${firstTable}`);
  const inc = runIncrementalBench({ runs });
  const incTable = [
    '| tokenizer | context tokens | new tokens | incremental ms | full re-encode ms |',
    '|---|---:|---:|---:|---:|',
    ...inc.map((r) => `| ${r.tokenizer} | ${r.contextTokens} | ${r.newTokens} | ${r.incrementalMs.toFixed(2)} | ${r.fullMs.toFixed(2)} |`)
  ].join('\n');
  console.log(`\n${incTable}`);
  writeSection('bench-tokenize', [
    `## Tokenizer encode speed (\`${command}\`)`,
    '',
    `Machine: ${machine()}. Commit ${gitCommit()}, ${new Date().toISOString().slice(0, 10)}. Shared machine: load average ${loadavg()[0].toFixed(1)} at the end of the run, and figures move with it.`,
    `Command: \`npm run build && ${command}\`. Encode only (addSpecialTokens=false), p50 of ${runs} different texts of`,
    'the decision bench\'s kind (textOfTokens: prose, code, JSON, numbers, some non-Latin), one after the other in one',
    'process; this synthetic text has ~70 distinct words, so the piece cache hits nearly always (real text: below).',
    '"(old: tiktoken WASM)" rows are the encoders',
    'EAR used before byte-bpe.ts (test/tokenize/wasm-reference.ts); byte-bpe.ts produces the same ids (byte-bpe.test.ts).',
    '',
    table,
    '',
    'Real text (bench/real-text.ts: this repo\'s src/ and test/ TypeScript, the READMEs in node_modules, TypeScript\'s',
    'lib.dom.d.ts, interleaved; a different stretch per run), whose pieces are mostly new to the piece cache. Cold: the',
    'piece cache emptied before the encode (the JIT warmed on another stretch first); warm: the same text again at once.',
    `p50 of ${runs} runs. The WASM encoders have no piece cache (cold and warm differ by noise).`,
    '',
    realTable,
    '',
    `The first encode in a fresh process (a child process per run, p50 of ${first[0]?.runs ?? 0}; the first real-text stretch, nothing encoded`,
    'before it but the constructor\'s warm-up): the piece cache is cold and the JIT has seen only the warm-up, as for a new',
    'route worker\'s first long request. Without the warm-up (WARM_UP_TEXT in byte-bpe.ts) this encode ran mostly',
    'unoptimized: ~110 ms for 130k o200k tokens on this machine, ~25 ms with it.',
    '',
    firstTable,
    '',
    'A turn appending ~1k tokens to a ~130k-token session (render + incremental encode), against a full re-encode, p50:',
    '',
    incTable
  ].join('\n'));
}
