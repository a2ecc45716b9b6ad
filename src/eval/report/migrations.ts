// report.md's "Migrations" section: the migration microbenchmark (issue 12 item 5) of every policy that moved
// or tried to move a session. Policies that never migrate get no section: a row of zeros says nothing.
import type { MetricsSummary } from '../metrics/collector.js';
import { MIGRATION_MODES } from '../metrics/migrations.js';
import type { PolicyResult } from './results.js';

const pct = (x: number) => `${x.toFixed(2)}%`;
const msOf = (us: number) => `${(us / 1000).toFixed(1)} ms`;
const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;

function lines (m: MetricsSummary['migrations']): string[] {
  const modes = [...MIGRATION_MODES, 'unspecified' as const].filter((k) => m.byMode[k] + m.failedByMode[k] > 0)
    .map((k) => `${k} ${m.byMode[k]}${m.failedByMode[k] > 0 ? ` (+${m.failedByMode[k]} failed)` : ''}`);
  const t = m.transferTime, b = m.bytesPerMove;
  const acc = m.accuracy;
  return [
    `- moves: ${m.count}, failed transfers: ${m.failed} (the session stayed on its source)`,
    `- trigger rate: ${pct(m.triggerRatePct)} of requests sent`,
    `- by mode: ${modes.length > 0 ? modes.join(', ') : '—'}`,
    `- transfer time: mean ${msOf(t.mean)}, p50 ${msOf(t.p50)}, p99 ${msOf(t.p99)}`,
    `- bytes per move: mean ${mib(b.mean)}, p50 ${mib(b.p50)}, p99 ${mib(b.p99)} (total ${mib(m.bytes)}, ${m.tokens} tokens)`,
    acc === null
      ? '- accuracy: — (no tHot given to the collector)'
      : `- accuracy: ${acc.accurate} / ${acc.judged}${acc.share === null ? '' : ` (${pct(acc.share * 100)})`} moves whose target stayed ≤ tHot = ${acc.tHot} pending prefill tokens for the session's next ${acc.k} turns`,
    `- thrash: ${m.thrash} (${m.thrashSessions} sessions moved twice within tCool = ${m.tCool} s; must be 0)`,
  ];
}

/** Markdown lines of the section, empty when no policy attempted a migration. */
export function migrationSection (policies: readonly PolicyResult[]): string[] {
  const moving = policies.filter((p) => p.metrics.migrations.count + p.metrics.migrations.failed > 0);
  if (moving.length === 0) return [];
  const out = ['## Migrations', ''];
  for (const p of moving) out.push(`### \`${p.policy}\``, '', ...lines(p.metrics.migrations), '');
  return out;
}
