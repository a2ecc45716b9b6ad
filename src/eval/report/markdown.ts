// report.md: one row per policy, the best value of each column in bold (ties all bold).
import type { MetricsSummary } from '../metrics/collector.js';
import type { Results } from './results.js';
import { migrationSection } from './migrations.js';
import { couplingSection } from './coupling.js';

interface Column { label: string; value: (m: MetricsSummary) => number | null; better: 'lower' | 'higher' | null; digits: number }

const ms = (us: number) => us / 1000;
export const COLUMNS: readonly Column[] = [
  { label: 'TTFT p50 (ms)', value: (m) => ms(m.ttft.p50), better: 'lower', digits: 1 },
  { label: 'TTFT p90 (ms)', value: (m) => ms(m.ttft.p90), better: 'lower', digits: 1 },
  { label: 'TTFT p99 (ms)', value: (m) => ms(m.ttft.p99), better: 'lower', digits: 1 },
  // Over the ideal TTFT (the prefill alone, every reusable prefix cached): what routing can act on.
  { label: 'TTFT excess p90 (ms)', value: (m) => m.ttftExcess.count > 0 ? ms(m.ttftExcess.p90) : null, better: 'lower', digits: 1 },
  { label: 'TPOT p50 (ms)', value: (m) => ms(m.tpot.p50), better: 'lower', digits: 2 },
  { label: 'TPOT p90 (ms)', value: (m) => ms(m.tpot.p90), better: 'lower', digits: 2 },
  { label: 'E2E mean (s)', value: (m) => m.e2e.mean / 1e6, better: 'lower', digits: 2 },
  { label: 'E2E p99 (s)', value: (m) => m.e2e.p99 / 1e6, better: 'lower', digits: 2 },
  { label: 'session mean (s)', value: (m) => m.sessionCompletion.mean / 1e6, better: 'lower', digits: 1 },
  { label: 'slowdown mean', value: (m) => m.sessionSlowdown.mean, better: 'lower', digits: 2 },
  { label: 'slowdown p90', value: (m) => m.sessionSlowdown.p90, better: 'lower', digits: 2 },
  { label: 'APC', value: (m) => m.apc.value, better: 'higher', digits: 3 },
  { label: 'APC / bound', value: (m) => m.apc.ratio, better: 'higher', digits: 3 },
  // Prefix tokens an engine had held for the session and recomputed anyway (evicted, or moved without its KV).
  { label: 'recompute share', value: (m) => m.recompute?.share ?? null, better: 'lower', digits: 4 },
  { label: 'hotspot mean', value: (m) => m.hotspot.mean, better: 'lower', digits: 2 },
  { label: 'hotspot p99', value: (m) => m.hotspot.p99, better: 'lower', digits: 2 },
  { label: 'hotspot load-wtd', value: (m) => m.hotspot.loadWeighted, better: 'lower', digits: 2 },
  { label: 'amplification', value: (m) => m.amplification, better: 'lower', digits: 2 },
  { label: 'output tok/s', value: (m) => m.throughput.outputTokensPerSec, better: 'higher', digits: 0 },
  { label: 'sessions/min', value: (m) => m.throughput.sessionsPerMin, better: 'higher', digits: 2 },
  { label: 'goodput', value: (m) => m.goodput.share, better: 'higher', digits: 3 },
  { label: 'migrations', value: (m) => m.migrations.count, better: null, digits: 0 },
  { label: 'thrash', value: (m) => m.migrations.thrash, better: 'lower', digits: 0 },
  { label: 'failures', value: (m) => m.requests.failed + m.requests.incomplete, better: 'lower', digits: 0 },
];

function fmt (v: number | null, digits: number): string {
  return v === null || !Number.isFinite(v) ? '—' : v.toFixed(digits);
}

function table (header: string[], rows: string[][]): string {
  return [`| ${header.join(' | ')} |`, `|${header.map(() => '---').join('|')}|`, ...rows.map((r) => `| ${r.join(' | ')} |`)].join('\n');
}

