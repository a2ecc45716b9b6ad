// The soak's arithmetic: the slope that decides "flat", the heap floors it is taken over, and the /metrics reads.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { byLabel, parseMetrics, slope, total, windowMinima } from '../../bench/soak-stats.js';

test('slope is the least-squares slope, and 0 without two distinct x', () => {
  assert.equal(slope([[0, 1], [1, 3], [2, 5]]), 2);
  assert.ok(Math.abs(slope([[0, 0], [1, 1], [2, 0], [3, 1]]) - 0.2) < 1e-12);
  assert.equal(slope([[5, 1]]), 0);
  assert.equal(slope([[5, 1], [5, 9]]), 0);
});

test('a saw-tooth heap over a flat floor has a flat window-minimum slope, a leaking floor does not', () => {
  // Allocation climbs 1 MB/s for 10 s, then a collection drops it back: a floor of 20 MB, or one rising 10 kB/s.
  const flat: Array<[number, number]> = [];
  const leak: Array<[number, number]> = [];
  for (let t = 0; t < 600; t += 2) {
    flat.push([t, 20e6 + (t % 10) * 1e6]);
    leak.push([t, 20e6 + t * 1e4 + (t % 10) * 1e6]);
  }
  assert.ok(Math.abs(slope(windowMinima(flat, 30))) < 1);
  assert.ok(Math.abs(slope(windowMinima(leak, 30)) - 1e4) < 1);
  assert.deepEqual(windowMinima([[0, 5], [10, 3], [35, 7], [40, 6]], 30), [[10, 3], [40, 6]]);
});

test('metrics are read by series, label and total', () => {
  const m = parseMetrics(['# HELP x', 'ear_table_entries{table="sessions"} 12', 'ear_table_entries{table="prefix_index"} 30',
    'ear_upstream_errors_total{backend="a",kind="connect"} 1', 'ear_upstream_errors_total{backend="b",kind="connect"} 2',
    'process_resident_memory_bytes 1000', ''].join('\n'));
  assert.deepEqual(byLabel(m, 'ear_table_entries', 'table'), { sessions: 12, prefix_index: 30 });
  assert.deepEqual(byLabel(m, 'ear_upstream_errors_total', 'kind'), { connect: 3 });
  assert.equal(total(m, 'process_resident_memory_bytes'), 1000);
  assert.equal(total(m, 'ear_table_entries'), 42);
  assert.equal(total(m, 'absent'), 0);
});
