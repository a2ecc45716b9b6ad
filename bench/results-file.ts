// bench/RESULTS.md holds one section per benchmark, each replaced whole when that benchmark runs again,
// so every benchmark can record its table without touching the others'.
import { readFileSync, writeFileSync } from 'node:fs';

const FILE = new URL('../../bench/RESULTS.md', import.meta.url);
const HEADER = '# Benchmark results\n\nEach section is written by the benchmark it names; rerun the command to refresh it.\n';

export function writeSection (id: string, body: string): void {
  let text: string;
  try {
    text = readFileSync(FILE, 'utf8');
  } catch {
    text = HEADER;
  }
  const begin = `<!-- ${id}:begin -->`;
  const end = `<!-- ${id}:end -->`;
  const section = `${begin}\n${body.trim()}\n${end}`;
  const i = text.indexOf(begin);
  const j = text.indexOf(end);
  text = i >= 0 && j > i ? text.slice(0, i) + section + text.slice(j + end.length) : `${text.trimEnd()}\n\n${section}\n`;
  writeFileSync(FILE, text);
}
