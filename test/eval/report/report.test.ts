import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MetricsCollector, type MetricsSummary } from '../../../src/eval/metrics/collector.js';
import { buildResults, COLUMNS, describeWorkload, policyTable, writeReport } from '../../../src/eval/report/index.js';

const workload = {
  requests: 10, sessions: 2, promptTokens: 1000, outputTokens: 10, promptOutputRatio: 100, meanPrompt: 100, p99Prompt: 120000,
  top1PctTokenShare: 0.465, reusableShare: 0.8034, intraSessionShare: 0.7461, reuseSplit: { intraSession: 0.93, crossSession: 0.06, sharedPrefix: 0.01 },
};

/** A small run: `n` requests, TTFT growing with `slow`, a skewed or balanced load, some migrations. */
function run (slow: number, skew: boolean, moves: number): MetricsSummary {
  const m = new MetricsCollector({ engines: 4, blockSize: 4, tCool: 5 });
  for (let i = 0; i < 40; i++) {
    const id = `s${i % 5}/${i}`;
    m.requestSent({ id, sessionId: `s${i % 5}`, at: i * 0.5, promptTokens: 16, blocks: [i % 5, 100 + i, 200 + i, 300 + i] });
    m.firstToken(id, i * 0.5 + 0.01 * slow * (1 + (i % 7)));
    m.requestFinished(id, { at: i * 0.5 + 0.2 * slow, cachedTokens: i % 3 === 0 ? 4 : 0, outputTokens: 20 });
  }
  for (let t = 0; t < 200; t++) m.pendingPrefill(t / 10, skew ? [t, 1, 0, 1] : [5, 5, 4, 6]);
  for (let k = 0; k < moves; k++) m.migration({ at: 3 * k, sessionId: 's1', from: 0, to: 1, tokens: 100, bytes: 9800, transferTime: 0.01 });
  for (let s = 0; s < 5; s++) m.sessionDone(`s${s}`, 20);
  return m.summary({ idealMakespan: 10, idealSessionCompletion: new Map([0, 1, 2, 3, 4].map((s) => [`s${s}`, 4 / slow])) });
}

test('results.json, report.md (a row per policy, best marked) and PNG plots are written', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-report-'));
  try {
    const policies = [
      { policy: 'round-robin', metrics: run(3, false, 0) },
      { policy: 'sticky', metrics: run(1, true, 0) },
      { policy: 'ear', metrics: run(1, false, 3) },
    ];
    const sweeps = [{ flag: 'rate', points: [0.2, 0.5, 1].flatMap((v) => policies.map((p) => ({ value: v, policy: p.policy, metrics: run(v * 2, p.policy === 'sticky', 0) }))) }];
    const results = buildResults({ config: { driver: 'des', workload: 'agentic', engines: 4, seed: 1 }, policies, sweeps, workload });
    const files = await writeReport(dir, results);
    assert.deepEqual(files.slice(0, 2), ['results.json', 'report.md']);
    assert.deepEqual(files.slice(2).sort(), ['amplification.png', 'apc-vs-hotspot.png', 'coupling.png', 'pending-prefill-ear.png', 'pending-prefill-round-robin.png',
      'pending-prefill-sticky.png', 'sweep-rate.png', 'ttft-cdf.png']);

    const parsed = JSON.parse(readFileSync(join(dir, 'results.json'), 'utf8'));
    assert.equal(parsed.policies.length, 3);
    assert.equal(parsed.config.driver, 'des');
    assert.equal(typeof parsed.machine.cpus, 'number');
    assert.match(parsed.commit.sha, /^[0-9a-f]{40}$/);
    assert.equal(parsed.policies[2].metrics.migrations.thrash, 2);
    assert.equal(parsed.policies[0].metrics.timeline.t.length, 200);
    assert.equal(parsed.sweeps[0].points.length, 9);
    assert.equal(parsed.sweeps[0].points[0].metrics.timeline.t.length, 0, 'sweep points drop their timelines');

    const md = readFileSync(join(dir, 'report.md'), 'utf8');
    const policyTable = md.slice(0, md.indexOf('\n## ')); // the sections after it have rows per policy of their own
    for (const p of policies) assert.equal(policyTable.split('\n').filter((l) => l.startsWith(`| \`${p.policy}\` |`)).length, 1, p.policy);
    assert.match(md, /\| rate \| `round-robin` \| `sticky` \| `ear` \|/);
    assert.match(md, /## Sweep: rate/);
    assert.match(md, /- workload statistics: .*APC bound 80\.3% \(intra-session 74\.6%\)/);
    assert.match(md, /\| slowdown mean \| slowdown p90 \|.*\| hotspot load-wtd \|/);
    assert.equal(parsed.policies[0].metrics.hotspot.loadWeighted, 6 / 5); // [5, 5, 4, 6] throughout
    // Sessions s0..s4 start at 0, 0.5, .., 2 s and end at 20 s, against an ideal of 4 / 3 s each.
    assert.deepEqual(parsed.policies[0].metrics.sessionSlowdown, { mean: (20 + 19.5 + 19 + 18.5 + 18) / 5 * 3 / 4, p90: 15, sessions: 5, idealMean: 4 / 3 });
    assert.match(md, /!\[ttft-cdf\.png\]\(ttft-cdf\.png\)/);

    for (const f of files.slice(2)) {
      const png = readFileSync(join(dir, f));
      assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], f);
      assert.ok(statSync(join(dir, f)).size > 5000, `${f} is ${statSync(join(dir, f)).size} bytes`);
    }
  } finally { rmSync(dir, { recursive: true }); }
});

test('the best value per column is bold, by the column direction, ties included', () => {
  const fast = run(1, false, 0), slow = run(3, true, 0);
  const rows = policyTable([{ policy: 'a', metrics: fast }, { policy: 'b', metrics: slow }, { policy: 'c', metrics: fast }]).split('\n').slice(2);
  const cells = rows.map((r) => r.split('|').map((c) => c.trim()).slice(1, -1));
  const col = (label: string) => 1 + COLUMNS.findIndex((c) => c.label === label);
  // TTFT p50: a and c tie for the lowest; hotspot mean and load-weighted: balanced a and c win.
  for (const label of ['TTFT p50 (ms)', 'hotspot mean', 'hotspot load-wtd', 'slowdown mean']) {
    assert.deepEqual(cells.map((c) => c[col(label)].startsWith('**')), [true, false, true], label);
  }
  // The longest session (20 s) against an ideal of 4 / slow s: p90 slowdown 5 · slow.
  assert.deepEqual(cells.map((c) => c[col('slowdown p90')].replace(/\*/g, '')), ['5.00', '15.00', '5.00']);
  // Migrations have no better direction: never bold.
  assert.ok(cells.every((c) => !c[col('migrations')].startsWith('**')));
  assert.throws(() => buildResults({ config: {}, policies: [{ policy: 'a', metrics: fast }, { policy: 'a', metrics: slow }] }), /appears twice/);
});

test('the workload line names the APC bound, the intra-session bound and the p99 prompt', () => {
  const line = describeWorkload(workload);
  assert.match(line, /APC bound 80\.3% \(intra-session 74\.6%\)/);
  assert.match(line, /p99 prompt 120000/);
  assert.match(line, /reuse 93\.0% intra \/ 6\.0% cross \/ 1\.0% shared prefix/);
});
