// httpThreads (docs/configuration.md#server): 1 by default, 1 to 64, with either session store (the data-plane
// threads carry a shared store's turns: test/gateway/shared-sessions.test.ts under EAR_TEST_HTTP_THREADS=2).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { autoHttpThreads } from '../../src/config/server.js';
import { cgroupCpuQuota, type ReadText } from '../../src/config/cpu-quota.js';

test('httpThreads: 1 by default, 1 to 64, with a shared session store too', () => {
  assert.equal(buildConfig({}).httpThreads, 1);
  assert.equal(buildConfig({ httpThreads: 64 }).httpThreads, 64);
  assert.equal(buildConfig({}, { httpThreads: '4' }).httpThreads, 4, 'the flag');
  for (const bad of [0, 65, 1.5, 'two']) assert.throws(() => buildConfig({ httpThreads: bad }), ConfigError, String(bad));
  const c = buildConfig({ httpThreads: 2, sessionStore: 'redis://127.0.0.1:6379' });
  assert.deepEqual([c.httpThreads, c.sessionStore], [2, 'redis://127.0.0.1:6379']);
  assert.equal(buildConfig({ httpThreads: 1, sessionStore: 'redis://127.0.0.1:6379' }).httpThreads, 1);
});

test('httpThreads auto: one per core the process may use, at most 64, from a file or the flag', () => {
  const cores = Math.max(1, Math.min(64, availableParallelism(), cgroupCpuQuota() ?? Infinity));
  assert.equal(buildConfig({ httpThreads: 'auto' }).httpThreads, cores);
  assert.equal(buildConfig({}, { httpThreads: 'auto' }).httpThreads, cores, 'the flag');
  assert.throws(() => buildConfig({ httpThreads: 'Auto' }), ConfigError, 'only the word itself');
});

/** A cgroup file system of these files (path → text); any other path cannot be read. */
const files = (f: Record<string, string>): ReadText => (path) => f[path] ?? null;

test('a container\'s CPU limit bounds httpThreads auto: the cgroup quota, v2 and v1', () => {
  // v2 inside a container (its cgroup seen as "/"): docker --cpus 4.
  assert.equal(cgroupCpuQuota(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': '400000 100000\n' })), 4);
  // v2 as the host sees a pod: the least quota on the way up, floored (2.5 cores: 2).
  assert.equal(cgroupCpuQuota(files({
    '/proc/self/cgroup': '0::/kubepods/pod1/ctr\n',
    '/sys/fs/cgroup/kubepods/pod1/ctr/cpu.max': 'max 100000',
    '/sys/fs/cgroup/kubepods/pod1/cpu.max': '250000 100000',
    '/sys/fs/cgroup/kubepods/cpu.max': '6400000 100000'
  })), 2);
  assert.equal(cgroupCpuQuota(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': 'max 100000' })), null, 'no limit');
  assert.equal(cgroupCpuQuota(files({ '/proc/self/cgroup': '0::/\n', '/sys/fs/cgroup/cpu.max': '20000 100000' })), 1, 'a fifth of a core: at least one');
  // v1: the cpu controller's quota at the cgroup's path, else at its mount's root; -1 is no quota.
  assert.equal(cgroupCpuQuota(files({
    '/proc/self/cgroup': '4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n',
    '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '300000\n', '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000\n'
  })), 3);
  assert.equal(cgroupCpuQuota(files({
    '/proc/self/cgroup': '3:cpu,cpuacct:/\n',
    '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us': '-1\n', '/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us': '100000\n'
  })), null);
  assert.equal(cgroupCpuQuota(files({})), null, 'no /proc/self/cgroup: not Linux');
  // auto takes the least of the cores, the quota and 64.
  assert.equal(autoHttpThreads(1), 1);
  assert.equal(autoHttpThreads(null), Math.max(1, Math.min(64, availableParallelism())));
  assert.equal(autoHttpThreads(1000), Math.max(1, Math.min(64, availableParallelism())));
});
