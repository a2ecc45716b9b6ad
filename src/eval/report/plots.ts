// PNG plots without a browser: a vega-lite spec → vega View (renderer 'none') → SVG → resvg → PNG, with the
// system fonts.
import { Resvg } from '@resvg/resvg-js';
import { parse, View } from 'vega';
import { compile, type TopLevelSpec } from 'vega-lite';
import { COLUMNS } from './markdown.js';
import { couplingAmplification } from '../metrics/coupling.js';
import type { Results, Sweep } from './results.js';

export interface Plot { file: string; spec: TopLevelSpec }

const SCHEMA = 'https://vega.github.io/schema/vega-lite/v5.json';
const base = { $schema: SCHEMA, width: 560, height: 320, background: 'white' } as const;

/** A file-name-safe form of a policy or flag name. */
export function slug (name: string): string {
  return name.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-|-$/g, '') || 'x';
}

function amplificationPlot (r: Results): Plot {
  const values = r.policies.filter((p) => p.metrics.amplification !== null).map((p) => ({ policy: p.policy, amplification: p.metrics.amplification }));
  return {
    file: 'amplification.png',
    spec: {
      ...base, title: 'Wall-clock amplification (makespan / ideal)', data: { values },
      layer: [
        { mark: 'bar', encoding: { x: { field: 'policy', type: 'nominal', sort: null }, y: { field: 'amplification', type: 'quantitative', title: 'amplification' } } },
        { mark: { type: 'rule', color: '#c00', strokeDash: [4, 3] }, encoding: { y: { datum: 1 } } },
      ],
    } as TopLevelSpec,
  };
}

function ttftCdfPlot (r: Results): Plot {
  const values = r.policies.flatMap((p) => p.metrics.ttftCdf.map(([us, pct]) => ({ policy: p.policy, ttftMs: Math.max(us, 1) / 1000, percentile: pct })));
  return {
    file: 'ttft-cdf.png',
    spec: {
      ...base, title: 'TTFT CDF', data: { values },
      mark: { type: 'line', interpolate: 'step-after', point: false },
      encoding: {
        x: { field: 'ttftMs', type: 'quantitative', scale: { type: 'log' }, title: 'TTFT (ms, log)' },
        y: { field: 'percentile', type: 'quantitative', title: 'percentile' },
        color: { field: 'policy', type: 'nominal' },
      },
    } as TopLevelSpec,
  };
}

function apcHotspotPlot (r: Results): Plot {
  const values = r.policies.map((p) => ({ policy: p.policy, apc: p.metrics.apc.value, hotspot: p.metrics.hotspot.mean }));
  return {
    file: 'apc-vs-hotspot.png',
    spec: {
      ...base, title: 'Prefix cache hit rate against load imbalance', data: { values },
      encoding: {
        x: { field: 'hotspot', type: 'quantitative', title: 'hotspot index (mean, 1 = balanced)', scale: { zero: false } },
        y: { field: 'apc', type: 'quantitative', title: 'APC', scale: { domain: [0, 1] } },
      },
      layer: [
        { mark: { type: 'point', filled: true, size: 80 }, encoding: { color: { field: 'policy', type: 'nominal' } } },
        { mark: { type: 'text', dx: 6, align: 'left', fontSize: 10 }, encoding: { text: { field: 'policy' } } },
      ],
    } as TopLevelSpec,
  };
}

function pendingPlots (r: Results): Plot[] {
  return r.policies.filter((p) => p.metrics.timeline.t.length > 0).map((p) => {
    const { t, pendingPrefill, migrations } = p.metrics.timeline;
    const values = pendingPrefill.flatMap((series, engine) => series.map((v, i) => ({ t: t[i], engine: String(engine), pending: v })));
    const layers: unknown[] = [{
      data: { values }, mark: { type: 'line', strokeWidth: 1 },
      encoding: {
        x: { field: 't', type: 'quantitative', title: 'time (s)' },
        y: { field: 'pending', type: 'quantitative', title: 'pending prefill tokens' },
        color: { field: 'engine', type: 'nominal', legend: pendingPrefill.length > 16 ? null : { title: 'engine' } },
      },
    }];
    if (migrations.length > 0) {
      layers.push({ data: { values: migrations }, mark: { type: 'rule', color: '#000', opacity: 0.35, strokeDash: [2, 2] }, encoding: { x: { field: 't', type: 'quantitative' } } });
    }
    return {
      file: `pending-prefill-${slug(p.policy)}.png`,
      spec: { ...base, title: `Pending prefill per engine: ${p.policy}${migrations.length > 0 ? ' (dashed: migrations)' : ''}`, layer: layers } as TopLevelSpec,
    };
  });
}

/**
 * Dispatch coupling: one point per policy at (W′, amplification), both makespan amplification and mean session
 * slowdown (evaluation.md: the slowdown is the figure that moves under overload), and the curve
 * 1 / (1 − x), x = Λ·N·W′ / (Λ·N·(W′ + G)). W′ is the policy's mean request E2E (s), Λ the root sessions' arrival
 * rate (/s), N the requests per root session, G the mean tool gap (s); metrics/coupling.ts gives the argument
 * and why the sessions alive, Λ·N·(W′ + G), normalise it. Λ, N and G belong to the workload, so the curve takes
 * their mean over the policies (equal but for a run cut short). It spans W′ from 0 to 1.2 × the largest W′.
 */
