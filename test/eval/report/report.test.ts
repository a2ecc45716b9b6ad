import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MetricsCollector, type MetricsSummary } from '../../../src/eval/metrics/collector.js';
import { buildResults, policyTable, writeReport } from '../../../src/eval/report/index.js';

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
  return m.summary({ idealMakespan: 10 });
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
    const results = buildResults({ config: { driver: 'des', workload: 'agentic', engines: 4, seed: 1 }, policies, sweeps });
    const files = await writeReport(dir, results);
    assert.deepEqual(files.slice(0, 2), ['results.json', 'report.md']);
    assert.deepEqual(files.slice(2).sort(), ['amplification.png', 'apc-vs-hotspot.png', 'pending-prefill-ear.png', 'pending-prefill-round-robin.png',
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
    for (const p of policies) assert.equal(md.split('\n').filter((l) => l.startsWith(`| \`${p.policy}\` |`)).length, 1, p.policy);
    assert.match(md, /\| rate \| `round-robin` \| `sticky` \| `ear` \|/);
    assert.match(md, /## Sweep: rate/);
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
  // TTFT p50 (column 1): a and c tie for the lowest; hotspot mean (column 8): balanced a and c win.
  assert.deepEqual(cells.map((c) => c[1].startsWith('**')), [true, false, true]);
  assert.deepEqual(cells.map((c) => c[8].startsWith('**')), [true, false, true]);
  // Migrations have no better direction: never bold.
  assert.ok(cells.every((c) => !c[14].startsWith('**')));
  assert.throws(() => buildResults({ config: {}, policies: [{ policy: 'a', metrics: fast }, { policy: 'a', metrics: slow }] }), /appears twice/);
});
