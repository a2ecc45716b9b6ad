import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { FastHistogram } from '../../src/gateway/fast-histogram.js';

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
