import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { AdmissionHeap } from '../../src/core/heap.js';
import { ReferenceHeap } from '../../src/core/reference/heap.js';
import { smallRegion } from './fixtures/small-region.js';

const CAP = 16;

type Op =
  | { t: 'push'; job: number; p: number }
  | { t: 'pop' }
  | { t: 'peek' }
  | { t: 'change'; job: number; p: number }
  | { t: 'remove'; job: number }
  | { t: 'priority'; job: number };

// Few distinct priorities, so ties (FIFO order) are common; a job id past the capacity now and then.
const prio = fc.oneof(fc.constantFrom(0, 1, 2, 3, -1, Infinity), fc.double({ min: -1e6, max: 1e6, noNaN: true }));
const job = fc.integer({ min: 0, max: CAP + 1 });
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ t: fc.constant('push' as const), job, p: prio }), weight: 4 },
  { arbitrary: fc.constant({ t: 'pop' as const }), weight: 2 },
  fc.constant({ t: 'peek' as const }),
  fc.record({ t: fc.constant('change' as const), job, p: prio }),
  fc.record({ t: fc.constant('remove' as const), job }),
  fc.record({ t: fc.constant('priority' as const), job })
);

test('heap matches the reference on random operation sequences (ties, changes, removals, full pushes)', () => {
  const { region } = smallRegion({ heapJobs: CAP });
  const init = region.fn<(b: number, c: number) => void>('heapInit');
  const base = region.base('TABLE_HEAP');
  const heap = new AdmissionHeap(region);
  fc.assert(fc.property(fc.integer({ min: 1, max: CAP }), fc.array(opArb, { minLength: 50, maxLength: 400 }), (limit, ops) => {
    init(base, CAP);
    heap.limit = limit;
    const ref = new ReferenceHeap(CAP);
    ref.limit = limit;
    for (const op of ops) {
      switch (op.t) {
        case 'push': {
          const want = ref.push(op.job, op.p);
          if (want < 0) assert.throws(() => heap.push(op.job, op.p), RangeError);
          else assert.equal(heap.push(op.job, op.p), want === 1);
          break;
        }
        case 'pop': assert.equal(heap.popMin(), ref.popMin()); break;
        case 'peek': assert.equal(heap.peek(), ref.peek()); break;
        case 'change': assert.equal(heap.changePriority(op.job, op.p), ref.changePriority(op.job, op.p) === 1); break;
        case 'remove': assert.equal(heap.remove(op.job), ref.remove(op.job) === 1); break;
        case 'priority': assert.equal(heap.priority(op.job), ref.priority(op.job)); break;
      }
      assert.equal(heap.size, ref.size);
    }
    assert.deepEqual(heap.stats(), { capacity: CAP, limit, size: ref.size, pushed: ref.pushed, rejected: ref.rejected });
    const drained: number[] = [];
    for (let j = heap.popMin(); j >= 0; j = heap.popMin()) drained.push(j);
    const want: number[] = [];
    for (let j = ref.popMin(); j >= 0; j = ref.popMin()) want.push(j);
    assert.deepEqual(drained, want);
  }), { numRuns: 200 });
});

test('jobs leave by priority, equal priorities in push order, and changePriority keeps arrival order among equals', () => {
  const { region } = smallRegion({ heapJobs: CAP });
  const h = new AdmissionHeap(region);
  for (const [j, p] of [[5, 2], [3, 1], [7, 2], [1, 1], [9, 0], [2, 2]]) h.push(j, p);
  assert.equal(h.peek(), 9);
  // 7 is promoted to 1: it arrived before 1 did, so it now leaves between 3 and 1.
  assert.equal(h.changePriority(7, 1), true);
  assert.equal(h.remove(5), true);
  assert.equal(h.remove(5), false);
  assert.equal(h.priority(7), 1);
  assert.equal(h.priority(5), undefined);
  const order: number[] = [];
  for (let j = h.popMin(); j >= 0; j = h.popMin()) order.push(j);
  assert.deepEqual(order, [9, 3, 7, 1, 2]);
  assert.equal(h.popMin(), -1);
  assert.equal(h.peek(), -1);
  assert.equal(h.changePriority(3, 0), false, 'a job no longer queued cannot change');
});

test('a push while the limit of jobs wait is refused and counted; bad input throws', () => {
  const { region } = smallRegion({ heapJobs: 8 });
  const h = new AdmissionHeap(region);
  h.limit = 3;
  for (let j = 0; j < 3; j++) assert.equal(h.push(j, j), true);
  assert.equal(h.push(3, -5), false, 'refused at the limit, even with the best priority');
  assert.equal(h.priority(3), undefined);
  assert.deepEqual(h.stats(), { capacity: 8, limit: 3, size: 3, pushed: 3, rejected: 1 });
  assert.equal(h.popMin(), 0);
  assert.equal(h.push(3, -5), true, 'room again after a pop');
  assert.equal(h.peek(), 3);
  h.limit = 100;
  assert.equal(h.limit, 8, 'the limit is clamped to the capacity');
  assert.throws(() => h.push(8, 0), /\[0, 8\)/);
  assert.throws(() => h.push(1, 0), RangeError, 'a job queued twice');
  assert.throws(() => h.push(4, NaN), RangeError);
  assert.throws(() => h.changePriority(1, NaN), RangeError);
  assert.throws(() => { h.limit = -1; }, RangeError);
});
