// Three `ear serve --ha active-passive` processes against the stub Lease API: exactly one reports ready; SIGTERM
// of the leader releases the lease and a follower takes over without waiting for it to expire; SIGKILL of the
// leader is taken over only after the lease expires; an API server that stops answering makes the leader step
// down. Bounds are generous (the machine is shared); what is asserted is who is ready, and in which order the
// lease was written.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLeaseServer } from '../fixtures/k8s-lease-server.js';
import { fakeEngine } from '../fixtures/fake-engine.js';
import { start, stop, metric, SERVE_LISTENING, type Proc } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

const NS = 'ear-e2e';
const LEASE = 'ear-e2e-leader';
// 5 s (renew deadline 3.3 s, retry 0.67 s): a leader's renewal delayed past the lease by a stalled event loop
// lets a follower take over, rightly; at 3 s that happened on two cores at load average 12.
const LEASE_SECONDS = 5;

interface Probe { url: string; status: number; body: { ready: boolean; reason?: string; ha?: { role: string; identity: string; holder: string | null } } }

async function probe (url: string): Promise<Probe | null> {
  try {
    const res = await fetch(`${url}/ready`, { signal: AbortSignal.timeout(5000) });
    return { url, status: res.status, body: await res.json() as Probe['body'] };
  } catch {
    return null;
  }
}

/** The replicas' /ready answers, until `cond` holds for them (rejects after `ms`). */
async function readyUntil (what: string, urls: string[], cond: (p: Array<Probe | null>) => boolean, ms = 30_000): Promise<Array<Probe | null>> {
  let p: Array<Probe | null> = [];
  return await until(async () => { p = await Promise.all(urls.map(probe)); return cond(p) && p; }, { what: () => `${what}: ${JSON.stringify(p)}`, timeoutMs: ms });
}

const readyOnes = (p: Array<Probe | null>): Probe[] => p.filter((x): x is Probe => x !== null && x.status === 200);

