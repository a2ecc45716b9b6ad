// The CPU quota of the process's cgroup, in whole cores: what a container's CPU limit (Kubernetes
// `resources.limits.cpu`, `docker run --cpus`) allows. Node 20's os.availableParallelism() (libuv 1.46) reads only
// the affinity mask, so in a container limited to 4 CPUs on a 64-core node it says 64, and `httpThreads: auto` would
// start 64 data-plane threads (and their route threads, ~65 MB each) to be throttled to 4 cores' time. As libuv
// 1.49+ and Rust's available_parallelism do: cgroup v2, the least quota ÷ period of `cpu.max` from the process's
// cgroup up to the root; cgroup v1, `cpu.cfs_quota_us ÷ cpu.cfs_period_us` of its cpu controller. Floored, at least 1.

import { readFileSync } from 'node:fs';

/** A file's text, or null when it cannot be read (tests give their own). */
export type ReadText = (path: string) => string | null;

const readText: ReadText = (path) => {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
};

/** Whole cores the quota allows (≥ 1), or null when no quota is set or none can be read (not Linux, no cgroup fs). */
export function cgroupCpuQuota (read: ReadText = readText, root = '/sys/fs/cgroup'): number | null {
  const self = read('/proc/self/cgroup');
  if (self === null) return null;
  let least = Infinity;
  for (const line of self.split('\n')) {
    const [id, controllers, path] = splitLine(line);
    if (path === undefined) continue;
    if (id === '0' && controllers === '') {
      // v2: every level's cpu.max bounds the process (a namespaced container sees its own cgroup as "/").
      for (let p = path; ; p = parent(p)) {
        least = Math.min(least, v2Quota(read(`${root}${p === '/' ? '' : p}/cpu.max`)));
        if (p === '/') break;
      }
    } else if (controllers.split(',').includes('cpu')) {
      // v1: the controller's mount, at the cgroup's path (as the host sees it) or else at the mount's root (a
      // container's own cgroup, mounted there).
      const mount = `${root}/${controllers}`;
      const nested = `${mount}${path === '/' ? '' : path}`;
      const at = read(`${nested}/cpu.cfs_quota_us`) !== null ? nested : mount;
      least = Math.min(least, v1Quota(read(`${at}/cpu.cfs_quota_us`), read(`${at}/cpu.cfs_period_us`)));
    }
  }
  return least === Infinity ? null : Math.max(1, Math.floor(least));
}

/** "ID:CONTROLLERS:PATH" (PATH may hold colons). */
function splitLine (line: string): [string, string, string | undefined] {
  const a = line.indexOf(':');
  const b = a < 0 ? -1 : line.indexOf(':', a + 1);
  if (b < 0) return ['', '', undefined];
  return [line.slice(0, a), line.slice(a + 1, b), line.slice(b + 1).trim() || '/'];
}

function parent (p: string): string {
  const i = p.lastIndexOf('/');
  return i <= 0 ? '/' : p.slice(0, i);
}

/** cpu.max: "QUOTA PERIOD" or "max PERIOD". */
function v2Quota (text: string | null): number {
  if (text === null) return Infinity;
  const [quota, period] = text.trim().split(/\s+/);
  const q = Number(quota);
  const p = Number(period ?? 100000);
  return quota === 'max' || !(q > 0) || !(p > 0) ? Infinity : q / p;
}

/** cpu.cfs_quota_us (-1: none) ÷ cpu.cfs_period_us. */
function v1Quota (quota: string | null, period: string | null): number {
  if (quota === null || period === null) return Infinity;
  const q = Number(quota.trim());
  const p = Number(period.trim());
  return !(q > 0) || !(p > 0) ? Infinity : q / p;
}
