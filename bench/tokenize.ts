// Encode time per tokenizer for prompts of ~1k, 33.6k and 130k tokens (p50 over a few runs, each on a different
// text so the BPE word caches see realistic hit rates). Run: `npm run build && node dist/bench/tokenize.js [runs]`.
import { cpus, loadavg, totalmem } from 'node:os';
import { pathToFileURL } from 'node:url';
import { createTokenizerSync, IncrementalTokenizer, type Tokenizer } from '../src/tokenize/index.js';
import { HfTokenizer, qwen3Files } from '../src/tokenize/hf.js';

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

/** The baseline for hf:qwen3's ranked-BPE engine: the same files through the general pure-JS engine. */
export const QWEN3_PURE_JS = 'hf:qwen3 (pure-JS engine)';
export const BENCH_TOKENIZERS = ['character', 'tiktoken:o200k_base', 'tiktoken:cl100k_base', 'hf:qwen3', QWEN3_PURE_JS];

function tokenizerFor (name: string): Tokenizer {
  return name === QWEN3_PURE_JS ? new HfTokenizer(name, qwen3Files(), undefined, { engine: 'js' }) : createTokenizerSync(name);
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

/** A text that encodes to about `tokens` tokens with `encode`: scale the length by the measured chars/token. */
export function textOfTokens (encode: (t: string) => number[], tokens: number, seed: number): string {
  let chars = tokens * 4;
  for (let i = 0; i < 4; i++) {
    const n = encode(textOfChars(chars, seed)).length;
    if (Math.abs(n - tokens) <= tokens * 0.002) break;
    chars = Math.max(1, Math.round(chars * tokens / n));
  }
  return textOfChars(chars, seed);
}

function median (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)];
}

export function runTokenizeBench (opts: { runs?: number; tokenizers?: string[]; sizes?: number[] } = {}): TokenizeBenchRow[] {
  const runs = opts.runs ?? 5;
  const rows: TokenizeBenchRow[] = [];
  for (const name of opts.tokenizers ?? BENCH_TOKENIZERS) {
    const tok = tokenizerFor(name);
    const encode = (t: string): number[] => tok.encode(t, { addSpecialTokens: false });
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
  for (const name of opts.tokenizers ?? BENCH_TOKENIZERS.filter((n) => n !== QWEN3_PURE_JS)) {
    const tok = tokenizerFor(name);
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

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const runs = Number(process.argv[2] ?? 5);
  const cpu = cpus();
  console.log(`machine: ${cpu.length} × ${cpu[0]?.model ?? 'unknown cpu'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, node ${process.version}, load average ${loadavg()[0].toFixed(1)} (shared machine: figures scale with it)`);
  console.log(`command: node dist/bench/tokenize.js ${runs}   (encode only, addSpecialTokens=false, p50 of ${runs} texts)`);
  const rows = runTokenizeBench({ runs });
  console.log('| tokenizer | tokens | chars | p50 ms | tokens/ms |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of rows) console.log(`| ${r.tokenizer} | ${r.tokens} | ${r.chars} | ${r.p50Ms.toFixed(2)} | ${r.tokensPerMs.toFixed(0)} |`);
  console.log('\nA turn appending ~1k tokens to a ~130k-token session (render + encode), p50 ms:');
  console.log('| tokenizer | context tokens | new tokens | incremental ms | full re-encode ms |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of runIncrementalBench({ runs })) {
    console.log(`| ${r.tokenizer} | ${r.contextTokens} | ${r.newTokens} | ${r.incrementalMs.toFixed(2)} | ${r.fullMs.toFixed(2)} |`);
  }
}
