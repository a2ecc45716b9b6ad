// The folders' import rules (scripts/import-cycles.js): no cycle between folders, no library importing a transport
// (src/gateway/, src/epp/), nothing of the product importing the benchmarks. The script's own output is the
// failure message: the cycle or the import, with the files that make it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

test('scripts/import-cycles.js finds no folder cycle and no library importing a transport', () => {
  const r = spawnSync(process.execPath, ['scripts/import-cycles.js'], { cwd: ROOT, encoding: 'utf8' });
  assert.equal(r.error, undefined);
  assert.equal(r.status, 0, `${r.stdout}${r.stderr}`);
  assert.match(r.stdout, /^no import cycles between folders/);
});
