// workers/ holds thread entry points only: the threads' work lives in src/, which never imports workers/ (it
// starts a thread by its file's URL). Read from the sources.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository's root (tests run compiled from dist/test/threads). */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const FROM = /\bfrom\s+['"]([^'"]+)['"]/g;

function sources (dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

test('src/ imports nothing from workers/', () => {
  const found = sources(join(ROOT, 'src')).flatMap((f) =>
    [...readFileSync(f, 'utf8').matchAll(FROM)].filter((m) => /(^|\/)workers\//.test(m[1])).map((m) => `${relative(ROOT, f)}: ${m[1]}`));
  assert.deepEqual(found, []);
});

test('each entry in workers/ imports its service from src/ and nothing else of the project', () => {
  const entries = sources(join(ROOT, 'workers'));
  assert.ok(entries.length >= 3, entries.join(', '));
  for (const f of entries) {
    const local = [...readFileSync(f, 'utf8').matchAll(FROM)].map((m) => m[1]).filter((s) => s.startsWith('.'));
    assert.ok(local.length > 0 && local.every((s) => s.startsWith('../src/')), `${relative(ROOT, f)}: ${local.join(', ')}`);
  }
});
