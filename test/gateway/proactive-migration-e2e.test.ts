// An idle session moves before its next turn, as a user would run EAR: `ear serve --policy ear-proactive` in
// front of two `ear sim` engines, all separate processes. Session S does a turn on its host H and goes idle (a
// tool gap); another session's long prompt then sits in H's prefill queue, so H is hot. The migration thread
// sees S idle on a hot host and moves it: the NIXL export leg on H, the pre-warm import on the other engine,
// then the main thread's rebind. Admin shows the new host, the counters show one move, and S's next turn is
// served by the new host with its previous prompt already cached there.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { adminSession as session, metric, simFleet, text, turn, type SimFleet } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

describe('proactive migration end to end: ear serve --policy ear-proactive in front of two ear sim processes', () => {
  let fleet: SimFleet;
  let gw: { url: string };

  before(async () => {
    // The gateway's own load only (no engine scrape), so "hot" is exactly the pending prefill it sent. NIXL
    // forced, so the move takes the two legs whatever the cost estimate says of a short context.
    fleet = await simFleet([
      'metricsIntervalMs: 0', 'healthIntervalMs: 60000', 'policy: ear-proactive', 'proactiveIntervalMs: 100',
      'policyConfig: { tHot: 4000, minGain: 4000, tCool: 60 }', 'kvConnectors: [nixl, recompute]', 'kvConnector: nixl'
    ], () => [[], []]);
    gw = { url: fleet.url };
  });

  after(() => fleet.close());

  test('an idle session on a hot host is moved through the NIXL two-step before its next turn, which finds its context cached on the new host', async () => {
    const sys = { role: 'system', content: text('system', 3000) };
    const first = await turn(gw.url, 'S', [sys, { role: 'user', content: 'turn 1' }]);
    const host = first.backend;
    const other = host === 'sim-0' ? 'sim-1' : 'sim-0';
    assert.equal((await session(gw.url, 'S')).inFlight, 0, 'S is idle: its turn is done');
    // New sessions share idle engines in turn: open small ones until one lands on S's host.
    let hot: string | null = null;
    for (let i = 0; i < 8 && hot === null; i++) {
      const t = await turn(gw.url, `T${i}`, [{ role: 'user', content: text(`probe ${i}`, 200) }]);
      if (t.backend === host) hot = `T${i}`;
    }
    assert.ok(hot !== null, `no new session landed on ${host}`);
    // The hot session's long turn stays on its host (cold when routed) and fills its prefill queue.
    const long = turn(gw.url, hot, [{ role: 'user', content: text(`probe ${hot.slice(1)}`, 200) }, { role: 'assistant', content: 'ok' },
      { role: 'user', content: text('long', 90000) }]);
    const moved = await until(async () => { const s = await session(gw.url, 'S'); return s.host === other && s; },
      { what: () => `S to move to the idle engine (gateway log: ${fleet.gateway.out().slice(-2000)})`, timeoutMs: 30_000 });
    assert.equal(moved.migrations, 1);
    assert.equal(moved.inFlight, 0);
    assert.equal(await metric(gw.url, 'ear_proactive_migrations_total', '{outcome="moved"}'), 1);
    assert.equal(await metric(gw.url, 'ear_proactive_migrations_total', '{outcome="failed"}'), 0);
    assert.equal(await metric(gw.url, 'ear_kv_transfers_total', '{kind="proactive",mode="nixl",outcome="ok"}'), 1);
    // S's next turn goes to its new host, which pulled S's previous prompt during the gap.
    const second = await turn(gw.url, 'S', [sys, { role: 'user', content: 'turn 1' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'turn 2' }]);
    assert.equal(second.backend, other);
    assert.ok(second.cached >= first.prompt - 32, `turn 2 found ${second.cached} cached tokens on the new host (previous prompt ${first.prompt})`);
    const l = await long;
    assert.equal(l.backend, host, 'the long turn stayed on its host');
    // Nothing else moved: the hot session was busy, the probes' hosts were never hot.
    assert.equal(await metric(gw.url, 'ear_proactive_migrations_total', '{outcome="moved"}'), 1);
  });
});
