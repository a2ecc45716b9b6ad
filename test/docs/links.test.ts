// The docs' links resolve: every relative link in README.md and docs/*.md names a file of the repository and, when
// it names a heading of a Markdown page (`page.md#heading`, or `#heading` on the same page), a heading that page
// has, as GitHub anchors it. Source comments cite docs/architecture.md and the other pages the same way
// (`docs/architecture.md#admit`): each such citation resolves too, and none cites the design notes that were
// never in the repository.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PAGES = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((n) => n.endsWith('.md')).sort().map((n) => `docs/${n}`)];

/** The page's text outside fenced code blocks, line by line (a `#` in a YAML or shell block is no heading). */
function proseLines (md: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const line of md.split('\n')) {
    if (/^\s*```/.test(line)) {
      fenced = !fenced;
      continue;
    }
    if (!fenced) out.push(line);
  }
  return out;
}

/** GitHub's anchor for a heading: lower case, punctuation (backticks too) dropped, spaces to hyphens. */
function slug (heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-');
}

/** Every anchor a page has: its headings' slugs, a repeated one numbered as GitHub numbers it (-1, -2, …). */
function anchorsOf (md: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const line of proseLines(md)) {
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (m === null) continue;
    const s = slug(m[1]);
    const n = seen.get(s) ?? 0;
    seen.set(s, n + 1);
    out.add(n === 0 ? s : `${s}-${n}`);
  }
  return out;
}

/** The link targets of a page's prose, inline code left out: `[text](target)` and `[text](target "title")`. */
function linksOf (md: string): string[] {
  const out: string[] = [];
  for (const line of proseLines(md)) {
    const prose = line.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) out.push(m[1]);
  }
  return out;
}

/** Why `target`, linked from `from` (a path relative to the root), does not resolve; null when it does. */
function broken (from: string, target: string): string | null {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return null; // https:, mailto: … : not the repository's
  const hash = target.indexOf('#');
  const path = hash < 0 ? target : target.slice(0, hash);
  const anchor = hash < 0 ? null : decodeURIComponent(target.slice(hash + 1));
  const file = path === '' ? join(ROOT, from) : join(ROOT, dirname(from), decodeURIComponent(path));
  if (!relative(ROOT, file).split(/[\\/]/).every((p) => p !== '..')) return `${target} leaves the repository`;
  if (!existsSync(file)) return `${target}: no such file`;
  if (anchor === null || anchor === '') return null;
  if (!file.endsWith('.md') || statSync(file).isDirectory()) return null;
  if (!anchorsOf(readFileSync(file, 'utf8')).has(anchor)) return `${target}: ${relative(ROOT, file)} has no heading #${anchor}`;
  return null;
}

test('the anchors are GitHub\'s: punctuation and code marks dropped, repeats numbered', () => {
  assert.equal(slug('HTTP API (`ear serve`)'), 'http-api-ear-serve');
  assert.equal(slug('A request\'s life'), 'a-requests-life');
  assert.equal(slug('uWebSockets.js'), 'uwebsocketsjs');
  assert.equal(slug('The engine\'s queue'), 'the-engines-queue');
  assert.deepEqual([...anchorsOf('# A\n## Notes\n```yaml\n# not a heading\n```\n### Notes\n')], ['a', 'notes', 'notes-1']);
  assert.deepEqual(linksOf('see [x](a.md#b), `[y](code.md)` and [z](https://e.org "t")\n```\n[w](fenced.md)\n```\n'), ['a.md#b', 'https://e.org']);
});

test('every relative link in README.md and docs/*.md resolves to a file of the repository, and to a heading when it names one', () => {
  const problems: string[] = [];
  let checked = 0;
  for (const page of PAGES) {
    for (const target of linksOf(readFileSync(join(ROOT, page), 'utf8'))) {
      checked++;
      const why = broken(page, target);
      if (why !== null) problems.push(`${page}: ${why}`);
    }
  }
  assert.ok(checked > 50, `only ${checked} links found: the link reader is broken`);
  assert.deepEqual(problems, []);
});

/** The repository's source and test files (TypeScript, JavaScript, shell). */
function sources (dir: string, out: string[] = []): string[] {
  const abs = join(ROOT, dir);
  if (!existsSync(abs)) return out;
  for (const name of readdirSync(abs).sort()) {
    const p = join(dir, name);
    if (statSync(join(ROOT, p)).isDirectory()) sources(p, out);
    else if (/\.(ts|js|mjs|sh)$/.test(name)) out.push(p);
  }
  return out;
}

test('every docs page a source comment cites exists, with the heading it names', () => {
  // Spelled in two pieces so that this file does not cite them itself.
  const gone = new RegExp(['ARCHITECTURE', 'STYLE'].map((n) => `\\b${n}\\.md`).join('|'));
  const problems: string[] = [];
  let cited = 0;
  for (const file of ['src', 'asm', 'workers', 'bench', 'scripts', 'test'].flatMap((d) => sources(d))) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    if (gone.test(text)) problems.push(`${file} cites ${gone.exec(text)![0]}, which is not in the repository (docs/architecture.md is)`);
    for (const m of text.matchAll(/\bdocs\/([a-z0-9-]+\.md)(#[a-z0-9_-]+)?/g)) {
      cited++;
      const why = broken('README.md', `docs/${m[1]}${m[2] ?? ''}`);
      if (why !== null) problems.push(`${file}: ${why}`);
    }
  }
  assert.ok(cited > 30, `only ${cited} citations of docs/ found: the reader is broken`);
  assert.deepEqual(problems, []);
});
