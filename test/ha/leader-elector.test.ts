// Leader election against the stub Lease API (test/fixtures/k8s-lease-server.ts), through the real
// @kubernetes/client-node client: acquire, renew, conflicts, expiry takeover, release on close, stepping down when
// the API server is unreachable, and never two leaders. Timings are short leases with generous bounds: the
// assertions are about order (who leads, and not before when), not about how fast.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startLeaseServer, type LeaseServer } from '../fixtures/k8s-lease-server.js';
import { kubeTarget } from '../../src/kube/kube-target.js';
import { kubeLeaseClient } from '../../src/ha/lease-client.js';
import { LeaderElector } from '../../src/ha/leader-elector.js';
import { until } from '../fixtures/wait.js';

const NS = 'ear-test';
const MICRO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

interface Timings { leaseDurationSeconds: number; renewDeadlineSeconds: number; retryPeriodSeconds: number }
const SHORT: Timings = { leaseDurationSeconds: 2, renewDeadlineSeconds: 1.3, retryPeriodSeconds: 0.25 };
// For tests that wait on renewals and never on an expiry: a leader stalled past a 1.3 s renew deadline (one
// loaded core) steps down and re-reads the lease, which is right, but not what those tests look at.
const STEADY: Timings = { leaseDurationSeconds: 8, renewDeadlineSeconds: 6, retryPeriodSeconds: 0.25 };

