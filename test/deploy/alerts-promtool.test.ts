// deploy/prometheus/ear-alerts.yaml through Prometheus's own tool: `promtool check rules` (the rule file as
// Prometheus loads it) and `promtool test rules` (test/deploy/ear-alerts.promtool.yaml: synthetic series, the
// alerts that must and must not fire). promtool comes with Debian's `prometheus` package (.ci/run installs it);
// without it this suite skips and says so.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './manifests.js';

const RULES = join(ROOT, 'deploy', 'prometheus', 'ear-alerts.yaml');
const CASES = join(ROOT, 'test', 'deploy', 'ear-alerts.promtool.yaml');

function promtool (...args: string[]): { status: number | null; out: string } {
  const r = spawnSync('promtool', args, { encoding: 'utf8', cwd: ROOT });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

const missing = ((): string | false => {
  const r = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return r.error !== undefined || r.status !== 0 ? 'promtool is not on PATH (apt-get install -y prometheus; .ci/run does): skipping the promtool checks' : false;
})();

test('promtool check rules: the alert file loads as Prometheus loads it', { skip: missing }, () => {
  const r = promtool('check', 'rules', RULES);
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /SUCCESS: \d+ rules found/);
});

test('promtool test rules: each alert fires on its condition and not without it', { skip: missing }, () => {
  const r = promtool('test', 'rules', CASES);
  assert.equal(r.status, 0, r.out);
  assert.match(r.out, /SUCCESS/);
});

test('promtool test rules fails when an alert does not behave as its case says', { skip: missing }, () => {
  // The same cases against a rule file whose no-backends alert waits 10 minutes: the case at 4m must fail.
  const dir = mkdtempSync(join(tmpdir(), 'ear-promtool-'));
  try {
    writeFileSync(join(dir, 'rules.yaml'), readFileSync(RULES, 'utf8').replace(/(alert: EARNoReadyBackends\n(?:.*\n)*?\s+for:) 1m/, '$1 10m'));
    writeFileSync(join(dir, 'cases.yaml'), readFileSync(CASES, 'utf8').replace('../../deploy/prometheus/ear-alerts.yaml', 'rules.yaml'));
    assert.notEqual(readFileSync(join(dir, 'rules.yaml'), 'utf8'), readFileSync(RULES, 'utf8'), 'the mutation applied');
    const r = promtool('test', 'rules', join(dir, 'cases.yaml'));
    assert.notEqual(r.status, 0, r.out);
    assert.match(r.out, /EARNoReadyBackends/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