export function policyTable (policies: Results['policies']): string {
  const cells = policies.map((p) => COLUMNS.map((c) => c.value(p.metrics)));
  const rows = policies.map((p, i) => [`\`${p.policy}\``, ...COLUMNS.map((c, j) => {
    const v = cells[i][j];
    const text = fmt(v, c.digits);
    if (c.better === null || v === null || policies.length < 2) return text;
    // Compare as printed, so that values that look equal are equally best.
    const shown = cells.map((r) => r[j]).filter((x): x is number => x !== null && Number.isFinite(x)).map((x) => Number(x.toFixed(c.digits)));
    const best = c.better === 'lower' ? Math.min(...shown) : Math.max(...shown);
    return Number(text) === best ? `**${text}**` : text;
  })]);
  return table(['policy', ...COLUMNS.map((c) => c.label)], rows);
}

/** The workload as realised, in one line (report.md and `ear eval`'s output). */
export function describeWorkload (w: NonNullable<Results['workload']>): string {
  const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
  return `${w.sessions} sessions, ${w.requests} requests, mean prompt ${Math.round(w.meanPrompt)}, p99 prompt ${Math.round(w.p99Prompt)}, ` +
    `prompt/output ${w.promptOutputRatio.toFixed(1)}, APC bound ${pct(w.reusableShare)} (intra-session ${pct(w.intraSessionShare)}), ` +
    `top 1% of sessions ${pct(w.top1PctTokenShare)} of input, reuse ${pct(w.reuseSplit.intraSession)} intra / ` +
    `${pct(w.reuseSplit.crossSession)} cross / ${pct(w.reuseSplit.sharedPrefix)} shared prefix`;
}

export function renderMarkdown (r: Results, plots: string[] = []): string {
  const out: string[] = ['# EAR evaluation', ''];
  const cfg = r.config;
  const line = (k: string, v: unknown) => out.push(`- ${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`);
  for (const k of ['driver', 'workload', 'engines', 'profile', 'seed']) if (cfg[k] !== undefined) line(k, cfg[k]);
  // Where the routing's prefix index learned from: the gateway's own decisions, or also the engines' KV events.
  if (cfg.kvEvents !== undefined) line('prefix index', cfg.kvEvents === 'precise' ? `precise (engine KV events, delivered after ${cfg.kvDelayMs ?? 5} ms)` : 'approximate (routing decisions only)');
  line('commit', r.commit === null ? 'unknown' : `${r.commit.sha.slice(0, 12)}${r.commit.dirty ? ' (dirty)' : ''}`);
  line('machine', `${r.machine.cpuModel}, ${r.machine.cpus} CPUs, ${r.machine.memoryGiB} GiB, ${r.machine.platform} ${r.machine.release}, Node ${r.machine.node}`);
  line('created', r.createdAt);
  if (r.workload !== null) {
    const w = r.workload;
    line('workload statistics', describeWorkload(w));
  }
  out.push('', 'Best value per column in bold. Latencies from HDR histograms (µs, 3 significant digits); APC bound = one infinite cache seeing every request in order; hotspot = max / mean pending prefill over engines (mean and p99 over 100 ms samples with load; load-wtd = Σ max / Σ mean over samples); amplification = makespan / ideal makespan; slowdown = session completion time / the same in the ideal run (mean and p90 over sessions).', '');
  out.push(policyTable(r.policies), '');
  out.push(...migrationSection(r.policies), ...couplingSection(r.policies));
  for (const s of r.sweeps) {
    const values = [...new Set(s.points.map((p) => p.value))];
    const policies = [...new Set(s.points.map((p) => p.policy))];
    out.push(`## Sweep: ${s.flag} (amplification)`, '');
    // A workload sweep names each value's realised skew (turnsSigma → top-1% token share).
    const label = (v: number | string): string => {
      const r = s.points.find((x) => x.value === v && x.realised !== undefined)?.realised;
      return r === undefined ? String(v) : `${v} (top 1%: ${(r.top1PctTokenShare * 100).toFixed(1)}%)`;
    };
    out.push(table([s.flag, ...policies.map((p) => `\`${p}\``)], values.map((v) => [label(v), ...policies.map((p) => {
      const pt = s.points.find((x) => x.value === v && x.policy === p);
      return pt === undefined ? '—' : fmt(pt.metrics.amplification, 2);
    })])), '');
  }
  if (plots.length > 0) {
    out.push('## Plots', '');
    for (const p of plots) out.push(`![${p}](${p})`);
    out.push('');
  }
  return out.join('\n');
}
