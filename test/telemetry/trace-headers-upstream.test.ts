// The trace context a KV transfer's source leg carries: buffered-post.ts sends the headers it is given (the
// transfer span's traceparent) beside the request id, through the same allowlist as the proxied request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { post } from '../../src/upstream/buffered-post.js';
import { UpstreamPool } from '../../src/upstream/pool.js';
import { fakeEngine } from '../fixtures/fake-engine.js';

const TP = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

test('a buffered POST (a KV connector\'s source leg) carries the trace headers it is given, and none without', async () => {
  const engine = await fakeEngine('m');
  const pool = new UpstreamPool(engine.url, { connections: 2, headersTimeoutMs: 5000, bodyTimeoutMs: 5000 });
  try {
    const body = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 }));
    const signal = { aborted: false, onAbort: null };
    const traced = await post(pool, '/v1/chat/completions', body, 'rid-1', signal, [['traceparent', TP], ['tracestate', 'a=1']]);
    assert.equal(traced.status, 200);
    assert.equal(engine.headers[0].traceparent, TP);
    assert.equal(engine.headers[0].tracestate, 'a=1');
    assert.equal(engine.headers[0]['x-request-id'], 'rid-1');
    const plain = await post(pool, '/v1/chat/completions', body, 'rid-2', signal);
    assert.equal(plain.status, 200);
    assert.equal(engine.headers[1].traceparent, undefined);
    assert.equal(engine.headers[1].tracestate, undefined);
  } finally {
    await pool.close();
    await engine.close();
  }
});