async function withStub (fn: (stub: LeaseServer, elector: (id: string, t?: Timings, lease?: string) => Promise<LeaderElector>) => Promise<void>): Promise<void> {
  const stub = await startLeaseServer();
  const dir = mkdtempSync(join(tmpdir(), 'ear-lease-'));
  const electors: LeaderElector[] = [];
  try {
    const target = await kubeTarget({ kubeconfig: stub.kubeconfig(dir, NS), namespace: null }, {});
    await fn(stub, async (id, t = SHORT, lease = 'ear-leader') => {
      const e = new LeaderElector({ client: await kubeLeaseClient(target, lease), identity: id, ...t });
      electors.push(e);
      return e;
    });
  } finally {
    await Promise.all(electors.map((e) => e.close()));
    await stub.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

test('the first replica creates the lease and leads; renewals keep acquireTime and move renewTime', async () => {
  await withStub(async (stub, elector) => {
    const a = await elector('pod-a');
    assert.equal(a.isLeader, false);
    a.start();
    await until(() => a.isLeader, 'pod-a to lead');
    const first = structuredClone(stub.api.lease(NS, 'ear-leader')!);
    assert.equal(first.spec.holderIdentity, 'pod-a');
    assert.equal(first.spec.leaseDurationSeconds, 2);
    assert.equal(first.spec.leaseTransitions, 0);
    assert.match(first.spec.acquireTime!, MICRO);
    assert.match(first.spec.renewTime!, MICRO);
    assert.equal(a.state.role, 'leader');
    assert.equal(a.state.holder, 'pod-a');
    await until(() => stub.api.history.filter((w) => w.method === 'PUT' && w.holder === 'pod-a').length >= 3, 'three renewals');
    const later = stub.api.lease(NS, 'ear-leader')!;
    assert.equal(later.spec.acquireTime, first.spec.acquireTime);
    assert.ok(Date.parse(later.spec.renewTime!) > Date.parse(first.spec.renewTime!));
    assert.ok(Number(later.metadata.resourceVersion) > Number(first.metadata.resourceVersion));
    assert.equal(later.spec.leaseTransitions, 0);
    assert.ok(a.isLeader);
    assert.deepEqual({ acquired: a.stats.acquired, lost: a.stats.lost }, { acquired: 1, lost: 0 });
  });
});

test('a second replica stays a follower while the leader renews', async () => {
  await withStub(async (stub, elector) => {
    const a = await elector('pod-a');
    a.start();
    await until(() => a.isLeader, 'pod-a to lead');
    const b = await elector('pod-b');
    b.start();
    // Three lease durations: were renewals not seen as changes, b would take over after one.
    const t0 = performance.now();
    while (performance.now() - t0 < 6000) {
      assert.equal(b.isLeader, false);
      assert.ok(a.isLeader || stub.api.paused, 'the leader kept its lease');
      await sleep(50);
    }
    assert.equal(b.state.holder, 'pod-a');
    assert.equal(b.state.role, 'follower');
    assert.equal(stub.api.lease(NS, 'ear-leader')!.spec.holderIdentity, 'pod-a');
  });
});

test('a 409 from a write made meanwhile by someone else is re-read, and the leader keeps its lease', async () => {
  await withStub(async (stub, elector) => {
    const a = await elector('pod-a', STEADY);
    a.start();
    await until(() => a.isLeader, 'pod-a to lead');
    // Another writer (kubectl label, say) changes the object: the leader's next replace carries a stale version.
    for (let i = 0; i < 3; i++) {
      // The other writer meets the same rule: a renewal landing between its read and its write is a 409, and it
      // reads again (as kubectl does).
      for (let tries = 0; ; tries++) {
        const cur = stub.api.lease(NS, 'ear-leader')!;
        const res = await fetch(`${stub.url}/apis/coordination.k8s.io/v1/namespaces/${NS}/leases/ear-leader`, {
          method: 'PUT', headers: { 'content-type': 'application/json', authorization: 'Bearer stub-token' },
          body: JSON.stringify({ ...cur, metadata: { ...cur.metadata, labels: { touched: String(i) } } })
        });
        const text = await res.text();
        if (res.status === 409 && tries < 10) continue;
        assert.equal(res.status, 200, text);
        break;
      }
      const written = stub.api.history.length;
      // The leader's next renewal replaces what it wrote last, now stale: a 409, whichever way the two raced.
      await until(() => a.stats.conflicts > i, `the leader's renewal to meet write ${i}`);
      // And its re-read and write after that, before the next write: a re-read that met the next write would
      // take that one as current and never conflict with it (a slow machine widened that window: 20 s timeout).
      await until(() => stub.api.history.length > written, `the leader's write after meeting write ${i}`);
    }
    const rv = Number(stub.api.lease(NS, 'ear-leader')!.metadata.resourceVersion);
    await until(() => Number(stub.api.lease(NS, 'ear-leader')!.metadata.resourceVersion) > rv, 'a renewal after the conflicts');
    assert.ok(a.isLeader);
    assert.equal(a.stats.lost, 0);
    const lease = stub.api.lease(NS, 'ear-leader')!;
    assert.equal(lease.spec.holderIdentity, 'pod-a');
    // A replace keeps the object's metadata: the label another writer set is still there.
    assert.deepEqual((lease.metadata as { labels?: unknown }).labels, { touched: '2' });
  });
});

test('two replicas starting together: one leads, the other got a conflict or saw the lease held', async () => {
  await withStub(async (stub, elector) => {
    const a = await elector('pod-a');
    const b = await elector('pod-b');
    a.start();
    b.start();
    await until(() => a.isLeader || b.isLeader, 'a leader');
    // The other one reads the lease held, and from then on stays a follower; the leader renews after that.
    const [leader, other] = a.isLeader ? [a, b] : [b, a];
    await until(() => other.state.holder === leader.state.identity, 'the other replica to see the lease held');
    const seen = performance.now();
    await until(() => stub.api.history.some((w) => w.holder === leader.state.identity && w.at > seen), 'a renewal after that');
    assert.equal(Number(a.isLeader) + Number(b.isLeader), 1);
    const holder = stub.api.lease(NS, 'ear-leader')!.spec.holderIdentity;
    assert.equal(holder, a.isLeader ? 'pod-a' : 'pod-b');
  });
});

test('a lease whose holder stopped renewing is taken over only after leaseDurationSeconds', async () => {
  await withStub(async (stub, elector) => {
    // A holder that crashed: its lease is there, and never renewed again.
    const res = await fetch(`${stub.url}/apis/coordination.k8s.io/v1/namespaces/${NS}/leases`, {
      method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer stub-token' },
      body: JSON.stringify({ apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: 'ear-leader' }, spec: { holderIdentity: 'crashed', leaseDurationSeconds: 2, leaseTransitions: 4, acquireTime: '2026-01-01T00:00:00.000000Z', renewTime: '2026-01-01T00:00:00.000000Z' } })
    });
    assert.equal(res.status, 201);
    const b = await elector('pod-b');
    const t0 = performance.now();
    b.start();
    await until(() => b.isLeader, 'pod-b to take over');
    // Counted from when pod-b first saw the lease (after t0): never from the stale renewTime in it.
    assert.ok(performance.now() - t0 >= 2000, `took over after ${Math.round(performance.now() - t0)} ms, before the lease duration`);
    const lease = stub.api.lease(NS, 'ear-leader')!;
    assert.equal(lease.spec.holderIdentity, 'pod-b');
    assert.equal(lease.spec.leaseTransitions, 5);
    assert.ok(Date.parse(lease.spec.acquireTime!) > Date.parse('2026-01-02T00:00:00Z'));
  });
});

test('close releases the lease and a follower takes over at once, not a lease duration later', async () => {
  const long: Timings = { leaseDurationSeconds: 30, renewDeadlineSeconds: 20, retryPeriodSeconds: 0.25 };
  await withStub(async (stub, elector) => {
    const a = await elector('pod-a', long);
    a.start();
    await until(() => a.isLeader, 'pod-a to lead');
    const b = await elector('pod-b', long);
    b.start();
    await until(() => b.state.holder === 'pod-a', 'pod-b to see pod-a hold it');
    const t0 = performance.now();
    const closed = a.close();
    // Not ready from the moment it closes, before the release is even written.
    assert.equal(a.isLeader, false);
    await closed;
    const released = stub.api.lease(NS, 'ear-leader')!;
    assert.ok(released.spec.holderIdentity === '' || released.spec.holderIdentity === 'pod-b');
    await until(() => b.isLeader, 'pod-b to lead');
    assert.ok(performance.now() - t0 < 15_000, 'taken over well within the 30 s lease');
    const lease = stub.api.lease(NS, 'ear-leader')!;
    assert.equal(lease.spec.holderIdentity, 'pod-b');
    assert.equal(lease.spec.leaseTransitions, 1);
    assert.ok(stub.api.history.some((w) => w.holder === ''), 'a release was written');
    assert.deepEqual({ acquired: a.stats.acquired, lost: a.stats.lost }, { acquired: 1, lost: 1 });
  });
});

for (const outage of ['paused', '503'] as const) {
  test(`API server ${outage === 'paused' ? 'not answering' : 'answering 503'}: the leader steps down after its renew deadline, followers stay followers, and it leads again after`, async () => {
    await withStub(async (stub, elector) => {
      const a = await elector('pod-a');
      a.start();
      await until(() => a.isLeader, 'pod-a to lead');
      const b = await elector('pod-b');
      b.start();
      await until(() => b.state.holder === 'pod-a', 'pod-b to see pod-a hold it');
      // The last renewal that got through: the leader's claim runs renewDeadline from (before) it.
      const lastOk = (): number => stub.api.history.filter((w) => w.holder === 'pod-a').at(-1)!.at;
      if (outage === 'paused') stub.api.pause();
      else stub.api.failStatus = 503;
      const downAt = performance.now();
      await until(() => !a.isLeader, { what: 'pod-a to step down', timeoutMs: 10_000 });
      const last = lastOk();
      assert.ok(performance.now() - last >= SHORT.renewDeadlineSeconds * 1000 - 300, 'not before the renew deadline');
      assert.ok(performance.now() - downAt < 8000);
      // The step-down timer fires at the deadline the getter already applies.
      await until(() => a.stats.lost === 1, { what: 'the step-down counted', timeoutMs: 5000 });
      assert.ok(a.stats.errors >= 1);
      // Followers cannot write either: nobody is ready, for more than a lease duration.
      const t0 = performance.now();
      while (performance.now() - t0 < 3000) {
        assert.equal(a.isLeader || b.isLeader, false);
        await sleep(50);
      }
      if (outage === 'paused') stub.api.resume();
      else stub.api.failStatus = null;
      await until(() => a.isLeader || b.isLeader, 'a leader again');
      // The other one reads the lease again (the leader renews without reading: the next GET is the follower's).
      const reads = stub.api.counts.GET ?? 0;
      const [leader, other] = a.isLeader ? [a, b] : [b, a];
      await until(() => (stub.api.counts.GET ?? 0) > reads && other.state.holder === leader.state.identity, 'the follower to read the lease held');
      assert.equal(Number(a.isLeader) + Number(b.isLeader), 1);
    });
  });
}

test('an API server slower than the renew deadline: the leader steps down, late writes make no second leader, one leads once it is fast again', async () => {
  await withStub(async (stub, elector) => {
    const a = await elector('pod-a');
    a.start();
    await until(() => a.isLeader, 'pod-a to lead');
    const b = await elector('pod-b');
    b.start();
    await until(() => b.state.holder === 'pod-a', 'pod-b to see pod-a hold it');
    stub.api.delayMs = 2000;
    let both = false;
    const t0 = performance.now();
    await until(() => { both ||= a.isLeader && b.isLeader; return !a.isLeader; }, { what: 'pod-a to step down', timeoutMs: 10_000 });
    while (performance.now() - t0 < 5000) {
      both ||= a.isLeader && b.isLeader;
      assert.equal(b.isLeader, false, 'no answer within the deadline: nobody may claim the lease');
      await sleep(20);
    }
    stub.api.delayMs = 0;
    await until(() => a.isLeader || b.isLeader, 'a leader again');
    for (let i = 0; i < 50; i++) {
      both ||= a.isLeader && b.isLeader;
      await sleep(20);
    }
    assert.equal(both, false);
    assert.equal(Number(a.isLeader) + Number(b.isLeader), 1);
  });
});

test('never two leaders: three replicas with a 2 s lease through API outages and restarts', async () => {
  await withStub(async (stub, elector) => {
    const ids = ['pod-a', 'pod-b', 'pod-c'];
    const live = new Map<string, LeaderElector>();
    for (const id of ids) {
      const e = await elector(id);
      live.set(id, e);
      e.start();
    }
    let maxLeaders = 0;
    let samples = 0;
    const leadersSeen = new Set<string>();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        const leaders = [...live].filter(([, e]) => e.isLeader).map(([id]) => id);
        maxLeaders = Math.max(maxLeaders, leaders.length);
        for (const id of leaders) leadersSeen.add(id);
        samples++;
        await sleep(5);
      }
    })();
    // A pseudo-random schedule (fixed seed): outages of 0.3–3 s, and the leader closed or abandoned.
    let seed = 7;
    const rand = (): number => ((seed = (seed * 1103515245 + 12345) >>> 0) / 2 ** 32);
    for (let round = 0; round < 8; round++) {
      await sleep(500 + rand() * 1500);
      const action = rand();
      if (action < 0.4) {
        stub.api.pause();
        await sleep(300 + rand() * 2700);
        stub.api.resume();
      } else if (action < 0.6) {
        stub.api.failStatus = 500;
        await sleep(300 + rand() * 2700);
        stub.api.failStatus = null;
      } else {
        // The leader goes (released) and comes back as a new replica of the same name.
        const leader = [...live].find(([, e]) => e.isLeader);
        if (leader === undefined) continue;
        const [id, e] = leader;
        await e.close();
        const again = await elector(id);
        live.set(id, again);
        again.start();
      }
    }
    await until(() => [...live.values()].some((e) => e.isLeader), 'a leader at the end');
    sampling = false;
    await sampler;
    assert.ok(samples > 100, `${samples} samples`);
    assert.equal(maxLeaders, 1, 'at most one leader at any sample');
    assert.ok(leadersSeen.size >= 1);
  });
});
