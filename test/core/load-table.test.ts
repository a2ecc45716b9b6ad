import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LoadTable } from '../../src/core/load-table.js';
import { smallRegion } from './fixtures/small-region.js';

test('gateway counters add up and stop at zero; engine metrics are stored per pod', () => {
  const { region } = smallRegion({ pods: 4 });
  const load = new LoadTable(region);
  assert.deepEqual(load.get(1), { inFlight: 0, pendingPrefill: 0, decisions: 0, running: 0, waiting: 0, kvUsage: 0, lastScrape: -Infinity });
  assert.equal(load.addInFlight(1, 3), 3);
  assert.equal(load.addInFlight(1, -1), 2);
  assert.equal(load.addInFlight(1, -5), 0, 'a release without its acquire stops at zero');
  assert.equal(load.addPendingPrefill(1, 12_000), 12_000);
  assert.equal(load.addPendingPrefill(1, -2_000), 10_000);
  load.countDecision(1);
  load.countDecision(1);
  load.setEngine(1, { running: 7, waiting: 2, kvUsage: 0.625, time: 1234.5 });
  assert.deepEqual(load.get(1), { inFlight: 0, pendingPrefill: 10_000, decisions: 2, running: 7, waiting: 2, kvUsage: 0.625, lastScrape: 1234.5 });
  assert.equal(load.pendingPrefill(1), 10_000);
  assert.equal(load.inFlight(0), 0, 'other pods untouched');
  assert.equal(load.addPendingPrefill(2, 0x7FFFFFFF), 0x7FFFFFFF);
  assert.equal(load.addPendingPrefill(2, 1000), 0x7FFFFFFF, 'stops at 2^31 − 1');
});

test('pod ids out of range and a KV usage outside [0, 1] are refused', () => {
  const { region } = smallRegion({ pods: 4 });
  const load = new LoadTable(region);
  assert.throws(() => load.addInFlight(4, 1), /outside \[0, 4\)/);
  assert.throws(() => load.get(-1), RangeError);
  assert.throws(() => load.setEngine(0, { running: 1, waiting: 0, kvUsage: 1.5, time: 0 }), /kvUsage/);
  assert.throws(() => load.setEngine(0, { running: 1, waiting: 0, kvUsage: NaN, time: 0 }), /kvUsage/);
  const base = region.base('TABLE_LOAD');
  assert.equal(region.fn<(...a: number[]) => number>('loadAddInFlight')(base, 4, 1), -1);
  assert.ok(Number.isNaN(region.fn<(...a: number[]) => number>('loadGetF64')(base, 4, region.const('LOAD_F_KV_USAGE'))));
});

test('resetRow puts a released row back as the table started, and only that row', () => {
  const { region } = smallRegion({ pods: 4 });
  const load = new LoadTable(region);
  const fresh = load.get(2);
  for (const pod of [1, 2]) {
    load.addInFlight(pod, 5);
    load.addPendingPrefill(pod, 900);
    load.countDecision(pod);
    load.setEngine(pod, { running: 3, waiting: 1, kvUsage: 0.5, time: 77 });
  }
  const other = load.get(1);
  load.resetRow(2);
  assert.deepEqual(load.get(2), fresh);
  assert.deepEqual(load.get(2), { inFlight: 0, pendingPrefill: 0, decisions: 0, running: 0, waiting: 0, kvUsage: 0, lastScrape: -Infinity });
  assert.deepEqual(load.get(1), other);
  assert.throws(() => load.resetRow(4), RangeError);
  assert.equal(region.fn<(...a: number[]) => number>('loadResetRow')(region.base('TABLE_LOAD'), 4), -1);
});
