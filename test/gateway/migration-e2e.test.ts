// A session migrates, KV and all, as a user would run EAR: `ear serve --policy ear` in front of two `ear sim`
// engines, all separate processes. The session's host is made hot by the session itself: two turns sent at
// once, the first goes to the host and is still waiting for its long new suffix's prefill when the second is
// routed, so the host's pending prefill is over tHot and the second moves to the idle engine through vLLM's NIXL
// two-step (export leg on the source, import on the target). The target then reports the moved prefix as cached,
// and the next turn stays there.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { adminSession as session, metric, simFleet, text, turn, type SimFleet } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

/** `ear serve --policy ear` with `connector` in front of two `ear sim` processes (shared-store: sim-0 hosts the store). */
function migrationFleet (connector: 'nixl' | 'shared-store', flags: string[] = []): Promise<SimFleet> {
  // The gateway's own load only (no engine scrape), so "hot" is exactly the pending prefill it sent. One seat per
  // engine (--max-num-seqs 1): a request sent to a busy engine waits there, its prefill pending (holdHost).
  const simFlags = [...flags, '--max-num-seqs', '1'];
  const config = ['metricsIntervalMs: 0', 'healthIntervalMs: 60000', 'policy: ear', 'policyConfig: { tHot: 4000, minGain: 4000, tCool: 60 }',
    `kvConnectors: [${connector}, recompute]`, `kvConnector: ${connector}`];
  if (connector === 'nixl') return simFleet(config, () => [simFlags, simFlags]);
  return simFleet(config, (urls) => [[...simFlags, '--kv-offload-serve'], [...simFlags, '--kv-offload-store', urls[0] ?? '']], { sequential: true });
}

/**
 * A long stream of `session` (a repeat of its last turn, `messages`, which its host has cached) on its host
 * `host`, holding the host's one seat until the returned release: a turn sent there meanwhile waits with its
 * prefill pending, so the host stays hot however late the next call is routed. (Hot for as long as a ~1 s
 * prefill lasted made these tests depend on timing with httpThreads ≥ 2: two calls travel separate threads, and
 * on a loaded machine the second was routed after the first's prefill ended.)
 */
