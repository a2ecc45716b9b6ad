// `ear eval --set retention.NAME=V` reaches the routing host of a des run as the config's retention section would,
// and a bad value is a usage error naming the setting.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/eval.js';
import { RETENTION_DEFAULTS, RetentionTable, type RetentionOptions } from '../../src/core/retention.js';

async function evalCli (args: string[]): Promise<{ code: number; err: string; seen: RetentionOptions[] }> {
  const log = console.log, error = console.error;
  const expire = RetentionTable.prototype.expire;
  const seen: RetentionOptions[] = [];
  RetentionTable.prototype.expire = function (this: RetentionTable, now: number): number {
    if (!seen.includes(this.opts)) seen.push(this.opts);
    return expire.call(this, now);
  };
  let err = '';
  console.log = () => {};
  console.error = (...a: unknown[]) => { err += a.join(' ') + '\n'; };
  try { return { code: await main(args), err, seen }; } finally { console.log = log; console.error = error; RetentionTable.prototype.expire = expire; }
}

const small = ['--policies', 'program-ttl', '--engines', '2', '--profile', 'h100-llama-3.1-8b', '--set', 'sessions=4', '--set', 'rate=2', '--set', 'turnsMedian=3',
  '--set', 'turnsSigma=0.2', '--no-plots'];

test('--set retention.maxShare and retention.gapFactor reach the des run\'s routing host', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-eval-retention-'));
  try {
    const r = await evalCli([...small, '--set', 'retention.maxShare=0.3', '--set', 'retention.gapFactor=3', '--out', dir]);
    assert.equal(r.code, 0, r.err);
    assert.equal(r.seen.length, 1);
    assert.deepEqual(r.seen[0], { ...RETENTION_DEFAULTS, maxShare: 0.3, gapFactor: 3 });
  } finally { rmSync(dir, { recursive: true }); }
});

test('a bad retention setting is a usage error that names it', async () => {
  for (const [set, name] of [['retention.maxShare=2', 'retention.maxShare'], ['retention.ttl=5', 'retention.ttl'], ['retention.minTtlMs=9000000', 'retention.minTtlMs']]) {
    const r = await evalCli([...small, '--set', set, '--out', '/nonexistent']);
    assert.equal(r.code, 2, `${set}: ${r.err}`);
    assert.match(r.err, new RegExp(`--set ${name.replace('.', '\\.')}:`));
    assert.equal(r.seen.length, 0, 'nothing ran');
  }
});
