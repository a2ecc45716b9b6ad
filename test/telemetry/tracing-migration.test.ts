// Migration spans as a user runs EAR with tracing on: `ear serve` (OTEL_* pointing at an in-test OTLP/HTTP
// receiver) in front of two `ear sim` processes. With policy ear, a turn routed while its session's host is hot
// moves the session through the NIXL two-step: its request's trace has an `ear.kv_transfer` span (source,
// target, connector, bytes, outcome) between its route and its upstream call. With ear-proactive, an idle
// session's move is a root `ear.kv_transfer` span of its own. Same setups as test/gateway/*migration-e2e.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { KIND, otlpReceiver, STATUS, type OtlpReceiver, type ReceivedSpan } from '../fixtures/otlp-receiver.js';
import { adminSession as session, simFleet, text, turn, type SimFleet } from '../fixtures/processes.js';

const CLEAN_OTEL: NodeJS.ProcessEnv = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('OTEL_')).map((k) => [k, '']));

function otelEnv (receiver: OtlpReceiver): NodeJS.ProcessEnv {
  return { ...CLEAN_OTEL, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '50' };
}

/**
 * The SDK stamps each span from its own reading of Date.now() against the monotonic clock, so two spans' times
 * can disagree by a millisecond or so: orders are checked with that much slack.
 */
const SLACK_NS = 2_000_000n;

const transfers = (spans: ReceivedSpan[], kind: string): ReceivedSpan[] => spans.filter((s) => s.name === 'ear.kv_transfer' && s.attributes['ear.migration.kind'] === kind);

describe('tracing a migration (policy ear, nixl)', () => {
  let receiver: OtlpReceiver;
  let fleet: SimFleet;
  before(async () => {
    receiver = await otlpReceiver();
    fleet = await simFleet(['metricsIntervalMs: 0', 'healthIntervalMs: 60000', 'policy: ear', 'policyConfig: { tHot: 4000, minGain: 4000, tCool: 60 }',
      'kvConnectors: [nixl, recompute]', 'kvConnector: nixl'], () => [[], []], { gatewayEnv: otelEnv(receiver) });
  });
  after(async () => {
    await fleet.close();
    await receiver.close();
  });

  test('the moved request\'s trace: route names the source, a kv_transfer span (nixl, ok, bytes), then the upstream call to the target', async () => {
    const sys = { role: 'system', content: text('system', 3000) };
    const first = await turn(fleet.url, 'S', [sys, { role: 'user', content: 'turn 1' }]);
    const host = first.backend;
    const other = host === 'sim-0' ? 'sim-1' : 'sim-0';
    const messages = [sys, { role: 'user', content: 'turn 1' }, { role: 'assistant', content: 'ok' }, { role: 'user', content: text('turn 2', 24000) }];
    const [, b] = await Promise.all([turn(fleet.url, 'S', messages), turn(fleet.url, 'S', messages)]);
    assert.equal(b.backend, other, 'the second call moved the session');
    assert.equal((await session(fleet.url, 'S')).migrations, 1);

    const spans = await receiver.waitFor((all) => transfers(all, 'migration').length === 1 &&
      all.some((s) => s.kind === KIND.CLIENT && s.traceId === transfers(all, 'migration')[0].traceId));
    const move = transfers(spans, 'migration')[0];
    assert.equal(move.attributes['ear.migration.source'], host);
    assert.equal(move.attributes['ear.migration.target'], other);
    assert.equal(move.attributes['ear.migration.connector'], 'nixl');
    assert.equal(move.attributes['ear.migration.outcome'], 'ok');
    assert.equal(move.attributes['ear.migration.served_by'], other);
    assert.ok(Number(move.attributes['ear.migration.bytes']) > 0, 'the KV bytes moved');
    assert.equal(move.status.code, STATUS.UNSET);
    const trace = spans.filter((s) => s.traceId === move.traceId);
    const server = trace.find((s) => s.kind === KIND.SERVER);
    assert.ok(server !== undefined, 'the request\'s server span');
    assert.equal(move.parentSpanId, server.spanId);
    const route = trace.find((s) => s.name === 'ear.route');
    assert.equal(route?.attributes['ear.pod'], other);
    assert.equal(route?.attributes['ear.migration.source'], host);
    assert.equal(route?.attributes['ear.policy'], 'ear');
    const upstream = trace.filter((s) => s.kind === KIND.CLIENT);
    assert.equal(upstream.length, 1);
    assert.equal(upstream[0].attributes['ear.backend'], other);
    assert.ok(upstream[0].startNs + SLACK_NS >= move.endNs, 'the target is called after the transfer');
    assert.ok(Number(upstream[0].attributes['ear.usage.cached_tokens']) >= b.prompt - 32, 'the target reported the moved prefix as cached');
  });
});

describe('tracing a proactive move (policy ear-proactive, nixl)', () => {
  let receiver: OtlpReceiver;
  let fleet: SimFleet;
  before(async () => {
    receiver = await otlpReceiver();
    fleet = await simFleet(['metricsIntervalMs: 0', 'healthIntervalMs: 60000', 'policy: ear-proactive', 'proactiveIntervalMs: 100',
      'policyConfig: { tHot: 4000, minGain: 4000, tCool: 60 }', 'kvConnectors: [nixl, recompute]', 'kvConnector: nixl'], () => [[], []], { gatewayEnv: otelEnv(receiver) });
  });
  after(async () => {
    await fleet.close();
    await receiver.close();
  });

  test('an idle session moved off a hot host is a root kv_transfer span with its source, target, connector and outcome', async () => {
    const sys = { role: 'system', content: text('system', 3000) };
    const first = await turn(fleet.url, 'S', [sys, { role: 'user', content: 'turn 1' }]);
    const host = first.backend;
    const other = host === 'sim-0' ? 'sim-1' : 'sim-0';
    let hot: string | null = null;
    for (let i = 0; i < 8 && hot === null; i++) {
      const t = await turn(fleet.url, `T${i}`, [{ role: 'user', content: text(`probe ${i}`, 200) }]);
      if (t.backend === host) hot = `T${i}`;
    }
    assert.ok(hot !== null, `no new session landed on ${host}`);
    const long = turn(fleet.url, hot, [{ role: 'user', content: text(`probe ${hot.slice(1)}`, 200) }, { role: 'assistant', content: 'ok' },
      { role: 'user', content: text('long', 90000) }]);
    const spans = await receiver.waitFor((all) => transfers(all, 'proactive').length >= 1, 30_000);
    await long;
    const move = transfers(spans, 'proactive')[0];
    assert.equal(move.parentSpanId, '', 'a root span');
    assert.equal(move.attributes['ear.migration.source'], host);
    assert.equal(move.attributes['ear.migration.target'], other);
    assert.equal(move.attributes['ear.migration.connector'], 'nixl');
    assert.equal(move.attributes['ear.migration.outcome'], 'ok');
    assert.ok(Number(move.attributes['ear.migration.bytes']) > 0);
    assert.ok(move.endNs >= move.startNs);
  });
});
