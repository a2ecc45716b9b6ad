// Faults against real processes (issue 13 item 3): `ear serve` in front of `ear sim` engines (and redis-server
// for the shared session store), each fault injected while a small load runs (test/fixtures/load.ts: K
// multi-turn sessions, streaming and not). Every client request's outcome is classified; a failure that a
// healthy backend could have served is avoidable, and for every fault there must be none. Each fault prints
// its counts. Unavoidable: a stream whose bytes had reached the client when its engine was killed, a request
// the gateway could not answer because it was down.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Agent, request } from 'undici';
import { classify, Load, report, type GatewayDown } from '../fixtures/load.js';
import { ADMIN, adminSession, kvEventsFlags, metric, simFleet, stop, text, type SimFleet } from '../fixtures/processes.js';
import { freePort } from '../store/redis-server.js';

const client = new Agent({ connections: 16 });
after(() => client.close());

/** One chat request on `session` (not read yet): its status, backend and body. */
async function ask (gw: string, session: string, maxTokens: number, stream = false, content = 'hello there') {
  return request(`${gw}/v1/chat/completions`, {
    method: 'POST',
    dispatcher: client,
    headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], max_tokens: maxTokens, ignore_eos: true, stream })
  });
}

async function until (what: string, cond: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

async function adminBackends (gw: string): Promise<Array<{ id: string; draining: boolean; health: string }>> {
  const r = await request(`${gw}/admin/backends`, { dispatcher: client, headers: { authorization: `Bearer ${ADMIN}` } });
  return (await r.body.json() as { backends: Array<{ id: string; draining: boolean; health: string }> }).backends;
}

/** Asserts the load's avoidable failures are none, after printing the counts. */
function assertNoAvoidable (fault: string, outcomes: Parameters<typeof classify>[0], ctx: Parameters<typeof classify>[1] = {}): void {
  const c = classify(outcomes, ctx);
  console.log(report(fault, c));
  assert.ok(c.ok > 0, 'the load was served');
  assert.deepEqual(c.avoidable, [], `${fault}: requests failed that a healthy backend could have served`);
}

const simIndex = (backend: string): number => Number(backend.slice('sim-'.length));

describe('a. engines killed under load, before and after the first byte', () => {
  let fleet: SimFleet;
  // Health checks a minute apart: the gateway learns of a dead engine only from the requests that hit it.
  before(async () => {
    fleet = await simFleet(['metricsIntervalMs: 0', 'healthIntervalMs: 60000', 'policy: sticky'],
      () => [0, 1, 2].map(() => ['--time-scale', '0.05', '--stop-probability', '0']));
  });
  after(() => fleet.close());

  test('before the first byte the request is retried elsewhere; after it the stream ends with an error event; later requests succeed', async () => {
    const load = new Load({ gateways: () => [fleet.url], sessions: 6, prefix: 'a' }).start();
    const killed = new Set<string>();
    try {
      await load.served(12);
      // Before the first byte: the session's engine is killed; its next turn goes there first, and is retried.
      const first = await ask(fleet.url, 's-before', 4);
      const host = String(first.headers['x-ear-backend']);
      await first.body.dump();
      killed.add(host);
      await stop(fleet.sims[simIndex(host)], 'SIGKILL');
      const r = await ask(fleet.url, 's-before', 4);
      assert.equal(r.statusCode, 200);
      assert.notEqual(r.headers['x-ear-backend'], host);
      assert.equal(((await r.body.json()) as { object: string }).object, 'chat.completion');
      assert.ok(await metric(fleet.url, 'ear_upstream_errors_total', `{backend="${host}",kind="connect"}`) >= 1, 'the connect error is counted');
      await load.served(12);

      // After the first byte: a long stream's engine is killed while it streams.
      const s = await ask(fleet.url, 's-mid', 4000, true);
      assert.equal(s.statusCode, 200);
      const host2 = String(s.headers['x-ear-backend']);
      let body = '';
      const it = s.body[Symbol.asyncIterator]();
      body += String((await it.next()).value);
      killed.add(host2);
      await stop(fleet.sims[simIndex(host2)], 'SIGKILL');
      for (let x = await it.next(); !x.done; x = await it.next()) body += String(x.value);
      assert.match(body, /data: \{"error":\{"message":"upstream connection failed mid-response","type":"upstream_error","code":"EAR_ERR_UPSTREAM"\}\}\n\ndata: \[DONE\]\n\n$/);
      const later = await ask(fleet.url, 's-mid', 4);
      assert.equal(later.statusCode, 200);
      assert.notEqual(later.headers['x-ear-backend'], host2);
      await later.body.dump();
      await load.served(12);
    } finally {
      await load.stop();
    }
    const c = classify(load.outcomes, { killed });
    assert.ok(load.outcomes.some((o) => killed.has(o.backend) && o.error === null), 'the killed engines had served the load before');
    assertNoAvoidable('a. two of three engines SIGKILLed under load', load.outcomes, { killed });
    assert.ok(c.ok > 36);
  });
});

describe('d. SIGHUP reload under load: a backend added, one removed, then added back', () => {
  let fleet: SimFleet;
  const specs: string[] = [];
  before(async () => {
    fleet = await simFleet(['metricsIntervalMs: 0', 'healthIntervalMs: 60000', 'policy: sticky'],
      () => [0, 1, 2].map(() => ['--time-scale', '0.1', '--stop-probability', '0']), { backends: 'config' });
    specs.push(...fleet.sims.map((s, i) => `${s.url},id=sim-${i}`));
    // The gateway starts with sim-0 and sim-1 only.
    fleet.writeConfig(specs.slice(0, 2));
    await fleet.restartGateway('SIGTERM');
  });
  after(() => fleet.close());

  test('new requests reach the added backend, the removed one drains its in-flight stream to the end, and nothing fails', async () => {
    assert.deepEqual((await adminBackends(fleet.url)).map((b) => b.id), ['sim-0', 'sim-1']);
    const load = new Load({ gateways: () => [fleet.url], sessions: 6, prefix: 'd' }).start();
    try {
      await load.served(12);
      // A long stream on sim-0 (new sessions until one lands there), in flight across the reload that removes it.
      let pinned: Awaited<ReturnType<typeof ask>> | null = null;
      for (let i = 0; pinned === null; i++) {
        assert.ok(i < 20, 'a new session lands on sim-0');
        const r = await ask(fleet.url, `d-long-${i}`, 3000, true);
        if (r.headers['x-ear-backend'] === 'sim-0') pinned = r;
        else r.body.destroy();
      }
      const it = pinned.body[Symbol.asyncIterator]();
      let body = String((await it.next()).value);
      fleet.writeConfig(specs.slice(1));
      fleet.gateway.child.kill('SIGHUP');
      await until('sim-2 added and sim-0 draining', async () => {
        const bs = await adminBackends(fleet.url);
        return bs.some((b) => b.id === 'sim-2' && b.health === 'healthy') && bs.some((b) => b.id === 'sim-0' && b.draining);
      });
      const since = Date.now();
      await load.served(12);
      assert.ok(load.outcomes.some((o) => o.t0 > since && o.backend === 'sim-2' && o.error === null), 'the added backend serves');
      assert.ok(!load.outcomes.some((o) => o.t0 > since && o.backend === 'sim-0'), 'the removed backend takes no new request');
      // The draining backend's stream flows to its end.
      for (let x = await it.next(); !x.done; x = await it.next()) body += String(x.value);
      assert.ok(body.endsWith('data: [DONE]\n\n') && !body.includes('"error"'), body.slice(-300));
      await until('sim-0 gone once its stream ended', async () => !(await adminBackends(fleet.url)).some((b) => b.id === 'sim-0'));
      // Back again.
      fleet.writeConfig(specs);
      fleet.gateway.child.kill('SIGHUP');
      await until('sim-0 back', async () => (await adminBackends(fleet.url)).some((b) => b.id === 'sim-0' && b.health === 'healthy' && !b.draining));
      const back = Date.now();
      await until('sim-0 serving again', () => load.outcomes.some((o) => o.t0 > back && o.backend === 'sim-0' && o.error === null), 30_000);
    } finally {
      await load.stop();
    }
    assert.match(fleet.gateway.out(), /backends reloaded/);
    assertNoAvoidable('d. SIGHUP reloads under load (sim-2 added, sim-0 removed with a stream in flight, sim-0 added back)', load.outcomes);
  });
});
