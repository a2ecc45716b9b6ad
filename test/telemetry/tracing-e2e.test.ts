// Tracing as a user runs it: `ear serve` processes with OTEL_* pointing at an in-test OTLP/HTTP receiver (JSON
// encoding), in front of fake engines that record the headers they get. Checked: the span tree (server →
// admission, route, upstream), parent and child ids, attributes, the client's trace continued, the engine given
// EAR's upstream span as its parent, error status when the engine fails, spans flushed on SIGTERM; and with
// tracing off, no OpenTelemetry module loaded and the client's trace headers forwarded as they came.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { fakeEngine, type FakeEngine } from '../fixtures/fake-engine.js';
import { KIND, otlpReceiver, STATUS, type OtlpReceiver, type ReceivedSpan } from '../fixtures/otlp-receiver.js';
import { SERVE_LISTENING, start, stop, type Proc } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

const PROBE = fileURLToPath(new URL('../fixtures/otel-modules-probe.js', import.meta.url));
const LOADED = /opentelemetry-modules-loaded=(\d+)/;

/** No OTEL_* of the test's own environment reaches a gateway unless a test sets it. */
const CLEAN_OTEL: NodeJS.ProcessEnv = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('OTEL_')).map((k) => [k, '']));

function otelEnv (receiver: OtlpReceiver, extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    ...CLEAN_OTEL,
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
    OTEL_SERVICE_NAME: 'ear-under-test',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
    ...extra
  };
}

function serve (engines: FakeEngine[], env: NodeJS.ProcessEnv, flags: string[] = []): Promise<Proc> {
  const backends = engines.flatMap((e, i) => ['--backend', `${e.url},id=e${i}`]);
  return start(['serve', '--host', '127.0.0.1', '--port', '0', ...backends, ...flags], SERVE_LISTENING, ['--import', PROBE], env);
}

interface Answer { status: number; backend: string | null; body: string }

async function chat (url: string, headers: Record<string, string> = {}): Promise<Answer> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello there, engine' }] })
  });
  return { status: res.status, backend: res.headers.get('x-ear-backend'), body: await res.text() };
}

/**
 * The SDK stamps each span from its own reading of Date.now() against the monotonic clock, so two spans' times
 * can disagree by a millisecond or so: orders are checked with that much slack.
 */
const SLACK_NS = 2_000_000n;

const hex = (n: number, seed: string): string => Buffer.from(seed.repeat(n)).toString('hex').slice(0, n * 2);

function one (spans: ReceivedSpan[], pred: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const found = spans.filter(pred);
  assert.equal(found.length, 1, `exactly one ${what}; got ${found.length} among ${spans.map((s) => s.name).join(', ')}`);
  return found[0];
}

/** The server span of trace `traceId` and its children by name, once all four have arrived. */
async function requestTree (receiver: OtlpReceiver, traceId: string): Promise<{ server: ReceivedSpan; children: ReceivedSpan[] }> {
  const spans = await receiver.waitFor((all) => {
    const mine = all.filter((s) => s.traceId === traceId);
    return mine.some((s) => s.kind === KIND.SERVER) && mine.some((s) => s.kind === KIND.CLIENT) && mine.some((s) => s.name === 'ear.route') && mine.some((s) => s.name === 'ear.admission');
  });
  const mine = spans.filter((s) => s.traceId === traceId);
  const server = one(mine, (s) => s.kind === KIND.SERVER, 'server span');
  return { server, children: mine.filter((s) => s !== server) };
}

function stderrCount (p: Proc): number {
  const m = LOADED.exec(p.out());
  assert.ok(m !== null, `the probe printed its count at exit: ${p.out().slice(-500)}`);
  return Number(m[1]);
}

