#!/usr/bin/env node
// Runs every compiled suite (dist/test/**/*.test.js) with node's own test runner.
// `node scripts/run-tests.js core` runs only the files whose path contains "core".
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const testDir = join(root, 'dist', 'test');

function walk (dir, out) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.test.js')) out.push(p);
  }
  return out;
}

const filters = process.argv.slice(2);
const files = walk(testDir, []).filter((f) => filters.length === 0 || filters.some((x) => relative(root, f).includes(x)));
if (files.length === 0) {
  console.error('no test files matched under dist/test (did the build run?)');
  process.exit(1);
}
// Two cores: suites run two at a time; each file is its own process. The per-test timeout only catches a hang:
// the longest files (the e2e drivers, the rollout) take minutes on a slow or one-core machine.
const r = spawnSync(process.execPath, ['--enable-source-maps', '--test', '--test-concurrency=2', '--test-timeout=900000', ...files],
  { stdio: 'inherit', cwd: root });
process.exit(r.status ?? 1);
