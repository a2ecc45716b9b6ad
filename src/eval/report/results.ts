// results.json: every metric per policy, the exact config, the git commit and the machine.
import { spawnSync } from 'node:child_process';
import { cpus, platform, release, totalmem } from 'node:os';
import type { MetricsSummary } from '../metrics/collector.js';
import type { WorkloadStats } from '../workloads/stats.js';

export interface PolicyResult { policy: string; metrics: MetricsSummary }

/** One run of a sensitivity sweep: the swept flag at `value`, for one policy. */
export interface SweepPoint {
  value: number | string; policy: string; metrics: MetricsSummary;
  /** For a sweep of a workload option: the workload as realised at this value (its top-1% token share, the skew). */
  realised?: { top1PctTokenShare: number };
}
export interface Sweep { flag: string; points: SweepPoint[] }

export interface Machine { cpuModel: string; cpus: number; memoryGiB: number; platform: string; release: string; node: string }
export interface Commit { sha: string; dirty: boolean }

export interface Results {
  version: 1;
  createdAt: string;
  commit: Commit | null;
  machine: Machine;
  /** The exact configuration of the run (driver, workload and its options, engines, profile, flags). */
  config: Record<string, unknown>;
  /** The workload's own statistics, when the driver computed them. */
  workload: WorkloadStats | null;
  policies: PolicyResult[];
  sweeps: Sweep[];
}

export function machine (): Machine {
  const c = cpus();
  return {
    cpuModel: c[0]?.model.trim() ?? 'unknown', cpus: c.length, memoryGiB: Math.round(totalmem() / 2 ** 30 * 10) / 10,
    platform: platform(), release: release(), node: process.version,
  };
}

/** HEAD of the git repository holding `dir`, and whether the tree has uncommitted changes; null outside git. */
export function gitCommit (dir = process.cwd()): Commit | null {
  const run = (args: string[]) => spawnSync('git', args, { cwd: dir, encoding: 'utf8', timeout: 5000 });
  const head = run(['rev-parse', 'HEAD']);
  if (head.status !== 0) return null;
  const status = run(['status', '--porcelain', '--untracked-files=no']);
  return { sha: head.stdout.trim(), dirty: status.status === 0 && status.stdout.trim() !== '' };
}

/** Sweep points keep every metric but their pending-prefill timeline (a sweep of 5 flags × 5 values × 12
 *  policies would otherwise carry 300 timelines). */
export function buildResults (r: { config: Record<string, unknown>; policies: PolicyResult[]; sweeps?: Sweep[]; workload?: WorkloadStats | null; repoDir?: string }): Results {
  const names = r.policies.map((p) => p.policy);
  if (new Set(names).size !== names.length) throw new Error(`results: a policy appears twice (${names.join(', ')})`);
  const sweeps = (r.sweeps ?? []).map((s) => ({
    flag: s.flag,
    points: s.points.map((p) => ({ ...p, metrics: { ...p.metrics, timeline: { t: [], pendingPrefill: [], migrations: [], droppedSamples: 0 } } })),
  }));
  return {
    version: 1, createdAt: new Date().toISOString(), commit: gitCommit(r.repoDir), machine: machine(),
    config: r.config, workload: r.workload ?? null, policies: r.policies, sweeps,
  };
}
