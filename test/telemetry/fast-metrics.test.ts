import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { FastCounter, FastHistogram } from '../../src/telemetry/fast-metrics.js';

const BUCKETS = [1e-6, 5e-6, 0.001, 0.005, 0.1, 1, 10];

test('exports exactly what prom-client\'s Histogram exports for the same observations (property)', async () => {
  await fc.assert(fc.asyncProperty(
    fc.array(fc.tuple(fc.constantFrom('a', 'b', 'c"\\'), fc.double({ min: 0, max: 20, noNaN: true })), { maxLength: 60 }),
    async (obs) => {
      const ours = new Registry();
      const theirs = new Registry();
      const fast = new FastHistogram({ name: 'x_seconds', help: 'X.', buckets: BUCKETS, labelNames: ['backend'], registers: [ours] });
      const plain = new FastHistogram({ name: 'y_seconds', help: 'Y.', buckets: BUCKETS, registers: [ours] });
      const ref = new Histogram({ name: 'x_seconds', help: 'X.', buckets: BUCKETS, labelNames: ['backend'], registers: [theirs] });
      const refPlain = new Histogram({ name: 'y_seconds', help: 'Y.', buckets: BUCKETS, registers: [theirs] });
      for (const [backend, v] of obs) {
        fast.labels(backend).observe(v);
        ref.labels(backend).observe(v);
        plain.observe(v);
        refPlain.observe(v);
      }
      assert.equal(await ours.metrics(), await theirs.metrics());
    }
  ), { numRuns: 50 });
});

test('bad input: a non-finite value or the wrong number of labels throws; buckets must ascend', () => {
  const h = new FastHistogram({ name: 'z', help: 'Z.', buckets: [1, 2], labelNames: ['a'] });
  assert.throws(() => h.labels('x').observe(NaN), TypeError);
  assert.throws(() => h.labels('x').observe(Infinity), TypeError);
  assert.throws(() => h.labels(), /expected 1 label/);
  assert.throws(() => new FastHistogram({ name: 'w', help: 'W.', buckets: [2, 1] }), RangeError);
});

test('counters export exactly what prom-client\'s Counter exports for the same increments (property)', async () => {
  await fc.assert(fc.asyncProperty(
    fc.array(fc.tuple(fc.constantFrom('/v1/a', '/v1/b'), fc.constantFrom('200', '502'), fc.integer({ min: 0, max: 5 })), { maxLength: 40 }),
    async (incs) => {
      const ours = new Registry();
      const theirs = new Registry();
      const fast = new FastCounter({ name: 'req_total', help: 'R.', labelNames: ['route', 'status'], registers: [ours] });
      const plain = new FastCounter({ name: 'plain_total', help: 'P.', registers: [ours] });
      const ref = new Counter({ name: 'req_total', help: 'R.', labelNames: ['route', 'status'], registers: [theirs] });
      const refPlain = new Counter({ name: 'plain_total', help: 'P.', registers: [theirs] });
      for (const [route, status, by] of incs) {
        fast.labels(route, status).inc(by);
        ref.labels({ route, status }).inc(by);
        plain.inc();
        refPlain.inc();
      }
      assert.equal(await ours.metrics(), await theirs.metrics());
    }
  ), { numRuns: 50 });
  const c = new FastCounter({ name: 'c_total', help: 'C.' });
  assert.throws(() => c.inc(-1), /decrease/);
});