test('active-passive: one ready replica; SIGTERM hands over at once, SIGKILL after the lease expires, an API outage leaves none ready', async () => {
  const stub = await startLeaseServer();
  const engine = await fakeEngine('m');
  const dir = mkdtempSync(join(tmpdir(), 'ear-ha-'));
  const procs: Proc[] = [];
  try {
    const cfg = join(dir, 'ear.yaml');
    // The timings and the API server in the file; the mode and the lease name as flags (merged into the section).
    writeFileSync(cfg, `ha:\n  leaseDurationSeconds: ${LEASE_SECONDS}\n  kubeconfig: ${JSON.stringify(stub.kubeconfig(dir))}\n  namespace: ${NS}\n`);
    const args = ['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--backend', `${engine.url},id=engine`, '--route-threads', '1',
      '--ha', 'active-passive', '--lease-name', LEASE];
    procs.push(...await Promise.all([0, 1, 2].map(() => start(args, SERVE_LISTENING))));
    const urls = procs.map((p) => p.url);

    // Exactly one ready, and it stays so while the leader renews three times (the followers read the lease
    // between two renewals: retry period 0.67 s here, with jitter).
    let p = await readyUntil('one leader', urls, (x) => readyOnes(x).length === 1 && x.every((r) => r !== null));
    const holder = readyOnes(p)[0].body.ha!.identity;
    const since = performance.now();
    await until(async () => {
      p = await Promise.all(urls.map(probe));
      assert.equal(readyOnes(p).length, 1, JSON.stringify(p));
      return stub.api.history.filter((w) => w.holder === holder && w.at > since).length >= 3;
    }, { what: 'three renewals by the leader, one replica ready throughout', intervalMs: 200 });
    const leaderUrl = readyOnes(p)[0].url;
    const leader = procs[urls.indexOf(leaderUrl)];
    const leaderId = readyOnes(p)[0].body.ha!.identity;
    assert.equal(stub.api.lease(NS, LEASE)!.spec.holderIdentity, leaderId);
    for (const r of p) {
      if (r!.url === leaderUrl) continue;
      assert.equal(r!.status, 503);
      assert.match(r!.body.reason!, /active-passive standby: the leader lease ear-e2e\/ear-e2e-leader is held by /);
      assert.equal(r!.body.ha!.role, 'follower');
      // Liveness is not leadership: a follower is healthy.
      assert.equal((await fetch(`${r!.url}/health`)).status, 200);
      // And it serves what reaches it anyway (a hot standby), only the Service's traffic goes to the leader.
      const res = await fetch(`${r!.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] }) });
      assert.equal(res.status, 200, await res.text());
      assert.equal(await metric(r!.url, 'ear_ha_leader', ''), 0);
    }
    assert.equal(await metric(leaderUrl, 'ear_ha_leader', ''), 1);
    assert.equal(await metric(leaderUrl, 'ear_ha_lease_transitions_total', '{to="leader"}'), 1);

    // SIGTERM: the leader releases the lease; a follower takes it at its next try, not a lease duration later.
    const writesBefore = stub.api.history.length;
    const exited = stop(leader, 'SIGTERM');
    const rest = urls.filter((u) => u !== leaderUrl);
    p = await readyUntil('a follower to take over after SIGTERM', rest, (x) => readyOnes(x).length === 1);
    assert.equal(await exited, 0);
    const afterTerm = stub.api.history.slice(writesBefore);
    const release = afterTerm.findIndex((w) => w.holder === '');
    assert.ok(release >= 0, `the leader released the lease: ${JSON.stringify(afterTerm)}`);
    const second = readyOnes(p)[0];
    const secondId = second.body.ha!.identity;
    const taken = afterTerm.findIndex((w) => w.holder === secondId);
    assert.ok(taken > release, 'taken after the release');
    // Taken before the lease could have expired (a follower counts the lease duration from when it saw the last
    // renewal, which the server stamped first): it was the release that let it in.
    const lastBeforeTerm = stub.api.history.slice(0, writesBefore + release).filter((w) => w.holder === leaderId).at(-1)!;
    assert.ok(afterTerm[taken].at - lastBeforeTerm.at < LEASE_SECONDS * 1000, `taken ${Math.round(afterTerm[taken].at - lastBeforeTerm.at)} ms after the last renewal`);
    assert.equal(stub.api.lease(NS, LEASE)!.spec.leaseTransitions, 1);

    // SIGKILL: no release; the last follower waits for the lease to expire.
    const secondProc = procs[urls.indexOf(second.url)];
    const lastUrl = rest.find((u) => u !== second.url)!;
    const killedAt = stub.api.history.length;
    await stop(secondProc, 'SIGKILL');
    const lastRenewal = stub.api.history.filter((w) => w.holder === secondId).at(-1)!;
    p = await readyUntil('the last follower to take over after SIGKILL', [lastUrl], (x) => readyOnes(x).length === 1);
    const afterKill = stub.api.history.slice(killedAt);
    assert.ok(!afterKill.some((w) => w.holder === ''), 'a killed leader releases nothing');
    const lastId = readyOnes(p)[0].body.ha!.identity;
    const takeover = afterKill.find((w) => w.holder === lastId)!;
    assert.ok(takeover.at - lastRenewal.at >= LEASE_SECONDS * 1000 - 50, `taken over ${Math.round(takeover.at - lastRenewal.at)} ms after the last renewal, before the lease expired`);
    assert.equal(stub.api.lease(NS, LEASE)!.spec.leaseTransitions, 2);

    // The API server stops answering: the leader steps down (renew deadline), and nobody is ready.
    stub.api.pause();
    await readyUntil('the leader to step down', [lastUrl], (x) => x[0]?.status === 503);
    const down = await probe(lastUrl);
    assert.equal(down!.body.ha!.role, 'follower');
    assert.equal(await metric(lastUrl, 'ear_ha_leader', ''), 0);
    assert.ok(await metric(lastUrl, 'ear_ha_lease_errors_total', '{kind="api"}') >= 1);
    // Readiness turns at the renew deadline; the step-down is counted when its timer fires, a moment later.
    await until(async () => await metric(lastUrl, 'ear_ha_lease_transitions_total', '{to="follower"}') === 1, 'the step-down counted in ear_ha_lease_transitions_total');
    stub.api.resume();
    await readyUntil('it to lead again once the API answers', [lastUrl], (x) => x[0]?.status === 200);
  } finally {
    await Promise.all(procs.map((x) => stop(x, 'SIGKILL')));
    await engine.close();
    await stub.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('active-passive with no API server to find refuses to start, saying what to set', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-ha-'));
  try {
    // No kubeconfig, not in a pod, no KUBECONFIG, and a home without ~/.kube/config.
    const env = { ...process.env, HOME: dir, KUBECONFIG: '', KUBERNETES_SERVICE_HOST: '' };
    const ear = new URL('../../src/cli/ear.js', import.meta.url).pathname;
    const r = spawnSync(process.execPath, [ear, 'serve', '--backend', 'http://127.0.0.1:9,id=x', '--ha', 'active-passive', '--http-threads', '1'], { env, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 2, r.stderr);
    assert.match(r.stderr, /ear serve: ha: no Kubernetes API server: give a kubeconfig \(discovery\.kubeconfig, ha\.kubeconfig, --kubeconfig\), run in a pod, or set KUBECONFIG/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
