// When tracing is on (otel-env.ts), and which client trace headers are forwarded as they came (traceparent.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { tracingDecision } from '../../src/telemetry/otel-env.js';
import { clientTraceHeaders, MAX_TRACESTATE_LENGTH, validTraceparent } from '../../src/upstream/traceparent.js';

const on = (env: Record<string, string>): boolean => tracingDecision(env).enabled;

test('tracing is off unless an exporter or an OTLP endpoint is named; OTEL_SDK_DISABLED and exporter none win', () => {
  assert.equal(on({}), false);
  assert.equal(on({ OTEL_SERVICE_NAME: 'ear', OTEL_TRACES_SAMPLER: 'always_on' }), false, 'other OTEL_* alone do not turn it on');
  assert.equal(on({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), true);
  assert.equal(on({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' }), true);
  assert.equal(on({ OTEL_EXPORTER_OTLP_ENDPOINT: '  ' }), false, 'blank is unset');
  assert.equal(on({ OTEL_TRACES_EXPORTER: 'otlp' }), true, 'the SDK\'s default endpoint');
  assert.equal(on({ OTEL_TRACES_EXPORTER: 'console' }), true);
  assert.equal(on({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), false);
  assert.equal(on({ OTEL_TRACES_EXPORTER: ' None ' }), false);
  assert.equal(on({ OTEL_TRACES_EXPORTER: 'null' }), false, 'null entries are dropped, as the SDK does');
  assert.equal(on({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }), false);
  assert.equal(on({ OTEL_SDK_DISABLED: 'TRUE', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), false);
  assert.equal(on({ OTEL_SDK_DISABLED: 'false', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), true);
  assert.match(tracingDecision({ OTEL_EXPORTER_OTLP_ENDPOINT: 'x' }).reason, /OTEL_EXPORTER_OTLP_ENDPOINT/);
});

const TID = '4bf92f3577b34da6a3ce929d0e0e4736';
const SID = '00f067aa0ba902b7';

test('traceparent: the W3C form only (lower-case hex, version ff and all-zero ids refused, version 00 has four fields)', () => {
  assert.equal(validTraceparent(`00-${TID}-${SID}-01`), true);
  assert.equal(validTraceparent(`00-${TID}-${SID}-00`), true);
  assert.equal(validTraceparent(`01-${TID}-${SID}-01-future`), true, 'a later version may add fields');
  assert.equal(validTraceparent(`00-${TID}-${SID}-01-extra`), false);
  assert.equal(validTraceparent(`ff-${TID}-${SID}-01`), false);
  assert.equal(validTraceparent(`00-${'0'.repeat(32)}-${SID}-01`), false);
  assert.equal(validTraceparent(`00-${TID}-${'0'.repeat(16)}-01`), false);
  assert.equal(validTraceparent(`00-${TID.toUpperCase()}-${SID}-01`), false);
  assert.equal(validTraceparent(`00-${TID}-${SID}`), false);
  assert.equal(validTraceparent(`00-${TID}-${SID}-01\r\nx-evil: 1`), false);
  assert.equal(validTraceparent(''), false);
});

test('forwarded as they came: both headers, traceparent alone when tracestate is bad, nothing when traceparent is', () => {
  const tp = `00-${TID}-${SID}-01`;
  assert.deepEqual(clientTraceHeaders(tp, 'congo=t61rcWkgMzE'), [['traceparent', tp], ['tracestate', 'congo=t61rcWkgMzE']]);
  assert.deepEqual(clientTraceHeaders(tp, ''), [['traceparent', tp]]);
  assert.deepEqual(clientTraceHeaders(tp, 'x'.repeat(MAX_TRACESTATE_LENGTH + 1)), [['traceparent', tp]]);
  assert.deepEqual(clientTraceHeaders(tp, 'a=\u00e9'), [['traceparent', tp]]);
  assert.deepEqual(clientTraceHeaders('garbage', 'a=1'), []);
  assert.deepEqual(clientTraceHeaders('', 'a=1'), []);
});
