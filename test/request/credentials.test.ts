import { test } from 'node:test';
import assert from 'node:assert/strict';
import { AdminToken, ApiKeys, bearerToken } from '../../src/request/credentials.js';
import { backendHeaders, requestHeaders, UPSTREAM_HEADER_NAMES } from '../../src/upstream/headers.js';

test('the admin token matches only `Bearer <token>`; with none configured nothing matches', () => {
  const t = new AdminToken('s3cret');
  assert.equal(t.matches('Bearer s3cret'), true);
  for (const auth of ['', 'Bearer', 'Bearer ', 'Bearer s3cre', 'Bearer s3cret2', 'bearer s3cret', 's3cret', 'Basic s3cret', 'Bearer S3CRET']) {
    assert.equal(t.matches(auth), false, auth);
  }
  const off = new AdminToken(null);
  for (const auth of ['', 'Bearer ', 'Bearer null']) assert.equal(off.matches(auth), false, auth);
});

test('API keys are found by their HMAC digest: the id is stable per key, never the key, and unknown strings get none', () => {
  const keys = new ApiKeys(['k1', 'k2']);
  assert.equal(keys.enabled, true);
  const id1 = keys.identify('Bearer k1');
  assert.match(id1!, /^key:[A-Za-z0-9_-]{43}$/);
  assert.ok(!id1!.includes('k1'));
  assert.equal(keys.identify('Bearer k1'), id1);
  assert.equal(keys.idOf('k1'), id1);
  assert.notEqual(keys.identify('Bearer k2'), id1);
  for (const auth of ['', 'Bearer', 'Bearer k', 'Bearer k11', 'k1', 'Bearer K1']) assert.equal(keys.identify(auth), null, auth);
  assert.equal(new ApiKeys([]).enabled, false);
  // Another gateway process draws another secret: ids do not carry across (nothing to precompute).
  assert.notEqual(new ApiKeys(['k1']).idOf('k1'), id1);
  assert.equal(bearerToken('Bearer  x '), 'x');
});

test('upstream headers: the explicit allowlist, and a backend\'s own key from config', () => {
  assert.deepEqual([...UPSTREAM_HEADER_NAMES], ['content-type', 'x-request-id', 'authorization', 'traceparent', 'tracestate']);
  assert.deepEqual(requestHeaders('rid-1'), [['content-type', 'application/json'], ['x-request-id', 'rid-1']]);
  assert.deepEqual(backendHeaders(null), []);
  assert.deepEqual(backendHeaders('sk-1'), [['authorization', 'Bearer sk-1']]);
  for (const [name] of [...requestHeaders('r'), ...backendHeaders('k')]) assert.ok((UPSTREAM_HEADER_NAMES as readonly string[]).includes(name));
});
