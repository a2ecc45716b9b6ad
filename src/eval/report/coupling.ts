// report.md's "Dispatch coupling" table: per policy, mean turn service time W′ against amplification, beside
// the value the Little's-law curve 1 / (1 − Λ·N·W′/K) predicts (metrics/coupling.ts says what each symbol is).
import type { PolicyResult } from './results.js';

const f = (v: number | null, d: number) => v === null || !Number.isFinite(v) ? '—' : v.toFixed(d);

export function couplingSection (policies: readonly PolicyResult[]): string[] {
  if (policies.length === 0) return [];
  const rows = policies.map(({ policy, metrics: m }) => {
    const c = m.coupling;
    return `| \`${policy}\` | ${f(c.meanTurnServiceTime, 2)} | ${f(c.sessionArrivalRate, 3)} | ${f(c.meanTurnsPerSession, 1)} | ${f(c.occupancy, 2)} | ` +
      `${f(c.predictedAmplification, 2)} | ${f(m.amplification, 2)} | ${f(m.sessionSlowdown.mean, 2)} |`;
  });
  return [
    '## Dispatch coupling', '',
    'W′ = mean request E2E (s); Λ = root sessions/s; N = requests per root session; ρ = Λ·N·W′ / K (turns in service per engine, by Little\'s law); curve = 1 / (1 − ρ), — at or past ρ = 1.', '',
    '| policy | W′ (s) | Λ (/s) | N | ρ | curve | amplification | slowdown mean |',
    '|---|---|---|---|---|---|---|---|',
    ...rows, '',
  ];
}
