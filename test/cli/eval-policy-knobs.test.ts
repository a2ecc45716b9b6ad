import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { main } from '../../src/cli/eval.js';

/** Runs `ear eval` with console output captured. */
async function evalCli (args: string[]): Promise<{ code: number; err: string }> {
  const log = console.log, error = console.error;
  let err = '';
  console.log = () => {};
  console.error = (...a: unknown[]) => { err += a.join(' ') + '\n'; };
  try { return { code: await main(args), err }; } finally { console.log = log; console.error = error; }
}

test('--sweep tHot reaches the policy: ear moves sessions at tHot=1 and none at 1e9; --set minGain goes to ear only', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-eval-knobs-'));
  try {
    const { code } = await evalCli(['--policies', 'ear', '--engines', '2', '--set', 'sessions=8', '--set', 'rate=2', '--set', 'turnsMedian=4',
      '--set', 'turnsSigma=0.2', '--set', 'minGain=0', '--sweep', 'tHot=1,1000000000', '--no-plots', '--out', dir]);
    assert.equal(code, 0);
    const r = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'));
    assert.deepEqual(r.config.policyKnobs, { ear: { minGain: 0 } });
    const moved = Object.fromEntries(r.sweeps[0].points.map((p: { value: number; metrics: { migrations: { count: number } } }) => [p.value, p.metrics.migrations.count]));
    assert.ok(moved[1] > 0, `tHot=1: ${moved[1]} moves`);
    assert.equal(moved[1e9], 0);
    assert.equal(r.sweeps[0].points[0].realised, undefined, 'a policy-knob sweep keeps the workload');
  } finally { rmSync(dir, { recursive: true }); }
});

test('a policy knob out of range is a usage error, with either driver', async () => {
  for (const driver of ['des', 'e2e']) {
    const bad = await evalCli(['--driver', driver, '--policies', 'ear', '--set', 'tHot=-5', '--out', '/nonexistent']);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--set tHot=-5: policy "ear": knob "tHot" must be/);
  }
});
