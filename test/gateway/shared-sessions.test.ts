// Two `ear serve` replicas sharing one real redis-server, in front of two `ear sim` engines, as a user would run
// them (separate processes). Two more replicas with `--session-store memory` get the same traffic as a control:
// they show that without the store the same traffic does split sessions, so the property is not vacuous.
//
// Policy: sticky, the default. A session's binding only matters to policies that read the session's host
// (sticky, and the migration-aware ones); least-request or round-robin would spread every turn whatever the store
// says. sticky places a new session on the least loaded pod, ties in a rotation: two replicas that never saw a
// session decide on their own and disagree about as often as not.
// Engine /metrics polling is off (metricsIntervalMs 0), so the load a replica sees is its own in-flight counts:
// the race test can then set the replicas' rotations apart on purpose (one sessionless request to replica A).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { RedisServer, redisServerMissing } from '../store/redis-server.js';
import { ADMIN, start, stop, type Proc } from '../fixtures/processes.js';
import { alternate, replicaTurn as turn, seriesValue as metric, split } from '../fixtures/replicas.js';
import { until } from '../fixtures/wait.js';

async function admin (gw: string, session: string): Promise<{ host: string | null; attainedServiceMs: number }> {
  const res = await fetch(`${gw}/admin/sessions/${encodeURIComponent(session)}`, { headers: { authorization: `Bearer ${ADMIN}` } });
  assert.equal(res.status, 200, await res.clone().text());
  return await res.json() as { host: string | null; attainedServiceMs: number };
}

describe('shared sessions: two ear serve replicas over one redis-server', { skip: redisServerMissing }, () => {
  let redis: RedisServer;
  let dir: string;
  const sims: Proc[] = [];
  let A: Proc;
  let B: Proc;
  let MA: Proc;
  let MB: Proc;

  before(async () => {
    redis = await RedisServer.start();
    dir = mkdtempSync(join(tmpdir(), 'ear-shared-'));
    const cfg = join(dir, 'ear.yaml');
    // A generous store timeout: two cores are shared with other suites, and a timeout would be a (counted) split.
    writeFileSync(cfg, 'metricsIntervalMs: 0\nhealthIntervalMs: 60000\nsessionStoreTimeoutMs: 2000\n');
    sims.push(...await Promise.all([0, 1].map((i) => start(['sim', '--host', '127.0.0.1', '--port', '0', '--time-scale', '0.02', '--served-model-name', 'm', '--seed', String(i)],
      /"url":"(http:\/\/127\.0\.0\.1:\d+)"/))));
    // With EAR_TEST_HTTP_THREADS the redis replicas take it (each data-plane thread has a store client of its own);
    // the controls keep one thread: they only show that without the store the replicas disagree (and start faster).
    const serve = (store: string): Promise<Proc> => start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--route-threads', '1',
      '--policy', 'sticky', '--admin-token', ADMIN, '--session-store', store, ...sims.flatMap((s, i) => ['--backend', `${s.url},id=e${i}`]),
      ...store === 'memory' ? ['--http-threads', '1'] : []],
    /listening on (http:\/\/[^"\s]+)/);
    [A, B, MA, MB] = await Promise.all([serve(redis.url), serve(redis.url), serve('memory'), serve('memory')]);
  });

  after(async () => {
    const [a, b] = await Promise.all([A, B, MA, MB, ...sims].map((p) => stop(p)));
    // The replicas drain and close the store on SIGTERM, and exit cleanly.
    assert.deepEqual([a, b], [0, 0], `exit codes: ${A?.out().slice(-2000)}`);
    await redis?.kill();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  test('turns alternating between replicas stay on one backend; both replicas show the same attained service', async () => {
    const [shared, control] = await Promise.all([alternate(A.url, B.url, 'alt', 12, 5), alternate(MA.url, MB.url, 'alt', 12, 5)]);
    const used = new Set([...shared.values()].flatMap((s) => [...s]));
    console.log(`# alternating turns, 12 sessions × 5 turns: split sessions with redis ${split(shared).length}, with memory (control) ${split(control).length}; backends used ${[...used].join(',')}`);
    assert.deepEqual(split(shared), [], 'with the shared store every session keeps one backend');
    assert.ok(split(control).length > 0, 'the control (memory store) splits sessions: the test can tell');
    assert.equal(used.size, 2, 'sessions are spread over both backends');
    for (const id of ['alt-0', 'alt-1', 'alt-7']) {
      // The last turn's service reaches the other replica through the store after its reply (addService).
      let a!: Awaited<ReturnType<typeof admin>>;
      let b!: Awaited<ReturnType<typeof admin>>;
      await until(async () => {
        [a, b] = await Promise.all([admin(A.url, id), admin(B.url, id)]);
        return Math.abs(a.attainedServiceMs - b.attainedServiceMs) < 1e-6 * a.attainedServiceMs;
      }, { what: () => `${id}: the replicas to agree on its attained service (${a?.attainedServiceMs} vs ${b?.attainedServiceMs})` });
      assert.equal(a.host, [...shared.get(id)!][0]);
      assert.equal(b.host, a.host);
      assert.ok(a.attainedServiceMs > 0);
      // Both are max(local, shared) of the same sums (Redis adds in long double, JS in double): equal to rounding.
      assert.ok(Math.abs(a.attainedServiceMs - b.attainedServiceMs) < 1e-6 * a.attainedServiceMs, `${id}: ${a.attainedServiceMs} vs ${b.attainedServiceMs}`);
    }
  });

  test('the race: the first two turns of a new session, sent at once to the two replicas, end on one backend', async () => {
    const pairs = 12;
    const run = async (a: string, b: string, prefix: string): Promise<number> => {
      let splits = 0;
      for (let k = 0; k < pairs; k++) {
        // One decision more on replica A: with idle engines the two replicas' rotations now differ, so alone
        // they would place the session on different backends.
        await turn(a, null, 0);
        const id = `${prefix}-${k}`;
        const [x, y] = await Promise.all([turn(a, id, 0), turn(b, id, 1)]);
        if (x !== y) splits++;
      }
      return splits;
    };
    const follows0 = await metric(A.url, 'ear_session_store_follows_total', '{op="bind"}') + await metric(B.url, 'ear_session_store_follows_total', '{op="bind"}');
    const reroutes0 = await metric(A.url, 'ear_session_store_reroutes_total') + await metric(B.url, 'ear_session_store_reroutes_total');
    const sharedSplits = await run(A.url, B.url, 'race');
    const controlSplits = await run(MA.url, MB.url, 'race');
    const follows = await metric(A.url, 'ear_session_store_follows_total', '{op="bind"}') + await metric(B.url, 'ear_session_store_follows_total', '{op="bind"}') - follows0;
    const reroutes = await metric(A.url, 'ear_session_store_reroutes_total') + await metric(B.url, 'ear_session_store_reroutes_total') - reroutes0;
    console.log(`# race, ${pairs} new sessions: split with redis ${sharedSplits}, with memory (control) ${controlSplits}; binds lost ${follows}, requests routed again to follow the winner ${reroutes}`);
    assert.equal(sharedSplits, 0);
    assert.ok(controlSplits > 0, 'alone, the replicas disagree');
  });
});
