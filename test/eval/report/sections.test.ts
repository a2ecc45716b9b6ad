import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MetricsCollector, type MetricsSummary } from '../../../src/eval/metrics/collector.js';
import { buildResults, COLUMNS, plotsOf, renderMarkdown, writeReport, type PolicyResult } from '../../../src/eval/report/index.js';
import { migrationSection } from '../../../src/eval/report/migrations.js';

/** Sessions s0..s3 arrive every 2 s (Λ = 0.5), 3 turns each (N = 3), each turn taking `w` s (W′ = w); engines: 2. */
function run (w: number, opts: { moves?: boolean; tHot?: number; amplification?: number } = {}): MetricsSummary {
  const m = new MetricsCollector({ engines: 2, tHot: opts.tHot, tCool: 30 });
  for (let s = 0; s < 4; s++) {
    for (let k = 0; k < 3; k++) {
      const id = `s${s}/${k}`, at = 2 * s + 10 * k;
      if (opts.moves && s === 0 && k === 1) {
        m.pendingPrefill(at - 0.05, [0, 50]);
        m.migration({ at: at - 0.05, sessionId: 's0', from: 0, to: 1, tokens: 30000, bytes: 3 * 2 ** 30, transferTime: 0.25, mode: 'nixl' });
        m.migration({ at: at - 0.04, sessionId: 's1', from: 0, to: 1, tokens: 30000, bytes: 0, transferTime: 1, mode: 'shared-store', ok: false });
      }
      if (opts.moves && s === 0 && k === 2) m.pendingPrefill(at - 0.05, [0, 500]); // s0's target runs hot before its next turn
      m.requestSent({ id, sessionId: `s${s}`, at, promptTokens: 100 });
      m.firstToken(id, at + w / 2);
      m.requestFinished(id, { at: at + w, cachedTokens: 50, outputTokens: 10 });
    }
    m.sessionDone(`s${s}`, 2 * s + 20 + w);
  }
  const amp = opts.amplification ?? 1;
  return m.summary({ idealMakespan: (26 + w) / amp, idealSessionCompletion: new Map([0, 1, 2, 3].map((s) => [`s${s}`, (20 + w) / amp])) });
}

test('the policy table has the columns issue 12 asks for', () => {
  const labels = COLUMNS.map((c) => c.label);
  for (const l of ['TTFT p50 (ms)', 'TTFT p90 (ms)', 'TTFT p99 (ms)', 'TPOT p90 (ms)', 'E2E mean (s)', 'E2E p99 (s)', 'APC', 'APC / bound',
    'hotspot mean', 'hotspot load-wtd', 'amplification', 'migrations', 'thrash', 'failures']) assert.ok(labels.includes(l), l);
  const m = run(2);
  const col = (l: string) => COLUMNS.find((c) => c.label === l)!.value(m);
  assert.ok(Math.abs(col('TTFT p90 (ms)')! - 1000) < 1, 'TTFT is w / 2 = 1 s (HDR: 3 significant digits)');
  assert.ok(Math.abs(col('E2E mean (s)')! - 2) < 1e-3);
});

