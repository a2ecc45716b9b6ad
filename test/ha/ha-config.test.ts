// The `ha:` section: defaults, client-go's timing ratios, validation messages, and --ha / --lease-name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { kubeTarget, KubeTargetError } from '../../src/kube/kube-target.js';
import { leaseTargetOptions } from '../../src/ha/active-passive.js';

const backend = { backends: [{ url: 'http://127.0.0.1:1' }] };

test('ha defaults to active-active with client-go\'s 15/10/2 s timings', () => {
  const c = buildConfig(backend);
  assert.deepEqual(c.ha, { mode: 'active-active', leaseName: 'ear-leader', leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2, kubeconfig: null, namespace: null });
});

test('a lease duration alone scales the renew deadline and retry period in client-go\'s ratio', () => {
  const c = buildConfig({ ...backend, ha: { mode: 'active-passive', leaseDurationSeconds: 3 } });
  assert.equal(c.ha.mode, 'active-passive');
  assert.equal(c.ha.renewDeadlineSeconds, 2);
  assert.ok(Math.abs(c.ha.retryPeriodSeconds - 0.4) < 1e-9);
  // A renew deadline given: the retry period follows it, not the lease.
  const r = buildConfig({ ...backend, ha: { leaseDurationSeconds: 60, renewDeadlineSeconds: 5 } }).ha;
  assert.deepEqual([r.leaseDurationSeconds, r.renewDeadlineSeconds, r.retryPeriodSeconds], [60, 5, 1]);
  // A bare mode string is the section's mode.
  assert.equal(buildConfig({ ...backend, ha: 'active-passive' }).ha.mode, 'active-passive');
});

test('invalid ha settings are refused with the field and the rule', () => {
  const bad: Array<[unknown, RegExp]> = [
    [{ mode: 'active-standby' }, /ha\.mode: must be one of active-active, active-passive/],
    [{ leaseName: 'Ear_Leader' }, /ha\.leaseName: must be a Kubernetes object name/],
    [{ leaseDurationSeconds: 2.5 }, /ha\.leaseDurationSeconds: must be an integer/],
    [{ leaseDurationSeconds: 10, renewDeadlineSeconds: 10 }, /ha\.renewDeadlineSeconds: must be less than leaseDurationSeconds/],
    [{ renewDeadlineSeconds: 2, retryPeriodSeconds: 2 }, /ha\.retryPeriodSeconds: must be less than renewDeadlineSeconds/],
    [{ namespace: 'Not A Namespace' }, /ha\.namespace: must be a Kubernetes namespace name/],
    [{ leader: true }, /ha\.leader: unknown field/],
    [[1], /ha: must be a mapping/]
  ];
  for (const [ha, re] of bad) assert.throws(() => buildConfig({ ...backend, ha }), (err: Error) => err instanceof ConfigError && re.test(err.message), JSON.stringify(ha));
});

test('the lease\'s kubeconfig and namespace: ha\'s own, else the discovery section\'s', () => {
  const own = buildConfig({ ...backend, ha: { mode: 'active-passive', kubeconfig: '/k', namespace: 'ns-a' } });
  assert.deepEqual(leaseTargetOptions(own), { kubeconfig: '/k', namespace: 'ns-a' });
  // The discovery section (issue #14, src/discovery/): its kubeconfig and namespace serve the lease too.
  const withDiscovery = buildConfig({ ha: 'active-passive', discovery: { kind: 'k8s', kubeconfig: '/d', namespace: 'ns-d' } });
  assert.deepEqual(leaseTargetOptions(withDiscovery), { kubeconfig: '/d', namespace: 'ns-d' });
});

test('kubeTarget: a kubeconfig file, its context\'s namespace under POD_NAMESPACE, and a clear error without any', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-kube-'));
  try {
    const file = join(dir, 'config');
    writeFileSync(file, 'apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://10.0.0.1:6443\nusers:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n    namespace: from-context\ncurrent-context: x\n');
    const t = await kubeTarget({ kubeconfig: file, namespace: null }, {});
    assert.equal(t.server, 'https://10.0.0.1:6443');
    assert.equal(t.namespace, 'from-context');
    assert.equal((await kubeTarget({ kubeconfig: file, namespace: null }, { POD_NAMESPACE: 'from-env' })).namespace, 'from-env');
    assert.equal((await kubeTarget({ kubeconfig: file, namespace: 'given' }, { POD_NAMESPACE: 'from-env' })).namespace, 'given');
    await assert.rejects(kubeTarget({ kubeconfig: join(dir, 'missing'), namespace: null }, {}), KubeTargetError);
    if (process.env.KUBERNETES_SERVICE_HOST === undefined && !existsSync(join(homedir(), '.kube', 'config'))) {
      await assert.rejects(kubeTarget({ kubeconfig: null, namespace: null }, {}), /no Kubernetes API server/);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
