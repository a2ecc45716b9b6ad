// report.md's "Dispatch coupling" table: per policy, mean turn service time W′ against amplification, beside
// the value the Little's-law curve 1 / (1 − Λ·N·W′ / (Λ·N·(W′ + G))) predicts (metrics/coupling.ts says what each
// symbol is and why the curve is normalised by the sessions alive).
import type { PolicyResult } from './results.js';

const f = (v: number | null, d: number) => v === null || !Number.isFinite(v) ? '—' : v.toFixed(d);

export function couplingSection (policies: readonly PolicyResult[]): string[] {
  if (policies.length === 0) return [];
  const rows = policies.map(({ policy, metrics: m }) => {
    const c = m.coupling;
    return `| \`${policy}\` | ${f(c.meanTurnServiceTime, 2)} | ${f(c.sessionArrivalRate, 3)} | ${f(c.meanTurnsPerSession, 1)} | ${f(c.meanToolGap, 2)} | ${f(c.serviceShare, 3)} | ${f(c.occupancy, 1)} | ` +
      `${f(c.predictedAmplification, 2)} | ${f(m.amplification, 2)} | ${f(m.sessionSlowdown.mean, 2)} |`;
  });
  return [
    '## Dispatch coupling', '',
    'W′ = mean request E2E (s); Λ = root sessions/s; N = requests per root session; G = mean tool gap (s); x = Λ·N·W′ / (Λ·N·(W′ + G)), the share of a session\'s life in service (turns in service over sessions alive, by Little\'s law); curve = 1 / (1 − x), a session\'s time over its gaps alone (the measured slowdown divides by isolated turn times and averages ratios over sessions, so it need not sit on it); turns/engine = Λ·N·W′ / K.', '',
    '| policy | W′ (s) | Λ (/s) | N | G (s) | x | turns/engine | curve | amplification | slowdown mean |',
    '|---|---|---|---|---|---|---|---|---|---|',
    ...rows, '',
  ];
}