describe('tracing on: ear serve exports OTLP spans for each request and joins the engine to the trace', () => {
  let receiver: OtlpReceiver;
  let engines: FakeEngine[];
  let gw: Proc;
  before(async () => {
    receiver = await otlpReceiver();
    engines = [await fakeEngine('m'), await fakeEngine('m')];
    gw = await serve(engines, otelEnv(receiver), ['--policy', 'ear']);
  });
  after(async () => {
    await stop(gw);
    await Promise.all(engines.map((e) => e.close()));
    await receiver.close();
  });

  test('a client\'s traceparent is continued: server span → admission, route, upstream; the engine gets EAR\'s upstream span as parent', async () => {
    const traceId = hex(16, 'trace-a');
    const clientSpan = hex(8, 'client');
    const session = 'user-42-secret-session';
    const answer = await chat(gw.url, { traceparent: `00-${traceId}-${clientSpan}-01`, tracestate: 'vendor=opaque', 'x-session-id': session });
    assert.equal(answer.status, 200, answer.body);
    const { server, children } = await requestTree(receiver, traceId);

    assert.equal(server.parentSpanId, clientSpan, 'the server span\'s parent is the client\'s span');
    assert.equal(server.name, 'POST /v1/chat/completions');
    assert.equal(server.attributes['http.request.method'], 'POST');
    assert.equal(server.attributes['url.path'], '/v1/chat/completions');
    assert.equal(server.attributes['http.response.status_code'], 200);
    assert.equal(server.attributes['gen_ai.request.model'], 'm');
    assert.equal(server.attributes['gen_ai.operation.name'], 'chat');
    assert.match(String(server.attributes['ear.session.hash']), /^[0-9a-f]{16}$/);
    for (const s of [server, ...children]) {
      assert.ok(!Object.values(s.attributes).some((v) => typeof v === 'string' && v.includes(session)), `no raw session id in ${s.name}`);
    }
    assert.equal(server.status.code, STATUS.UNSET);
    assert.equal(server.resource['service.name'], 'ear-under-test');
    assert.equal(server.resource['deployment.environment.name'], 'test');
    assert.equal(server.resource['process.command_args'], undefined, 'the command line (API keys, admin token) is not exported');

    for (const c of children) assert.equal(c.parentSpanId, server.spanId, `${c.name} is a child of the server span`);
    const admission = one(children, (s) => s.name === 'ear.admission', 'admission span');
    assert.equal(admission.attributes['ear.admission.outcome'], 'released');
    assert.equal(typeof admission.attributes['ear.admission.wait_ms'], 'number');
    const route = one(children, (s) => s.name === 'ear.route', 'route span');
    assert.equal(route.attributes['ear.policy'], 'ear');
    assert.equal(route.attributes['ear.pod'], answer.backend);
    assert.equal(route.attributes['ear.route.candidates'], 2);
    assert.equal(route.attributes['ear.route.attempt'], 0);
    assert.equal(typeof route.attributes['ear.route.matched_blocks'], 'number');
    const upstream = one(children, (s) => s.kind === KIND.CLIENT, 'upstream span');
    assert.equal(upstream.attributes['ear.backend'], answer.backend);
    assert.equal(upstream.attributes['http.response.status_code'], 200);
    assert.equal(upstream.attributes['gen_ai.usage.input_tokens'], 3);
    assert.equal(upstream.attributes['gen_ai.usage.output_tokens'], 1);
    assert.ok(Number(upstream.attributes['ear.ttft_ms']) >= 0, 'TTFT recorded on the upstream span');
    assert.ok(upstream.events.some((e) => e.name === 'gen_ai.first_token'), 'first token event');
    assert.ok(upstream.startNs + SLACK_NS >= server.startNs && upstream.endNs <= server.endNs + SLACK_NS, 'the upstream span lies within the server span');
    assert.ok(admission.startNs + SLACK_NS >= server.startNs && admission.endNs <= upstream.startNs + SLACK_NS, 'admission before the upstream call');

    const engine = engines[answer.backend === 'e0' ? 0 : 1];
    const got = engine.headers.at(-1)!;
    assert.equal(got.traceparent, `00-${traceId}-${upstream.spanId}-01`, 'the engine\'s parent is EAR\'s upstream span');
    assert.equal(got.tracestate, 'vendor=opaque', 'the trace\'s tracestate goes along');
  });

  test('without a traceparent a new trace starts at the server span; the engine joins it', async () => {
    const answer = await chat(gw.url);
    assert.equal(answer.status, 200);
    const engine = engines[answer.backend === 'e0' ? 0 : 1];
    const tp = String(engine.headers.at(-1)!.traceparent);
    const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(tp);
    assert.ok(m !== null, `the engine got a traceparent: ${tp}`);
    const { server, children } = await requestTree(receiver, m[1]);
    assert.equal(server.parentSpanId, '', 'a root span');
    assert.equal(one(children, (s) => s.kind === KIND.CLIENT, 'upstream span').spanId, m[2]);
  });

  test('a malformed traceparent is ignored: a new trace, nothing of it sent upstream', async () => {
    const answer = await chat(gw.url, { traceparent: '00-zz-not-a-trace-01', tracestate: 'x=y' });
    assert.equal(answer.status, 200);
    const engine = engines[answer.backend === 'e0' ? 0 : 1];
    const tp = String(engine.headers.at(-1)!.traceparent);
    assert.match(tp, /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    assert.equal(engine.headers.at(-1)!.tracestate, undefined);
    const { server } = await requestTree(receiver, tp.slice(3, 35));
    assert.equal(server.parentSpanId, '');
  });

  test('a client trace that is not sampled records nothing, and the engine is told so (flags 00) under the same trace', async () => {
    const traceId = hex(16, 'unsampled');
    const before = receiver.spans.length;
    const answer = await chat(gw.url, { traceparent: `00-${traceId}-${hex(8, 'parent')}-00` });
    assert.equal(answer.status, 200);
    const engine = engines[answer.backend === 'e0' ? 0 : 1];
    assert.match(String(engine.headers.at(-1)!.traceparent), new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    // A sampled request after it: once its spans are in, the unsampled one would have been too.
    const next = await chat(gw.url, { traceparent: `00-${hex(16, 'sampled-after')}-${hex(8, 'p2')}-01` });
    assert.equal(next.status, 200);
    await requestTree(receiver, hex(16, 'sampled-after'));
    assert.ok(!receiver.spans.slice(before).some((s) => s.traceId === traceId), 'no span of the unsampled trace');
  });
});

describe('tracing on: an engine failure and the flush on SIGTERM', () => {
  let receiver: OtlpReceiver;
  let engine: FakeEngine;
  let gw: Proc | undefined;
  before(async () => {
    receiver = await otlpReceiver();
    engine = await fakeEngine('m', 'status500');
  });
  after(async () => {
    await stop(gw);
    await engine.close();
    await receiver.close();
  });

  test('the engine\'s 500 marks the upstream and server spans as errors; spans still buffered are exported when the gateway drains', async () => {
    // A batch delay far past the test: only the drain's flush can deliver these spans.
    gw = await serve([engine], otelEnv(receiver, { OTEL_BSP_SCHEDULE_DELAY: '600000' }));
    const traceId = hex(16, 'failing');
    const answer = await chat(gw.url, { traceparent: `00-${traceId}-${hex(8, 'c')}-01` });
    assert.equal(answer.status, 500);
    // Proves nothing is exported yet, so there is no event to wait for: a processor that exported each span as it
    // ended would have posted within this while.
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(receiver.spans.filter((s) => s.traceId === traceId).length, 0, 'nothing exported before the drain');
    assert.equal(await stop(gw), 0);
    assert.ok(stderrCount(gw) > 0, 'the SDK was loaded');
    const { server, children } = await requestTree(receiver, traceId);
    assert.equal(server.status.code, STATUS.ERROR);
    assert.equal(server.attributes['http.response.status_code'], 500);
    const upstream = one(children, (s) => s.kind === KIND.CLIENT, 'upstream span');
    assert.equal(upstream.status.code, STATUS.ERROR);
    assert.equal(upstream.attributes['http.response.status_code'], 500);
    assert.equal(upstream.attributes['error.type'], '500');
  });
});

describe('tracing on: a request that waits for admission', () => {
  let receiver: OtlpReceiver;
  let engine: FakeEngine;
  let gw: Proc;
  before(async () => {
    receiver = await otlpReceiver();
    engine = await fakeEngine('m', 'hang-stream');
    // One request at a time on the one backend: a second waits in the scheduler.
    gw = await start(['serve', '--host', '127.0.0.1', '--port', '0', '--backend', `${engine.url},id=e0,max-concurrent=1`], SERVE_LISTENING, [], otelEnv(receiver));
  });
  after(async () => {
    await stop(gw);
    await engine.close();
    await receiver.close();
  });

  test('the admission span covers the wait, with the scheduler level it was released from', async () => {
    const holder = new AbortController();
    const first = await fetch(`${gw.url}/v1/chat/completions`, {
      method: 'POST', signal: holder.signal, headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hold the engine' }] })
    });
    assert.equal(first.status, 200);
    const reader = first.body!.getReader();
    await reader.read();
    engine.mode = 'ok';
    const traceId = hex(16, 'queued');
    const waiting = chat(gw.url, { traceparent: `00-${traceId}-${hex(8, 'q')}-01` });
    await until(async () => /^ear_admission_queue_depth\{level="\d+"\} [1-9]/m.test(await (await fetch(`${gw.url}/metrics`)).text()), 'the request to wait for admission');
    // The wait the span must cover: it is released only when the first request goes.
    await new Promise((resolve) => setTimeout(resolve, 200));
    holder.abort();
    await reader.cancel().catch(() => {});
    assert.equal((await waiting).status, 200);
    const { children } = await requestTree(receiver, traceId);
    const admission = one(children, (s) => s.name === 'ear.admission', 'admission span');
    assert.equal(admission.attributes['ear.admission.outcome'], 'released');
    assert.ok(Number(admission.attributes['ear.admission.wait_ms']) >= 200, `it waited: ${admission.attributes['ear.admission.wait_ms']} ms`);
    assert.equal(typeof admission.attributes['ear.scheduler.level'], 'number');
    assert.ok(admission.endNs - admission.startNs >= 200_000_000n, 'the span lasts the wait');
  });
});

describe('tracing off (no OTEL_* set)', () => {
  let engine: FakeEngine;
  let gw: Proc | undefined;
  before(async () => { engine = await fakeEngine('m'); });
  after(async () => {
    await stop(gw);
    await engine.close();
  });

  test('no OpenTelemetry module is loaded; a valid client traceparent and tracestate reach the engine unchanged, a malformed one does not', async () => {
    gw = await serve([engine], { ...CLEAN_OTEL });
    const tp = `00-${hex(16, 'offtrace')}-${hex(8, 'offspan')}-01`;
    assert.equal((await chat(gw.url, { traceparent: tp, tracestate: 'a=1,b=2' })).status, 200);
    assert.equal(engine.headers.at(-1)!.traceparent, tp);
    assert.equal(engine.headers.at(-1)!.tracestate, 'a=1,b=2');
    assert.equal((await chat(gw.url, { traceparent: `ff-${hex(16, 'v')}-${hex(8, 'w')}-01`, tracestate: 'a=1' })).status, 200);
    assert.equal(engine.headers.at(-1)!.traceparent, undefined, 'version ff is invalid: dropped');
    assert.equal(engine.headers.at(-1)!.tracestate, undefined);
    assert.equal((await chat(gw.url)).status, 200);
    assert.equal(engine.headers.at(-1)!.traceparent, undefined, 'none sent, none made up');
    assert.equal(await stop(gw), 0);
    assert.equal(stderrCount(gw), 0, 'no @opentelemetry module loaded');
  });

  test('OTEL_TRACES_EXPORTER=none keeps it off even with an endpoint set', async () => {
    gw = await serve([engine], { ...CLEAN_OTEL, OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9' });
    assert.equal((await chat(gw.url)).status, 200);
    assert.equal(await stop(gw), 0);
    assert.equal(stderrCount(gw), 0);
  });
});
