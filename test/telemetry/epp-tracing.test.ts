// Tracing in `ear epp` as a user runs it: a real `ear epp` process with OTEL_* pointing at an in-test OTLP/HTTP
// receiver, Envoy's side of ext_proc played by EnvoySide (it applies the picker's header mutations to the request
// it sends, as Envoy does) in front of `ear sim` engines. Checked: the span tree (ext_proc server span →
// admission, route), the client's trace continued, the traceparent mutation naming EAR's server span in the
// client's trace, the response watch (served endpoint, TTFT, usage), 429 and 503 marked, an abandoned stream's
// span ended in error; with tracing off, no trace header set and no OpenTelemetry SDK module loaded.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { KIND, otlpReceiver, STATUS, type OtlpReceiver, type ReceivedSpan } from '../fixtures/otlp-receiver.js';
import { stop, type Proc } from '../fixtures/processes.js';
import { chat, epp, hostPort, metricSum, sims, type Epp } from '../epp/epp-process.js';
import { until } from '../fixtures/wait.js';

const PROBE = fileURLToPath(new URL('../fixtures/otel-modules-probe.js', import.meta.url));
const LOADED = /opentelemetry-modules-loaded=(\d+)/;

/** No OTEL_* of the test's own environment reaches a picker unless a test sets it. */
const CLEAN_OTEL: NodeJS.ProcessEnv = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('OTEL_')).map((k) => [k, '']));