function couplingPlot (r: Results): Plot {
  const points = r.policies.flatMap(({ policy, metrics: m }) => [
    { policy, w: m.coupling.meanTurnServiceTime, y: m.amplification, figure: 'makespan amplification' },
    { policy, w: m.coupling.meanTurnServiceTime, y: m.sessionSlowdown.mean, figure: 'session slowdown (mean)' },
  ]).filter((p) => p.y !== null && Number.isFinite(p.y));
  const mean = (xs: Array<number | null>): number | null => {
    const v = xs.filter((x): x is number => x !== null);
    return v.length === 0 ? null : v.reduce((a, b) => a + b, 0) / v.length;
  };
  const c = r.policies.map((p) => p.metrics.coupling);
  const lambda = mean(c.map((x) => x.sessionArrivalRate));
  const turns = mean(c.map((x) => x.meanTurnsPerSession));
  const gap = mean(c.map((x) => x.meanToolGap));
  const curve: Array<{ w: number; y: number }> = [];
  if (lambda !== null && turns !== null && gap !== null && gap > 0) {
    const wMax = 1.2 * Math.max(0, ...c.map((x) => x.meanTurnServiceTime));
    const STEPS = 60;
    for (let i = 0; i <= STEPS && wMax > 0; i++) {
      const w = (wMax * i) / STEPS;
      curve.push({ w, y: couplingAmplification(lambda, turns, w, gap)! });
    }
  }
  const x = { field: 'w', type: 'quantitative', title: 'mean turn service time W′ (s)' };
  const y = { field: 'y', type: 'quantitative', title: 'amplification / slowdown' };
  const layers: unknown[] = [
    { data: { values: [{ y: 1 }] }, mark: { type: 'rule', color: '#999', strokeDash: [4, 3] }, encoding: { y: { field: 'y', type: 'quantitative' } } },
    { data: { values: points }, mark: { type: 'point', filled: true, size: 80 }, encoding: { x, y, color: { field: 'policy', type: 'nominal' }, shape: { field: 'figure', type: 'nominal', title: null, legend: { labelLimit: 220 } } } },
    { data: { values: points.filter((p) => p.figure === 'session slowdown (mean)') }, mark: { type: 'text', dx: 6, align: 'left', fontSize: 10 }, encoding: { x, y, text: { field: 'policy' } } },
  ];
  if (curve.length > 0) layers.push({ data: { values: curve }, mark: { type: 'line', color: '#c00' }, encoding: { x, y } });
  const sub = curve.length === 0 ? 'no curve: Λ, N or G unknown'
    : `red: 1/(1 − Λ·N·W′/(Λ·N·(W′+G))), Λ=${lambda!.toFixed(3)}/s, N=${turns!.toFixed(1)}, G=${gap!.toFixed(2)} s`;
  return { file: 'coupling.png', spec: { ...base, title: { text: 'Dispatch coupling', subtitle: sub }, layer: layers } as TopLevelSpec };
}

const SWEPT = ['amplification', 'slowdown mean', 'TTFT p90 (ms)', 'TTFT p99 (ms)', 'APC', 'hotspot mean', 'hotspot load-wtd'];

function sweepPlot (s: Sweep): Plot {
  const numeric = s.points.every((p) => typeof p.value === 'number');
  // Migration figures only where something moved (a tHot or tCool sweep of ear), else they are flat zeros.
  const swept = s.points.some((p) => p.metrics.migrations.count + p.metrics.migrations.failed > 0) ? [...SWEPT, 'migrations', 'thrash'] : SWEPT;
  const values = s.points.flatMap((p) => swept.map((label) => {
    const col = COLUMNS.find((c) => c.label === label);
    return { value: p.value, policy: p.policy, metric: label, y: col === undefined ? null : col.value(p.metrics) };
  })).filter((v) => v.y !== null);
  return {
    file: `sweep-${slug(s.flag)}.png`,
    spec: {
      $schema: SCHEMA, background: 'white', title: `Sensitivity to ${s.flag}`, data: { values },
      facet: { row: { field: 'metric', type: 'nominal', title: null, sort: swept } },
      resolve: { scale: { y: 'independent' } },
      spec: {
        width: 520, height: 160, mark: { type: 'line', point: true },
        encoding: {
          x: { field: 'value', type: numeric ? 'quantitative' : 'ordinal', title: s.flag },
          y: { field: 'y', type: 'quantitative', title: null, scale: { zero: false } },
          color: { field: 'policy', type: 'nominal' },
        },
      },
    } as TopLevelSpec,
  };
}

/** Every plot of a results file: amplification, TTFT CDFs, APC vs hotspot, dispatch coupling, pending prefill per
 *  policy, sweeps. */
export function plotsOf (r: Results): Plot[] {
  if (r.policies.length === 0) return r.sweeps.map(sweepPlot);
  return [amplificationPlot(r), ttftCdfPlot(r), apcHotspotPlot(r), couplingPlot(r), ...pendingPlots(r), ...r.sweeps.map(sweepPlot)];
}

export async function renderPng (spec: TopLevelSpec): Promise<Buffer> {
  const view = new View(parse(compile(spec).spec), { renderer: 'none' });
  try {
    const svg = await view.toSVG();
    return new Resvg(svg, { font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' }, background: 'white' }).render().asPng();
  } finally {
    view.finalize();
  }
}
