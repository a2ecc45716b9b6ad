// Real text for the tokenizer benches, whose pieces are mostly new to a BPE piece cache (the synthetic text of
// textOfChars has ~70 distinct words, so a cache hits nearly always). Only files every checkout has after
// `npm ci`: the repo's own src/ and test/ TypeScript, the READMEs of the installed packages, and TypeScript's
// DOM declarations, interleaved in a fixed order (a README, a source file, a 16k-char slice of lib.dom.d.ts, …)
// so any stretch of the corpus mixes prose, code and declarations, as agent prompts do.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = new URL('../..', import.meta.url).pathname; // dist/bench → repo root
const DTS_SLICE = 16_000;

function sourceFiles (dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...sourceFiles(path));
    else if (name.endsWith('.ts')) out.push(path);
  }
  return out;
}

let corpus: string | null = null;

/** The whole corpus (~4.5 MB of text), read once. */
export function realCorpus (): string {
  if (corpus !== null) return corpus;
  const read = (path: string): string => readFileSync(path, 'utf8');
  const modules = join(ROOT, 'node_modules');
  const readmes = readdirSync(modules).sort().map((m) => join(modules, m, 'README.md'))
    .filter((p) => { try { return statSync(p).isFile(); } catch { return false; } }).map(read);
  const sources = [...sourceFiles(join(ROOT, 'src')), ...sourceFiles(join(ROOT, 'test'))].map(read);
  const dom = read(join(modules, 'typescript', 'lib', 'lib.dom.d.ts'));
  const slices: string[] = [];
  for (let i = 0; i < dom.length; i += DTS_SLICE) slices.push(dom.slice(i, i + DTS_SLICE));
  const parts: string[] = [];
  for (let i = 0; i < Math.max(readmes.length, sources.length, slices.length); i++) {
    for (const list of [readmes, sources, slices]) if (i < list.length) parts.push(list[i]);
  }
  corpus = parts.join('\n\n');
  return corpus;
}

/** `chars` characters of the corpus from a start that depends on `seed` (wrapping around at its end). */
export function realTextOfChars (chars: number, seed: number): string {
  const all = realCorpus();
  // starts spread over the corpus by the golden ratio, so nearby seeds start far apart
  const x = seed * 0.6180339887498949;
  const start = Math.floor((x - Math.floor(x)) * all.length);
  let s = all.slice(start, start + chars);
  while (s.length < chars) s += all.slice(0, chars - s.length);
  return s;
}

/** A text of `ofChars` that encodes to about `tokens` tokens with `encode`: the length scaled by the measured chars/token. */
export function fitToTokens (ofChars: (chars: number, seed: number) => string, encode: (t: string) => number[], tokens: number, seed: number): string {
  let chars = tokens * 4;
  for (let i = 0; i < 5; i++) {
    const n = encode(ofChars(chars, seed)).length;
    if (Math.abs(n - tokens) <= tokens * 0.002) break;
    chars = Math.max(1, Math.round(chars * tokens / n));
  }
  return ofChars(chars, seed);
}

/** Real text that encodes to about `tokens` tokens with `encode` (which warms its cache: clear it after). */
export function realTextOfTokens (encode: (t: string) => number[], tokens: number, seed: number): string {
  return fitToTokens(realTextOfChars, encode, tokens, seed);
}
