import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Latency, percentile } from '../../../src/eval/metrics/latency.js';

test('percentiles of 1..1000 µs are the nearest ranks; mean and max exact', () => {
  const l = new Latency();
  for (let us = 1000; us >= 1; us--) l.record(us / 1e6);
  assert.deepEqual(l.summary(), { count: 1000, mean: 500.5, p50: 500, p90: 900, p99: 990, max: 1000 });
  assert.deepEqual(l.cdf()[0], [1, 0]);
  assert.deepEqual(l.cdf().at(-1), [1000, 100]);
});

test('large values keep 3 significant digits; an empty histogram is all zeros; negatives clamp to 0', () => {
  const l = new Latency();
  l.record(12.345678); // 12,345,678 µs
  assert.ok(Math.abs(l.summary().p50 - 12_345_678) / 12_345_678 < 1e-3);
  assert.deepEqual(new Latency().summary(), { count: 0, mean: 0, p50: 0, p90: 0, p99: 0, max: 0 });
  const n = new Latency(); n.record(-0.001);
  assert.equal(n.summary().max, 0);
  assert.throws(() => n.record(Number.NaN), /finite/);
});

test('nearest-rank percentile of plain numbers', () => {
  assert.equal(percentile([5, 1, 4, 2, 3], 50), 3);
  assert.equal(percentile([5, 1, 4, 2, 3], 99), 5);
  assert.equal(percentile([5, 1, 4, 2, 3], 20), 1);
  assert.equal(percentile([], 99), 0);
});
