#!/usr/bin/env node
// The folders' import rules (docs/architecture.md, "folders"), checked over every relative import in src/, workers/
// and bench/; prints what breaks them, with the imports that do, and exits 1 if anything does:
// - no cycle between folders (src/<folder>/, src/ itself, workers/, bench/), of any length: a folder that reaches
//   itself through the folders it imports;
// - no library imports a transport: src/gateway/ and src/epp/ are imported only by src/cli/, by each other and by
//   bench/. A library is every other folder of src/, and workers/ (its threads run library code: the kv-events chain,
//   the migration planner, the route workers);
// - src/errors/ (the error registry, the ground floor every folder may import) imports no other folder;
// - nothing in src/ or workers/ imports bench/ (the benchmarks drive the product, in-process as the CLI does, and
//   may import any of it, transports included; the product never needs them).
// Type-only imports (`import type`) count as edges: a type belongs to the folder that owns what it describes, so a
// lower folder that needs a higher folder's type says that the type is in the wrong folder (move it down), and
// the higher folder's changes still break the lower one's build.
// `node scripts/import-cycles.js` (test/scripts/import-cycles.test.ts runs it in `npm test`)
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const TOP = ['src', 'workers', 'bench'];
const TRANSPORTS = new Set(['gateway', 'epp']);
/** The folders that may import a transport: the CLI that starts them, the transports, the benchmarks. */
const MAY_IMPORT_TRANSPORTS = new Set(['cli', ...TRANSPORTS, 'bench']);

const files = [];
function walk (dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p);
    else if (p.endsWith('.ts')) files.push(p);
  }
}
for (const top of TOP) walk(join(root, top));

function folder (file) {
  const parts = relative(root, file).split(sep);
  if (parts[0] !== 'src') return parts[0];
  return parts.length === 2 ? 'src' : parts[1];
}

/** 'a -> b' → the imports from folder a into folder b. */
const edges = new Map();
const IMPORT = /(?:^|\n)\s*(?:import|export)\s[^'";]*?from\s+['"](\.[^'"]+)['"]|import\s*\(?\s*['"](\.[^'"]+)['"]/g;
for (const file of files) {
  for (const m of readFileSync(file, 'utf8').matchAll(IMPORT)) {
    const target = resolve(dirname(file), m[1] ?? m[2]).replace(/\.js$/, '.ts');
    const rel = relative(root, target);
    if (!TOP.some((top) => rel.startsWith(`${top}${sep}`))) continue;
    const a = folder(file);
    const b = folder(target);
    if (a === b) continue;
    const key = `${a} -> ${b}`;
    if (!edges.has(key)) edges.set(key, []);
    edges.get(key).push(`${relative(root, file)} -> ${rel}`);
  }
}

const out = new Map();
for (const key of edges.keys()) {
  const [a, b] = key.split(' -> ');
  if (!out.has(a)) out.set(a, []);
  if (!out.has(b)) out.set(b, []);
  out.get(a).push(b);
}

/** Tarjan's strongly connected components: each of more than one folder holds a cycle. */
function components () {
  const index = new Map();
  const low = new Map();
  const stack = [];
  const on = new Set();
  const found = [];
  let next = 0;
  const visit = (v) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    on.add(v);
    for (const w of out.get(v)) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v), low.get(w)));
      } else if (on.has(w)) low.set(v, Math.min(low.get(v), index.get(w)));
    }
    if (low.get(v) !== index.get(v)) return;
    const c = [];
    let w;
    do {
      w = stack.pop();
      on.delete(w);
      c.push(w);
    } while (w !== v);
    if (c.length > 1) found.push(c.sort());
  };
  for (const v of [...out.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

let broken = 0;
for (const c of components()) {
  broken++;
  console.log(`cycle: ${c.join(' <-> ')}`);
  const inside = new Set(c);
  for (const [key, imports] of [...edges].sort()) {
    const [a, b] = key.split(' -> ');
    if (inside.has(a) && inside.has(b)) for (const i of imports) console.log(`  ${i}`);
  }
}
for (const [key, imports] of [...edges].sort()) {
  const [a, b] = key.split(' -> ');
  let why = null;
  if (a === 'errors') why = `the error registry (errors) imports ${b}: it is the ground floor, below every folder`;
  else if (TRANSPORTS.has(b) && !MAY_IMPORT_TRANSPORTS.has(a)) why = `a library (${a}) imports a transport (${b})`;
  else if (b === 'bench' && a !== 'bench') why = `${a} imports the benchmarks`;
  if (why === null) continue;
  broken++;
  console.log(why);
  for (const i of imports) console.log(`  ${i}`);
}
if (broken === 0) console.log('no import cycles between folders, and no library imports a transport');
process.exit(broken === 0 ? 0 : 1);
