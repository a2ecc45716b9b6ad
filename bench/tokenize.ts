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

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
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
    'process, so the piece cache sees the hit rates of a running gateway. "(old: tiktoken WASM)" rows are the encoders',
    'EAR used before byte-bpe.ts (test/tokenize/wasm-reference.ts); byte-bpe.ts produces the same ids (byte-bpe.test.ts).',
    '',
    table,
    '',
    'A turn appending ~1k tokens to a ~130k-token session (render + incremental encode), against a full re-encode, p50:',
    '',
    incTable
  ].join('\n'));
}
