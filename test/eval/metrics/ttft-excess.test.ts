// TTFT excess: each request's TTFT less its ideal TTFT, so the queueing and cache misses a router controls are
// seen apart from the prefill the workload makes inevitable.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MetricsCollector } from '../../../src/eval/metrics/index.js';

test('ttftExcess is TTFT less the ideal TTFT (never below 0); requests without an ideal are left out', () => {
  const m = new MetricsCollector({ engines: 2 });
  m.requestSent({ id: 'a', sessionId: 's', at: 0, promptTokens: 100, idealTtft: 1 });
  m.firstToken('a', 3);
  m.requestFinished('a', { at: 4, cachedTokens: 0, outputTokens: 2 });
  m.requestSent({ id: 'b', sessionId: 't', at: 0, promptTokens: 100, idealTtft: 5 });
  m.firstToken('b', 4);
  m.requestFinished('b', { at: 5, cachedTokens: 0, outputTokens: 2 });
  m.requestSent({ id: 'c', sessionId: 'u', at: 0, promptTokens: 100 });
  m.firstToken('c', 9);
  m.requestFinished('c', { at: 10, cachedTokens: 0, outputTokens: 2 });
  const s = m.summary();
  assert.equal(s.ttft.count, 3);
  assert.equal(s.ttftExcess.count, 2);
  assert.ok(Math.abs(s.ttftExcess.max - 2e6) < 2e4, `max excess ${s.ttftExcess.max} µs`);
  assert.equal(s.ttftExcess.p50, 0);
});
