#!/usr/bin/env node
// Import cycles between folders (src/<folder>/, src/ itself, workers/), type-only imports included: a folder
// that imports another which imports it back. Prints each cycle with the imports that make it; exits 1 if any.
// `node scripts/import-cycles.js`
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const files = [];
function walk (dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (p.endsWith('.ts')) files.push(p);
  }
}
walk(join(root, 'src'));
walk(join(root, 'workers'));

function folder (file) {
  const parts = relative(root, file).split(sep);
  if (parts[0] === 'workers') return 'workers';
  return parts.length === 2 ? 'src' : parts[1];
}

/** 'a -> b' → the imports from folder a into folder b. */
const edges = new Map();
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s+['"](\.[^'"]+)['"]|import\s*\(?\s*['"](\.[^'"]+)['"]/g;
for (const file of files) {
  for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const target = resolve(dirname(file), m[1] ?? m[2]).replace(/\.js$/, '.ts');
    const rel = relative(root, target);
    if (!rel.startsWith(`src${sep}`) && !rel.startsWith(`workers${sep}`)) continue;
    const a = folder(file);
    const b = folder(target);
    if (a === b) continue;
    const key = `${a} -> ${b}`;
    if (!edges.has(key)) edges.set(key, []);
    edges.get(key).push(`${relative(root, file)} -> ${rel}`);
  }
}

let cycles = 0;
for (const [key, imports] of edges) {
  const [a, b] = key.split(' -> ');
  const back = edges.get(`${b} -> ${a}`);
  if (a > b || back === undefined) continue;
  cycles++;
  console.log(`${a} <-> ${b}`);
  for (const i of [...imports, ...back]) console.log(`  ${i}`);
}
if (cycles === 0) console.log('no import cycles between folders');
process.exit(cycles === 0 ? 0 : 1);
