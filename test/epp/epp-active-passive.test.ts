// `ear epp --ha active-passive`: the gRPC readiness the gateway's probes read (service `readiness`, and the ext_proc
// service) follows the lease as the HTTP /ready does; liveness does not. SIGTERM of the leader hands the lease over.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLeaseServer } from '../fixtures/k8s-lease-server.js';
import { stop } from '../fixtures/processes.js';
import { epp, sims, health, type Epp } from './epp-process.js';
import { until } from '../fixtures/wait.js';

const NS = 'ear-epp-ha';
const LEASE = 'ear-epp-leader';

async function readiness (e: Epp): Promise<[string, string, string, number]> {
  const status = (await fetch(`${e.http}/ready`)).status;
  return [await health(e.health, 'readiness'), await health(e.health, 'envoy.service.ext_proc.v3.ExternalProcessor'), await health(e.health, 'liveness'), status];
}

test('ear epp active-passive: only the leader is SERVING on gRPC readiness and 200 on /ready; SIGTERM hands over', async () => {
  const stub = await startLeaseServer();
  const [engine] = await sims(1);
  const dir = mkdtempSync(join(tmpdir(), 'ear-epp-ha-'));
  const picks: Epp[] = [];
  try {
    const cfg = join(dir, 'ear.yaml');
    writeFileSync(cfg, `ha:\n  leaseDurationSeconds: 3\n  kubeconfig: ${JSON.stringify(stub.kubeconfig(dir))}\n  namespace: ${NS}\n`);
    picks.push(...await Promise.all([0, 1].map(() => epp([`${engine.url},id=engine`], ['--config', cfg, '--route-threads', '1', '--ha', 'active-passive', '--lease-name', LEASE]))));
    const states = (): Promise<Array<[string, string, string, number]>> => Promise.all(picks.map(readiness));
    // The four answers are read one after another, so a replica changing role between them is read again.
    const leading = (r: [string, string, string, number]): boolean => JSON.stringify(r) === JSON.stringify(['SERVING', 'SERVING', 'SERVING', 200]);
    const standby = (r: [string, string, string, number]): boolean => JSON.stringify(r) === JSON.stringify(['NOT_SERVING', 'NOT_SERVING', 'SERVING', 503]);
    const one = (s: Array<[string, string, string, number]>): boolean => s.filter(leading).length === 1 && s.filter(standby).length === 1;
    let last: unknown = null;
    const seen = (s: Array<[string, string, string, number]>): Array<[string, string, string, number]> => { last = s; return s; };
    let s = await until(async () => { const x = seen(await states()); return one(x) && x; }, { what: () => `one leader and one standby (last ${JSON.stringify(last)})`, timeoutMs: 30_000 });
    const leader = s.findIndex((r) => r[0] === 'SERVING');
    const follower = 1 - leader;
    assert.deepEqual(s[leader], ['SERVING', 'SERVING', 'SERVING', 200]);
    // A follower is alive (liveness SERVING) but not ready, on gRPC and on HTTP alike.
    assert.deepEqual(s[follower], ['NOT_SERVING', 'NOT_SERVING', 'SERVING', 503]);
    assert.ok(stub.api.lease(NS, LEASE)!.spec.holderIdentity !== '');

    // SIGTERM: the leader releases the lease as it drains; the follower becomes ready well before the lease's 3 s.
    await stop(picks[leader].proc);
    s = await until(async () => { const x = seen([await readiness(picks[follower])]); return leading(x[0]) && x; }, { what: () => `the follower to lead (last ${JSON.stringify(last)})`, timeoutMs: 30_000 });
    assert.deepEqual(s[0], ['SERVING', 'SERVING', 'SERVING', 200]);
  } finally {
    await Promise.all(picks.map((p) => p.close()));
    await stop(engine);
    await stub.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