async function holdHost (gw: string, session: string, messages: unknown[], host: string): Promise<() => Promise<void>> {
  const res = await fetch(`${gw}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({ model: 'm', messages, max_tokens: 100_000, stream: true })
  });
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('x-ear-backend'), host);
  const held = res.body!.getReader();
  await held.read();
  return () => held.cancel();
}

/** Waits until `gw` has routed `n` requests as a migration to `to` (the decision, before its transfer). */
async function migrationsRouted (gw: string, to: string, n: number): Promise<void> {
  await until(async () => await metric(gw, 'ear_routing_decisions_total', `{policy="ear",backend="${to}",reason="migrate"}`) === n, `${n} call(s) routed as a migration to ${to}`);
}

for (const connector of ['nixl', 'shared-store'] as const) {
describe(`migration end to end (${connector}): ear serve --policy ear in front of two ear sim processes`, () => {
  let fleet: SimFleet;
  before(async () => { fleet = await migrationFleet(connector); });
  after(() => fleet.close());

  test('a turn routed while its host is hot moves the session; the target reports the moved prefix as cached, and keeps it', async () => {
    const gw = { url: fleet.url };
    const sys = { role: 'system', content: text('system', 3000) };
    const first = await turn(gw.url, 'S', [sys, { role: 'user', content: 'turn 1' }]);
    const host = first.backend;
    const other = host === 'sim-0' ? 'sim-1' : 'sim-0';
    const release = await holdHost(gw.url, 'S', [sys, { role: 'user', content: 'turn 1' }], host);
    // Two calls of one turn at once (an agent's parallel tool results): the first makes the host hot.
    const messages = [sys, { role: 'user', content: 'turn 1' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: text('turn 2', 24000) }];
    const calls = Promise.all([turn(gw.url, 'S', messages), turn(gw.url, 'S', messages)]);
    await migrationsRouted(gw.url, other, 1);
    await release();
    const both = await calls;
    // Which of the two the gateway took first is the kernel's and the threads' to say (httpThreads ≥ 2): one of them.
    const a = both.find((t) => t.backend === host);
    const b = both.find((t) => t.backend === other);
    assert.ok(a !== undefined, 'the first call goes to the session\'s host');
    assert.ok(b !== undefined, 'the second call moves the session to the idle engine');
    if (connector === 'nixl') {
      // The import pulled the prompt's full blocks (the export leg computed them on the source).
      assert.ok(b.cached >= b.prompt - 32, `the target served ${b.cached} of ${b.prompt} prompt tokens from the pulled KV`);
    } else {
      // The store holds what the source had computed when the target looked: at least the session's previous
      // turn (the first call of this turn was still being prefilled there).
      assert.ok(b.cached >= first.prompt - 32, `the target loaded ${b.cached} prompt tokens from the store (previous turn: ${first.prompt})`);
    }
    assert.equal(await metric(gw.url, 'ear_kv_transfers_total', `{kind="migration",mode="${connector}",outcome="ok"}`), 1);
    // Its source leg was timed and its bytes counted (the KV transfer series, from the request path's events).
    assert.equal(await metric(gw.url, 'ear_kv_transfer_source_seconds_count', `{mode="${connector}"}`), 1);
    assert.ok(await metric(gw.url, 'ear_kv_transfer_bytes_total', `{mode="${connector}"}`) > 0, 'the moved KV bytes are counted');
    const s = await session(gw.url, 'S');
    assert.equal(s.host, other);
    assert.equal(s.migrations, 1);
    // The next turn goes to the new host, which has the moved prefix in its own cache.
    const third = await turn(gw.url, 'S', [...messages, { role: 'assistant', content: 'done' }, { role: 'user', content: 'turn 3' }]);
    assert.equal(third.backend, other);
    assert.ok(third.cached >= b.prompt - 32, `turn 3 found ${third.cached} cached tokens on the new host (moved prefix ${b.prompt})`);
  });
});
}

describe('a failed transfer: engines without a KV connector answer the export leg with no params', () => {
  let fleet: SimFleet;
  before(async () => { fleet = await migrationFleet('nixl', ['--no-kv-transfer']); });
  after(() => fleet.close());

  test('the session and the request stay on the source, the failure is counted, and no client request fails', async () => {
    const gw = fleet.url;
    const sys = { role: 'system', content: text('system', 3000) };
    const first = await turn(gw, 'F', [sys, { role: 'user', content: 'turn 1' }]);
    const other = first.backend === 'sim-0' ? 'sim-1' : 'sim-0';
    const release = await holdHost(gw, 'F', [sys, { role: 'user', content: 'turn 1' }], first.backend);
    const messages = [sys, { role: 'user', content: 'turn 1' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: text('turn 2', 24000) }];
    const both = Promise.all([turn(gw, 'F', messages), turn(gw, 'F', messages)]);
    await migrationsRouted(gw, other, 1);
    await release();
    const [a, b] = await both;
    assert.equal(a.backend, first.backend);
    assert.equal(b.backend, first.backend, 'the would-be migration is served by the source');
    assert.equal(await metric(gw, 'ear_kv_transfers_total', '{kind="migration",mode="nixl",outcome="failed"}'), 1);
    // The failed leg ran (and was timed); no bytes moved.
    assert.equal(await metric(gw, 'ear_kv_transfer_source_seconds_count', '{mode="nixl"}'), 1);
    assert.equal(await metric(gw, 'ear_kv_transfer_bytes_total', '{mode="nixl"}'), 0);
    const s = await session(gw, 'F');
    assert.equal(s.host, first.backend);
    assert.equal(s.migrations, 0);
    assert.equal((await turn(gw, 'F', [...messages, { role: 'assistant', content: 'x' }, { role: 'user', content: 'turn 3' }])).backend, first.backend);
  });
});

describe('pd-static end to end: every request prefilled on the P engine and decoded on the D engine through the same connector', () => {
  let fleet: SimFleet;
  let gw: { url: string };
  before(async () => {
    fleet = await simFleet(['metricsIntervalMs: 0', 'healthIntervalMs: 60000', 'policy: pd-static', 'policyConfig: { prefillPods: 1 }', 'kvConnector: nixl'],
      () => [['--time-scale', '0.05'], ['--time-scale', '0.05']]);
    gw = { url: fleet.url };
  });
  after(() => fleet.close());

  test('the decode engine answers with the prompt pulled from the prefill engine; a streamed request too', async () => {
    const messages = [{ role: 'user', content: text('pd', 8000) }];
    const r = await turn(gw.url, 'P1', messages);
    assert.equal(r.backend, 'sim-1', 'the one D engine decodes');
    assert.ok(r.cached >= r.prompt - 32, `D served ${r.cached} of ${r.prompt} prompt tokens from P's KV`);
    const res = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 'P2' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text('pd stream', 6000) }], max_tokens: 8, stream: true, stream_options: { include_usage: true } })
    });
    const body = await res.text();
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-ear-backend'), 'sim-1');
    assert.match(body, /"cached_tokens":(\d{4,})/, 'the streamed answer reports the pulled prefix as cached');
    assert.ok(body.trimEnd().endsWith('data: [DONE]'));
    assert.equal(await metric(gw.url, 'ear_kv_transfers_total', '{kind="pd",mode="nixl",outcome="ok"}'), 2);
  });
});
