// The vendored protos encode as Envoy's: messages built byte by byte from the published field numbers decode
// through them, and what the picker sends encodes to the bytes Envoy expects. Also the endpoint lists' parsing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { externalProcessor, healthService, namespacedMetadata, type ProcessingRequest } from '../../src/epp/protocol.js';
import { EndpointFilter, endpointList } from '../../src/epp/endpoints.js';

const bytes = (...parts: Array<number | string | Buffer>): Buffer =>
  Buffer.concat(parts.map((p) => typeof p === 'string' ? Buffer.from(p) : typeof p === 'number' ? Buffer.from([p]) : p));

test('ProcessingRequest: request_headers (2) with raw_value (3) and protocol_config (11) decode from Envoy\'s bytes', () => {
  const header = bytes(0x0a, 5, ':path', 0x1a, 2, '/x'); // HeaderValue { key = 1, raw_value = 3 }
  const map = bytes(0x0a, header.length, header); // HeaderMap { headers = 1 }
  const headers = Buffer.concat([bytes(0x0a, map.length), map, bytes(0x18, 1)]); // HttpHeaders { headers = 1, end_of_stream = 3 }
  const cfg = bytes(0x08, 4, 0x10, 2); // ProtocolConfiguration { FULL_DUPLEX_STREAMED, BUFFERED }
  const wire = Buffer.concat([bytes(0x12, headers.length), headers, bytes(0x5a, cfg.length), cfg]);
  const m = externalProcessor().service.Process.requestDeserialize(wire) as ProcessingRequest;
  assert.equal(m.request, 'request_headers');
  assert.equal(m.request_headers?.end_of_stream, true);
  const h = m.request_headers!.headers!.headers![0];
  assert.equal(h.key, ':path');
  assert.equal(Buffer.from(h.raw_value!).toString(), '/x');
  assert.equal(m.protocol_config?.request_body_mode, 'FULL_DUPLEX_STREAMED');
  assert.equal(m.protocol_config?.response_body_mode, 'BUFFERED');
});

test('ProcessingResponse: an immediate 429 (7 → HttpStatus 1) and envoy.lb dynamic metadata (8) encode as Envoy reads them', () => {
  const ser = externalProcessor().service.Process.responseSerialize;
  assert.deepEqual([...ser({ immediate_response: { status: { code: 429 } } })], [0x3a, 5, 0x0a, 3, 0x08, 0xad, 0x03]);
  const md = ser({ request_headers: {}, dynamic_metadata: namespacedMetadata('envoy.lb', { k: 'v' }) });
  // Struct { fields = 1: map entry { key = 1, value = 2: Value { struct_value = 5: Struct { … string_value = 3 } } } }
  const inner = bytes(0x0a, 8, 0x0a, 1, 'k', 0x12, 3, 0x1a, 1, 'v');
  const value = bytes(0x2a, inner.length, inner);
  const entry = bytes(0x0a, 8, 'envoy.lb', 0x12, value.length, value);
  const struct = bytes(0x0a, entry.length, entry);
  assert.deepEqual([...md], [0x0a, 0, 0x42, struct.length, ...struct]);
});

test('grpc.health.v1: Check answers decode with the published numbers', () => {
  const svc = healthService().service.Check;
  assert.deepEqual([...svc.responseSerialize({ status: 'NOT_SERVING' })], [0x08, 2]);
  assert.deepEqual(svc.requestDeserialize(bytes(0x0a, 8, 'liveness')), { service: 'liveness' });
});

test('endpoint lists: strings or lists, nested commas, ports optional, IPv6 in brackets', () => {
  assert.deepEqual(endpointList(' 10.0.0.1:8000, 10.0.0.2 ,'), ['10.0.0.1:8000', '10.0.0.2']);
  assert.deepEqual(endpointList(['10.0.0.1:8000,10.0.0.3:8000', 7, '']), ['10.0.0.1:8000', '10.0.0.3:8000']);
  assert.deepEqual(endpointList(null), []);
  const f = new EndpointFilter(['10.0.0.1:8000', '10.0.0.2', '[fd00::1]:9000', 'fd00::2']);
  assert.ok(f.allows('10.0.0.1:8000'));
  assert.ok(!f.allows('10.0.0.1:8001'));
  assert.ok(f.allows('10.0.0.2:1234'), 'an address without a port allows its every port');
  assert.ok(f.allows('[fd00::1]:9000'));
  assert.ok(!f.allows('[fd00::1]:9001'));
  assert.ok(f.allows('[fd00::2]:8000'));
  assert.ok(!new EndpointFilter([]).allows('10.0.0.1:8000'));
});
