// The error registry checks itself against the source and the docs (as fastify tests that every code is
// documented): every code is documented in docs/errors.md with the same status and types, every code is thrown
// somewhere in src/, and every EAR_ERR_ name anywhere in the source is a registered code.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EarError, ERRORS, errorCodeOf, openAiError, type ErrorCode } from '../../src/errors/errors.js';
import { QueueFullError } from '../../src/core/admission-control.js';
import { NoCandidateError } from '../../src/core/policy.js';
import { UpstreamError } from '../../src/upstream/errors.js';
import { statusLine } from '../../src/gateway/uws-io.js';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const REGISTRY = 'src/errors/errors.ts';
const CODES = Object.keys(ERRORS) as ErrorCode[];

function sources (dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(join(ROOT, dir)).sort()) {
    const p = join(dir, name);
    if (statSync(join(ROOT, p)).isDirectory()) sources(p, out);
    else if (name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Every TypeScript file the gateway, the tools and the threads are built from, but the registry, with its text. */
const FILES = [...sources('src'), ...sources('workers')].filter((f) => f !== REGISTRY).map((f) => ({ file: f, text: readFileSync(join(ROOT, f), 'utf8') }));

test('docs/errors.md has one row per code, with the registry\'s status, types and description', () => {
  const doc = readFileSync(join(ROOT, 'docs/errors.md'), 'utf8');
  const rows = new Map<string, string>();
  for (const line of doc.split('\n')) {
    const m = /^\| `(EAR_ERR_[A-Z0-9_]+)` \|/.exec(line);
    if (m === null) continue;
    assert.ok(!rows.has(m[1]), `${m[1]} is documented twice`);
    rows.set(m[1], line);
  }
  for (const code of CODES) {
    const s = ERRORS[code];
    assert.equal(rows.get(code), `| \`${code}\` | ${s.status} | \`${s.type}\` | \`${s.anthropic}\` | ${s.when} |`, `docs/errors.md row of ${code}`);
  }
  for (const code of rows.keys()) assert.ok(Object.hasOwn(ERRORS, code), `docs/errors.md documents ${code}, which src/errors/errors.ts does not have`);
});

test('every code is thrown somewhere in src/ (an error constructed with it)', () => {
  const unused = CODES.filter((code) => {
    const made = new RegExp(`(?:\\bnew \\w+|\\bsuper)\\(\\s*'${code}'`);
    return !FILES.some((f) => made.test(f.text));
  });
  assert.deepEqual(unused, [], 'registered codes no error is constructed with');
});

test('every EAR_ERR_ name in the source is a registered code, and no class carries a code of its own', () => {
  const unknown: string[] = [];
  const own: string[] = [];
  for (const { file, text } of FILES) {
    for (const m of text.matchAll(/EAR_ERR_[A-Z0-9_]*[A-Z0-9]/g)) if (!Object.hasOwn(ERRORS, m[0])) unknown.push(`${file}: ${m[0]}`);
    // A code is given to EarError's constructor, not declared as a field beside it.
    for (const m of text.matchAll(/\bcode\s*=\s*'EAR_ERR_\w+'/g)) own.push(`${file}: ${m[0]}`);
  }
  assert.deepEqual(unknown, []);
  assert.deepEqual(own, []);
});

test('the registry imports nothing, so src/core/ and the worker threads can load it', () => {
  assert.doesNotMatch(readFileSync(join(ROOT, REGISTRY), 'utf8'), /^\s*import\s/m);
});

test('every status the registry names has a reason phrase in the uWS status line', () => {
  for (const code of CODES) assert.doesNotMatch(statusLine(ERRORS[code].status), / Status$/, code);
});

test('openAiError: an EarError by its code, with Retry-After when it has one; anything else internal, its message unseen', () => {
  const e = openAiError(new EarError('EAR_ERR_BODY_TOO_LARGE', 'body exceeds 1024 bytes'));
  assert.equal(e.status, 413);
  assert.deepEqual(JSON.parse(e.body), { error: { message: 'body exceeds 1024 bytes', type: 'invalid_request_error', code: 'EAR_ERR_BODY_TOO_LARGE' } });
  assert.deepEqual(e.headers, [['content-type', 'application/json']]);
  // A subclass from src/core/ answers by its code too, with its Retry-After.
  const full = openAiError(new QueueFullError(3));
  assert.equal(full.status, 429);
  assert.equal(JSON.parse(full.body).error.code, 'EAR_ERR_QUEUE_FULL');
  assert.deepEqual(full.headers, [['content-type', 'application/json'], ['retry-after', '3']]);
  assert.equal(openAiError(new NoCandidateError()).status, 503);
  const internal = openAiError(new Error('secret path /etc/x'));
  assert.equal(internal.status, 500);
  assert.deepEqual(JSON.parse(internal.body), { error: { message: 'internal error', type: 'internal_error', code: 'EAR_ERR_INTERNAL' } });
  for (const thrown of [null, undefined, 'a string', { code: 'EAR_ERR_QUEUE_FULL' }]) assert.equal(errorCodeOf(thrown), 'EAR_ERR_INTERNAL');
});

test('instanceof: EarError holds for every subclass and across copies of the module; a subclass only for its own', () => {
  const up = new UpstreamError('EAR_ERR_UPSTREAM_CLOSED', 'closed');
  assert.ok(up instanceof EarError && up instanceof UpstreamError && up instanceof Error);
  assert.ok(!(up instanceof QueueFullError));
  assert.ok(!(new EarError('EAR_ERR_QUEUE_FULL', 'x') instanceof QueueFullError));
  assert.equal(up.status, 502);
  assert.equal(up.name, 'UpstreamError');
  // An error from another copy of the module (another realm, a second load) carries the same brand.
  const foreign = Object.assign(new Error('x'), { [Symbol.for('ear.error.EarError')]: true, code: 'EAR_ERR_DRAINING' });
  assert.ok(foreign instanceof EarError);
  assert.ok(!(new Error('x') instanceof EarError));
});