function otelEnv (receiver: OtlpReceiver): NodeJS.ProcessEnv {
  return { ...CLEAN_OTEL, OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json', OTEL_BSP_SCHEDULE_DELAY: '50', OTEL_SERVICE_NAME: 'ear-epp-under-test' };
}

const hex = (n: number, seed: string): string => Buffer.from(seed.repeat(n)).toString('hex').slice(0, n * 2);

/** The SDK's own Date.now() readings may disagree by a millisecond or so between spans. */
const SLACK_NS = 2_000_000n;

function one (spans: ReceivedSpan[], pred: (s: ReceivedSpan) => boolean, what: string): ReceivedSpan {
  const found = spans.filter(pred);
  assert.equal(found.length, 1, `exactly one ${what}; got ${found.length} among ${spans.map((s) => s.name).join(', ')}`);
  return found[0];
}

/** The ext_proc server span whose ear.request_id is `rid`, once it has arrived, and its children. */
async function serverSpan (receiver: OtlpReceiver, rid: string, children: string[] = []): Promise<{ server: ReceivedSpan; children: ReceivedSpan[] }> {
  const spans = await receiver.waitFor((all) => {
    const server = all.find((s) => s.kind === KIND.SERVER && s.attributes['ear.request_id'] === rid);
    return server !== undefined && children.every((name) => all.some((s) => s.parentSpanId === server.spanId && s.name === name));
  });
  const server = one(spans, (s) => s.kind === KIND.SERVER && s.attributes['ear.request_id'] === rid, `server span of ${rid}`);
  return { server, children: spans.filter((s) => s.parentSpanId === server.spanId) };
}

const streamed = (tag: string, maxTokens = 8): Buffer => chat(tag, { stream: true, stream_options: { include_usage: true }, max_tokens: maxTokens });

describe('tracing on: ear epp spans each picked request and names its server span in the request\'s traceparent', () => {
  let receiver: OtlpReceiver;
  let engines: Proc[] = [];
  let e: Epp;
  before(async () => {
    receiver = await otlpReceiver();
    // Streams slow enough that an abort after two chunks is mid-response.
    engines = await sims(2, ['--stop-probability', '0', '--time-scale', '0.5']);
    e = await epp(engines.map((s, i) => `${s.url},id=sim-${i}`), ['--policy', 'ear', '--fallbacks', '1'], { env: otelEnv(receiver) });
    await until(async () => await metricSum(e.http, 'ear_backend_up') === 2, 'ear_backend_up = 2');
  });
  after(async () => {
    await e?.close();
    await Promise.all(engines.map((s) => stop(s)));
    await receiver?.close();
  });

  test('the client\'s traceparent is continued: ext_proc server span → admission, route; the engine is given the server span in the client\'s trace', async () => {
    const traceId = hex(16, 'epp-trace');
    const clientSpan = hex(8, 'client');
    const x = await e.envoy.exchange({
      body: streamed('hello there, engine'),
      headers: { traceparent: `00-${traceId}-${clientSpan}-01`, tracestate: 'vendor=opaque', 'x-request-id': 'rid-tree', 'x-session-id': 'user-7-secret' }
    });
    assert.equal(x.status, 200, x.responseBody);
    const { server, children } = await serverSpan(receiver, 'rid-tree', ['ear.admission', 'ear.route']);

    assert.equal(server.traceId, traceId);
    assert.equal(server.parentSpanId, clientSpan, 'the server span\'s parent is the client\'s span');
    assert.equal(server.name, 'ext_proc POST /v1/chat/completions');
    assert.equal(server.attributes['gen_ai.request.model'], 'm');
    assert.equal(server.attributes['http.response.status_code'], 200);
    assert.equal(server.status.code, STATUS.UNSET);
    assert.equal(server.resource['service.name'], 'ear-epp-under-test');
    assert.ok(!Object.values(server.attributes).some((v) => typeof v === 'string' && v.includes('user-7-secret')), 'no raw session id');

    // The engine's parent: EAR's server span, in the client's trace, with its tracestate.
    assert.equal(x.requestHeaderMutation.traceparent, `00-${traceId}-${server.spanId}-01`);
    assert.equal(x.requestHeaderMutation.tracestate, 'vendor=opaque');
    assert.equal(x.upstreamHeaders.traceparent, `00-${traceId}-${server.spanId}-01`, 'the request Envoy sent carries it');

    const admission = one(children, (s) => s.name === 'ear.admission', 'admission span');
    assert.equal(admission.attributes['ear.admission.outcome'], 'released');
    assert.equal(typeof admission.attributes['ear.admission.wait_ms'], 'number');
    assert.equal(admission.status.code, STATUS.UNSET);
    const route = one(children, (s) => s.name === 'ear.route', 'route span');
    const primary = x.endpointHeader!.split(',')[0];
    const pod = engines.findIndex((s) => hostPort(s.url) === primary);
    assert.equal(route.attributes['ear.pod'], `sim-${pod}`);
    assert.equal(route.attributes['ear.policy'], 'ear');
    assert.equal(route.attributes['ear.route.candidates'], 2);
    assert.equal(route.attributes['ear.route.fallbacks'], 1);
    assert.equal(route.attributes['ear.route.subset_hint'], false);
    assert.equal(typeof route.attributes['ear.route.matched_blocks'], 'number');

    // The response as the proxy streamed it back.
    assert.equal(server.attributes['ear.served.relation'], 'primary');
    assert.equal(server.attributes['ear.served.endpoint'], primary);
    assert.ok(Number(server.attributes['ear.ttft_ms']) >= 0, 'TTFT recorded');
    assert.ok(server.events.some((ev) => ev.name === 'gen_ai.first_token'), 'first token event');
    assert.ok(Number(server.attributes['gen_ai.usage.input_tokens']) > 0);
    assert.equal(server.attributes['gen_ai.usage.output_tokens'], 8);
    for (const c of children) assert.ok(c.startNs + SLACK_NS >= server.startNs && c.endNs <= server.endNs + SLACK_NS, `${c.name} lies within the server span`);
    // The placement is decided when admission releases the request (the route span starts at the decision).
    assert.ok(route.startNs + SLACK_NS >= admission.startNs, 'the route decided within admission or after');
  });

  test('without a traceparent the server span is a root and the picker starts the trace; a malformed one is ignored', async () => {
    for (const [rid, headers] of [['rid-none', {}], ['rid-bad', { traceparent: '00-zz-not-a-trace-01', tracestate: 'x=y' }]] as const) {
      const x = await e.envoy.exchange({ body: chat(rid), headers: { 'x-request-id': rid, ...headers } });
      assert.equal(x.status, 200);
      const { server } = await serverSpan(receiver, rid);
      assert.equal(server.parentSpanId, '', `${rid}: a root span`);
      assert.equal(x.requestHeaderMutation.traceparent, `00-${server.traceId}-${server.spanId}-01`);
      assert.equal(x.requestHeaderMutation.tracestate, undefined, `${rid}: no tracestate of a trace not continued`);
    }
  });

  test('a client trace that is not sampled records nothing; the engine is told so (flags 00) in the same trace', async () => {
    const traceId = hex(16, 'epp-unsampled');
    const before = receiver.spans.length;
    const x = await e.envoy.exchange({ body: chat('unsampled'), headers: { traceparent: `00-${traceId}-${hex(8, 'p')}-00`, 'x-request-id': 'rid-unsampled' } });
    assert.equal(x.status, 200);
    assert.match(x.requestHeaderMutation.traceparent ?? '', new RegExp(`^00-${traceId}-[0-9a-f]{16}-00$`));
    // A sampled request after it: once its spans are in, the unsampled one's would have been too.
    await e.envoy.exchange({ body: chat('sampled after'), headers: { 'x-request-id': 'rid-after-unsampled' } });
    await serverSpan(receiver, 'rid-after-unsampled', ['ear.route']);
    assert.ok(!receiver.spans.slice(before).some((sp) => sp.traceId === traceId), 'no span of the unsampled trace');
  });

  test('no allowed endpoint: 503, the admission and server spans in error', async () => {
    const x = await e.envoy.exchange({ body: chat('nowhere'), subset: ['127.0.0.1:9'], headers: { 'x-request-id': 'rid-503' } });
    assert.equal(x.immediate?.status, 503);
    assert.equal(x.requestHeaderMutation.traceparent, undefined);
    const { server, children } = await serverSpan(receiver, 'rid-503', ['ear.admission']);
    assert.equal(server.attributes['http.response.status_code'], 503);
    assert.equal(server.attributes['error.type'], 'EAR_ERR_NO_BACKEND');
    assert.equal(server.status.code, STATUS.ERROR);
    const admission = one(children, (s) => s.name === 'ear.admission', 'admission span');
    assert.equal(admission.attributes['ear.admission.outcome'], 'no_candidate');
    assert.equal(admission.status.code, STATUS.ERROR);
    assert.ok(!children.some((s) => s.name === 'ear.route'), 'nothing routed');
  });

  test('a stream cancelled mid-response ends its server span in error', async () => {
    const x = await e.envoy.exchange({ body: streamed('aborted', 400), abortAfterChunks: 2, headers: { 'x-request-id': 'rid-abort' } });
    assert.ok(x.responseBody.includes('data:'), 'it was streaming when cancelled');
    const { server } = await serverSpan(receiver, 'rid-abort', ['ear.route']);
    assert.equal(server.status.code, STATUS.ERROR);
    assert.equal(server.attributes['error.type'], 'stream_aborted');
    assert.equal(server.attributes['ear.ext_proc.abandoned_phase'], 'response');
    assert.equal(server.attributes['ear.client_aborted'], true);
    assert.equal(server.attributes['http.response.status_code'], 200, 'the engine had answered');
    assert.equal(server.attributes['gen_ai.usage.output_tokens'], undefined, 'no usage: the response did not end');
  });
});

describe('tracing on: a request shed by admission', () => {
  let receiver: OtlpReceiver;
  let engines: Proc[] = [];
  let e: Epp;
  before(async () => {
    receiver = await otlpReceiver();
    engines = await sims(1, ['--stop-probability', '0', '--time-scale', '0.5']);
    e = await epp([`${engines[0].url},id=sim-0,max-concurrent=1`], ['--max-queued', '1', '--queue-timeout-ms', '8000'], { env: otelEnv(receiver) });
  });
  after(async () => {
    await e?.close();
    await Promise.all(engines.map((s) => stop(s)));
    await receiver?.close();
  });

  test('429: the admission span says queue_full, the server span carries the status and error type', async () => {
    let queued: Promise<unknown> | null = null;
    let shed: Awaited<ReturnType<typeof e.envoy.exchange>> | null = null;
    const a = await e.envoy.exchange({
      body: streamed('holder', 60),
      beforeUpstream: async () => {
        // The holder has the engine's one slot: the waiter queues, the next finds the queue full.
        queued = e.envoy.exchange({ body: chat('waiter'), headers: { 'x-request-id': 'rid-waiter' } });
        await until(async () => await metricSum(e.http, 'ear_admission_queue_depth') === 1, 'ear_admission_queue_depth = 1');
        shed = await e.envoy.exchange({ body: chat('shed'), headers: { 'x-request-id': 'rid-429', traceparent: `00-${hex(16, 'shed')}-${hex(8, 'c')}-01` } });
      }
    });
    assert.equal(a.status, 200);
    assert.equal(shed!.immediate?.status, 429);
    assert.equal(((await queued!) as { status: number }).status, 200);

    const { server, children } = await serverSpan(receiver, 'rid-429', ['ear.admission']);
    assert.equal(server.traceId, hex(16, 'shed'));
    assert.equal(server.attributes['http.response.status_code'], 429);
    assert.equal(server.attributes['error.type'], 'EAR_ERR_QUEUE_FULL');
    const admission = one(children, (s) => s.name === 'ear.admission', 'admission span');
    assert.equal(admission.attributes['ear.admission.outcome'], 'queue_full');
    assert.equal(admission.status.code, STATUS.ERROR);

    // The one that waited: released after a wait, from a scheduler level.
    const { children: waited } = await serverSpan(receiver, 'rid-waiter', ['ear.admission', 'ear.route']);
    const w = one(waited, (s) => s.name === 'ear.admission', 'waiter admission span');
    assert.equal(w.attributes['ear.admission.outcome'], 'released');
    assert.ok(Number(w.attributes['ear.admission.wait_ms']) > 0, 'it waited');
    assert.equal(typeof w.attributes['ear.scheduler.level'], 'number');
  });

  test('a stream cancelled while queued: the admission span says cancelled, the server span ends in error', async () => {
    let cancel!: () => void;
    const cancelled = new Promise<void>((resolve) => { cancel = resolve; });
    let waiting: Promise<unknown> | null = null;
    const a = await e.envoy.exchange({
      body: streamed('holder 2', 60),
      beforeUpstream: async () => {
        waiting = e.envoy.exchange({ body: chat('gives up'), cancelWhen: cancelled, headers: { 'x-request-id': 'rid-gave-up' } }).catch((err: Error) => err);
        await until(async () => await metricSum(e.http, 'ear_admission_queue_depth') === 1, 'ear_admission_queue_depth = 1');
        cancel();
        await until(async () => await metricSum(e.http, 'ear_admission_queue_depth') === 0, 'ear_admission_queue_depth = 0');
      }
    });
    assert.equal(a.status, 200);
    assert.ok(await waiting! instanceof Error, 'the cancelled exchange ended');
    const { server, children } = await serverSpan(receiver, 'rid-gave-up', ['ear.admission']);
    assert.equal(server.status.code, STATUS.ERROR);
    assert.equal(server.attributes['ear.ext_proc.abandoned_phase'], 'queued');
    assert.equal(server.attributes['http.response.status_code'], undefined, 'nothing was answered');
    assert.equal(one(children, (s) => s.name === 'ear.admission', 'admission span').attributes['ear.admission.outcome'], 'cancelled');
    assert.ok(!children.some((s) => s.name === 'ear.route'), 'nothing routed');
  });
});

describe('tracing off: the picker sets no trace header and loads no OpenTelemetry SDK', () => {
  let engines: Proc[] = [];
  let e: Epp | undefined;
  before(async () => {
    engines = await sims(1);
  });
  after(async () => {
    await e?.close();
    await Promise.all(engines.map((s) => stop(s)));
  });

  test('the client\'s own traceparent goes upstream untouched; the SDK stays unloaded', async () => {
    e = await epp([`${engines[0].url},id=sim-0`], [], { nodeArgs: ['--import', PROBE], env: CLEAN_OTEL });
    const tp = `00-${hex(16, 'off')}-${hex(8, 'client')}-01`;
    const x = await e.envoy.exchange({ body: chat('untraced'), headers: { traceparent: tp, tracestate: 'a=b' } });
    assert.equal(x.status, 200);
    assert.ok(x.endpointHeader !== null, 'picked');
    assert.equal(x.requestHeaderMutation.traceparent, undefined, 'no traceparent mutation');
    assert.equal(x.requestHeaderMutation.tracestate, undefined, 'no tracestate mutation');
    assert.equal(x.upstreamHeaders.traceparent, tp, 'Envoy forwards the client\'s own');
    const proc = e.proc;
    await e.close();
    e = undefined;
    const m = LOADED.exec(proc.out());
    assert.ok(m !== null, `the probe printed its count at exit: ${proc.out().slice(-500)}`);
    assert.equal(Number(m[1]), 0, 'no OpenTelemetry SDK module loaded');
  });
});
