#!/usr/bin/env node
// Runs every compiled suite (dist/test/**/*.test.js) with node's own test runner, then the suites of the request
// path again with two data-plane threads (EAR_TEST_HTTP_THREADS=2, the threads pass: test/README.md).
// `node scripts/run-tests.js core` runs only the files whose path contains "core" (in both passes).
// EAR_TEST_HTTP_THREADS set by the caller: one pass, with that many threads.
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const testDir = join(root, 'dist', 'test');

/**
 * The threads pass: the suites that send requests through a gateway they start (its door, pipeline, proxy and
 * answers), which take EAR_TEST_HTTP_THREADS (cli/stop-during-start: a SIGTERM while the threads start). Not all of test/gateway/ (the whole suite would pass 15 min on CI's
 * two cores): not the suites whose gateway ignores it (startGateway with a routing of its own, a shared store),
 * nor those about restarts, KV events, the migration thread and reloads of rows (test/README.md). A name without a
 * folder is test/gateway/'s; telemetry/tracing-e2e checks each thread's spans.
 */
const THREADS_PASS = [
  'admission', 'agent-apis', 'agent-hints', 'contexts', 'deep-json', 'door-refusals', 'e2e', 'e2e-prefix', 'e2e-tokenizers',
  'engine-priority-order', 'method-not-allowed', 'migration-e2e', 'numeric-holes', 'reload-credentials', 'request-head',
  'response-owner', 'security', 'shared-sessions', 'stream-resume', 'token-limit-e2e', 'write-faults', 'telemetry/tracing-e2e',
  'cli/stop-during-start'
].map((name) => join(testDir, name.includes('/') ? '' : 'gateway', `${name}.test.js`));

function walk (dir, out) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (name.endsWith('.test.js')) out.push(p);
  }
  return out;
}

const all = walk(testDir, []);
const missing = THREADS_PASS.filter((f) => !all.includes(f));
if (missing.length > 0) {
  console.error(`the threads pass names suites that are not under dist/test: ${missing.map((f) => relative(root, f)).join(', ')}`);
  process.exit(1);
}
const filters = process.argv.slice(2);
const selected = (f) => filters.length === 0 || filters.some((x) => relative(root, f).includes(x));
const files = all.filter(selected);
if (files.length === 0) {
  console.error('no test files matched under dist/test (did the build run?)');
  process.exit(1);
}

// Two cores: suites run two at a time; each file is its own process. The per-test timeout only catches a hang:
// the longest files (the e2e drivers, the rollout) take minutes on a slow or one-core machine.
function run (list, env) {
  const r = spawnSync(process.execPath, ['--enable-source-maps', '--test', '--test-concurrency=2', '--test-timeout=900000', ...list],
    { stdio: 'inherit', cwd: root, env });
  return r.status ?? 1;
}

const chosen = process.env.EAR_TEST_HTTP_THREADS;
let status = run(files, process.env);
const threaded = chosen === undefined || chosen === '' ? THREADS_PASS.filter((f) => files.includes(f)) : [];
if (threaded.length > 0) {
  console.log(`\n# threads pass: ${threaded.length} suite(s) again with EAR_TEST_HTTP_THREADS=2`);
  const s = run(threaded, { ...process.env, EAR_TEST_HTTP_THREADS: '2' });
  if (status === 0) status = s;
}
process.exit(status);
