import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PodTable } from '../../src/core/pod-table.js';
import { smallRegion } from './fixtures/small-region.js';

test('pods are set, read back whole, change state, and every change moves the generations', () => {
  const { region } = smallRegion({ pods: 4 });
  const pods = new PodTable(region);
  assert.equal(pods.capacity, 4);
  assert.equal(pods.get(0), undefined);
  assert.equal(pods.state(0), undefined);
  const g0 = pods.generation;
  pods.set(2, { state: 'ready', role: 'prefill', blockSize: 16, kvBlocks: 40_000, model: 3 });
  assert.deepEqual(pods.get(2), { state: 'ready', role: 'prefill', blockSize: 16, kvBlocks: 40_000, model: 3, generation: 1, lease: 0 });
  pods.setState(2, 'draining');
  assert.equal(pods.state(2), 'draining');
  assert.equal(pods.get(2)!.generation, 2);
  assert.equal(pods.generation, g0 + 2);
  pods.remove(2);
  assert.equal(pods.get(2), undefined);
  assert.equal(pods.generation, g0 + 3);
});

test('pod ids out of range and unknown states are refused without a change', () => {
  const { region } = smallRegion({ pods: 4 });
  const pods = new PodTable(region);
  const g = pods.generation;
  assert.throws(() => pods.set(4, { state: 'ready', role: 'both', blockSize: 16, kvBlocks: 1, model: 0 }), /outside \[0, 4\)/);
  assert.throws(() => pods.set(-1, { state: 'ready', role: 'both', blockSize: 16, kvBlocks: 1, model: 0 }), RangeError);
  assert.throws(() => pods.set(0, { state: 'gone' as never, role: 'both', blockSize: 16, kvBlocks: 1, model: 0 }), /unknown pod state/);
  assert.throws(() => pods.set(0, { state: 'ready', role: 'both', blockSize: 1.5, kvBlocks: 1, model: 0 }), /blockSize/);
  assert.throws(() => pods.setState(9, 'down'), RangeError);
  assert.equal(pods.state(9), undefined);
  assert.equal(pods.get(9), undefined);
  // The kernel refuses the same on its own (other threads may call it without the view's checks).
  const base = region.base('TABLE_PODS');
  assert.equal(region.fn<(...a: number[]) => number>('podsSet')(base, 4, 1, 0, 16, 1, 0), -1);
  assert.equal(region.fn<(...a: number[]) => number>('podsSet')(base, 0, 9, 0, 16, 1, 0), -1);
  assert.equal(pods.generation, g);
});

test('release ends a row\'s lease: absent, fields zero, lease bumped; set and setState never move it', () => {
  const { region } = smallRegion({ pods: 4 });
  const pods = new PodTable(region);
  assert.equal(pods.lease(1), 0);
  pods.set(1, { state: 'ready', role: 'decode', blockSize: 16, kvBlocks: 100, model: 2 });
  pods.setState(1, 'down');
  pods.remove(1);
  assert.equal(pods.lease(1), 0, 'down, absent and back: the same backend keeps its lease');
  pods.set(1, { state: 'ready', role: 'decode', blockSize: 16, kvBlocks: 100, model: 2 });
  const g = pods.generation;
  assert.equal(pods.release(1), 1);
  assert.equal(pods.get(1), undefined);
  assert.equal(pods.state(1), undefined);
  assert.equal(pods.generation, g + 1, 'a release is a change like any other');
  pods.set(1, { state: 'ready', role: 'both', blockSize: 32, kvBlocks: 7, model: 0 });
  assert.deepEqual(pods.get(1), { state: 'ready', role: 'both', blockSize: 32, kvBlocks: 7, model: 0, generation: 6, lease: 1 });
  assert.equal(pods.release(1), 2);
  assert.equal(pods.release(1), 3, 'releasing an absent row still moves its lease');
  assert.equal(pods.lease(0), 0, 'other rows untouched');
  assert.throws(() => pods.release(4), RangeError);
  assert.throws(() => pods.lease(-1), RangeError);
  // The kernel refuses out-of-range rows on its own, and reads their lease as 0.
  const base = region.base('TABLE_PODS');
  assert.equal(region.fn<(...a: number[]) => number>('podsRelease')(base, 4), -1);
  assert.equal(region.fn<(...a: number[]) => number>('podsLease')(base, 4), 0);
  // The lease sits in the row's last word, which podsGet's copy includes.
  assert.equal(region.const('PODS_F_LEASE') + 4, region.const('PODS_RECORD_BYTES'));
});