test('the Migrations section: one per policy that moved, with trigger rate, modes, failures, transfer, accuracy and thrash', () => {
  const policies: PolicyResult[] = [{ policy: 'kv-load', metrics: run(2) }, { policy: 'ear', metrics: run(1, { moves: true, tHot: 100 }) }];
  const md = migrationSection(policies).join('\n');
  assert.match(md, /^## Migrations/);
  assert.doesNotMatch(md, /`kv-load`/, 'a policy that never moved gets no section');
  assert.match(md, /### `ear`/);
  assert.match(md, /moves: 1, failed transfers: 1/);
  assert.match(md, /trigger rate: 16\.67% of requests sent/); // 2 attempts / 12 requests
  assert.match(md, /by mode: nixl 1, shared-store 0 \(\+1 failed\)/);
  assert.match(md, /transfer time: mean 250\.0 ms, p50 250\.\d ms, p99 250\.\d ms/);
  assert.match(md, /bytes per move: mean 3072\.0 MiB/);
  // s0 moved to engine 1, which held 50 ≤ 100 at its next send, then 500 > 100 at the one after: inaccurate.
  assert.match(md, /accuracy: 0 \/ 1 \(0\.00%\) moves whose target stayed ≤ tHot = 100 pending prefill tokens for the session's next 3 turns/);
  assert.match(md, /thrash: 0 /);
  const noTHot = migrationSection([{ policy: 'ear', metrics: run(1, { moves: true }) }]).join('\n');
  assert.match(noTHot, /accuracy: — \(no tHot/);
  assert.deepEqual(migrationSection([{ policy: 'kv-load', metrics: run(2) }]), []);
  const full = renderMarkdown(buildResults({ config: {}, policies }));
  assert.ok(full.indexOf('## Migrations') > full.indexOf('| `ear` |'), 'after the policy table');
  assert.match(full, /## Dispatch coupling/);
});

test('the coupling plot: a point per policy and figure, and the curve 1 / (1 − Λ·N·W′ / (Λ·N·(W′ + G)))', () => {
  // Λ = 3 / 6 = 0.5, N = 3; each session's turns are 10 s apart, so G = 10 − w. Mean G over the two runs:
  // (9.6 + 9.2) / 2 = 9.4 s; the curve is 1 + W′ / 9.4.
  const policies: PolicyResult[] = [
    { policy: 'a', metrics: run(0.4, { amplification: 1.5 }) },
    { policy: 'b', metrics: run(0.8, { amplification: 3 }) },
  ];
  for (const p of policies) {
    assert.equal(p.metrics.coupling.sessionArrivalRate, 0.5);
    assert.equal(p.metrics.coupling.meanTurnsPerSession, 3);
  }
  assert.ok(Math.abs(policies[1].metrics.coupling.meanToolGap! - 9.2) < 1e-9);
  assert.ok(Math.abs(policies[1].metrics.coupling.predictedAmplification! - (1 + 0.8 / 9.2)) < 1e-9);
  const plot = plotsOf(buildResults({ config: {}, policies })).find((p) => p.file === 'coupling.png');
  assert.ok(plot !== undefined);
  const layers = (plot.spec as unknown as { layer: Array<{ data: { values: Array<Record<string, unknown>> }; mark: { type: string } }> }).layer;
  const points = layers.find((l) => l.mark.type === 'point')!.data.values;
  assert.equal(points.length, 4, 'two policies × (makespan amplification, session slowdown)');
  for (const p of points.filter((x) => x.policy === 'b')) assert.ok(Math.abs((p.w as number) - 0.8) < 1e-9);
  const curve = layers.find((l) => l.mark.type === 'line')!.data.values as Array<{ w: number; y: number }>;
  assert.equal(curve[0].y, 1);
  for (const { w, y } of curve) assert.ok(Math.abs(y - (1 + w / 9.4)) < 1e-9, `${w} → ${y}`);
  assert.ok(Math.abs(curve[curve.length - 1].w - 1.2 * 0.8) < 1e-9, 'spans 1.2 × the largest W′');
});

test('a sweep of a workload option names each value\'s realised top-1% share, and the report files include coupling.png', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-sections-'));
  try {
    const points = [1.5, 2.5].flatMap((v, i) => ['ear', 'sticky'].map((policy) => ({ value: v, policy, metrics: run(1, { moves: policy === 'ear', tHot: 100 }), realised: { top1PctTokenShare: [0.3, 0.6][i] } })));
    const results = buildResults({ config: {}, policies: [{ policy: 'ear', metrics: run(1, { moves: true, tHot: 100 }) }], sweeps: [{ flag: 'turnsSigma', points }] });
    const files = await writeReport(dir, results);
    assert.ok(files.includes('coupling.png') && files.includes('sweep-turnssigma.png'));
    const md = readFileSync(join(dir, 'report.md'), 'utf8');
    assert.match(md, /\| 1\.5 \(top 1%: 30\.0%\) \|/);
    assert.match(md, /\| 2\.5 \(top 1%: 60\.0%\) \|/);
    const sweep = plotsOf(results).find((p) => p.file === 'sweep-turnssigma.png')!;
    const metrics = new Set((sweep.spec as unknown as { data: { values: Array<{ metric: string }> } }).data.values.map((v) => v.metric));
    assert.ok(metrics.has('migrations') && metrics.has('thrash'), 'a sweep where something moved plots migrations');
  } finally { rmSync(dir, { recursive: true }); }
});
