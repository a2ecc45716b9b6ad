import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { AdmissionQueue, ADMISSION_DEFAULTS, type AdmissionOptions, type SchedulerKind } from '../../src/core/admission.js';
import { AdmissionHeap } from '../../src/core/heap.js';
import { smallRegion } from './fixtures/small-region.js';

function queue (kind: SchedulerKind = 'plas', o: Partial<AdmissionOptions> = {}, heapJobs = 16): AdmissionQueue<string> {
  const { region } = smallRegion({ heapJobs });
  return new AdmissionQueue(new AdmissionHeap(region), { ...ADMISSION_DEFAULTS, quantumMs: 1000, levels: 4, ...o, kind });
}

const drain = (q: AdmissionQueue<string>): string[] => {
  const out: string[] = [];
  for (let j = q.pop(); j !== null; j = q.pop()) {
    out.push(j.payload);
    q.remove(j);
  }
  return out;
};

test('levels: [0, q) is level 0, then doubling ranges, the last level takes the rest', () => {
  const q = queue('plas', { quantumMs: 1000, levels: 4 });
  assert.deepEqual([0, 999, 1000, 1999, 2000, 3999, 4000, 1e9].map((v) => q.levelOf(v)), [0, 0, 1, 1, 2, 2, 3, 3]);
});

test('jobs leave by class, then level, first-come-first-served inside a level', () => {
  const q = queue();
  q.push('a-lvl1', 1, 1500, 0);
  q.push('b-lvl0', 1, 10, 1);
  q.push('c-lvl1', 1, 1900, 2);
  q.push('d-high-lvl3', 0, 1e6, 3);
  q.push('e-lvl0', 1, 999, 4);
  q.push('f-low', 2, 0, 5);
  assert.deepEqual(drain(q), ['d-high-lvl3', 'b-lvl0', 'e-lvl0', 'a-lvl1', 'c-lvl1', 'f-low']);
});

test('vtc orders by the counter itself, not by level', () => {
  const q = queue('vtc');
  q.push('u300', 1, 300, 0);
  q.push('u100', 1, 100, 1);
  q.push('u200', 1, 200, 2);
  assert.deepEqual(drain(q), ['u100', 'u200', 'u300']);
});

test('the bound: at maxQueued a push is refused and counted; a removed job frees its place', () => {
  const q = queue('fcfs', { maxQueued: 3 });
  const jobs = [q.push('a', 1, 0, 0), q.push('b', 1, 0, 0), q.push('c', 1, 0, 0)];
  assert.equal(q.push('d', 1, 0, 0), null);
  assert.equal(q.stats().rejected, 1);
  assert.equal(q.remove(jobs[1]!), true);
  assert.equal(q.remove(jobs[1]!), false, 'twice is a no-op');
  assert.notEqual(q.push('e', 1, 0, 0), null);
  assert.deepEqual(drain(q), ['a', 'c', 'e']);
  assert.equal(queue('fcfs', { maxQueued: 1e6 }, 16).opts.maxQueued, 16, 'never more than the heap holds');
});

test('timeouts take the oldest jobs out, heap or parked, and only those', () => {
  const q = queue('fcfs', { queueTimeoutMs: 100 });
  q.push('old', 1, 0, 0);
  const parked = q.push('old-parked', 1, 0, 10)!;
  q.pop(); q.pop();
  // Both popped; park the second, put the first back by unparking (as a pod leaving would).
  q.park(parked, 3, null);
  q.push('young', 1, 0, 60);
  const out = q.timedOut(115).map((j) => j.payload);
  assert.deepEqual(out, ['old', 'old-parked']);
  assert.equal(q.size, 1);
  assert.equal(q.parkedCount, 0);
  assert.equal(q.stats().timedOut, 2);
});

test('anti-starvation: a job whose ratio reaches beta moves to level 0 of its class, keeping its arrival order', () => {
  const q = queue('plas', { beta: 2 });
  q.push('new-1', 1, 0, 0);
  const starved = q.push('long-session', 1, 5000, 1)!; // level 3
  q.push('new-2', 1, 0, 2);
  const ratio = (j: { value: number; enqueuedAt: number }, now: number): number => (now - j.enqueuedAt) / Math.max(j.value, 1);
  assert.equal(q.promoteStarved(5000, ratio), 0, 'waited 4999 ms on 5000 ms of service: ratio < 2');
  assert.equal(q.promoteStarved(10_001, ratio), 1);
  assert.equal(starved.level, 0);
  assert.equal(q.stats().promotions, 1);
  assert.equal(q.promoteStarved(20_000, ratio), 0, 'promoted once');
  assert.deepEqual(drain(q), ['new-1', 'long-session', 'new-2']);
});

test('parked jobs stay in key order on their pod and go back to the heap when the pod leaves', () => {
  const q = queue('plas');
  const a = q.push('a-lvl2', 1, 2500, 0)!;
  const b = q.push('b-lvl0', 1, 0, 1)!;
  const c = q.push('c-lvl2', 1, 2500, 2)!;
  for (let i = 0; i < 3; i++) q.pop();
  q.park(c, 1, 'pc');
  q.park(a, 1, 'pa');
  q.park(b, 1, 'pb');
  assert.equal(q.parkedHead(1)?.payload, 'b-lvl0');
  assert.equal(q.unparkAll(1), 3);
  assert.equal(q.parkedCount, 0);
  assert.equal(a.placement, null);
  assert.deepEqual(drain(q), ['b-lvl0', 'a-lvl2', 'c-lvl2']);
});

test('random operations keep the queue consistent with a model (size, order, bound)', () => {
  fc.assert(fc.property(fc.array(fc.oneof(
    fc.record({ t: fc.constant('push' as const), c: fc.integer({ min: 0, max: 2 }), v: fc.integer({ min: 0, max: 20_000 }) }),
    fc.record({ t: fc.constant('pop' as const) }),
    fc.record({ t: fc.constant('remove' as const), i: fc.nat() })
  ), { maxLength: 80 }), (ops) => {
    const q = queue('plas', { maxQueued: 8 });
    const live: Array<{ job: NonNullable<ReturnType<typeof q.push>>; key: [number, number, number] }> = [];
    let seq = 0;
    for (const op of ops) {
      if (op.t === 'push') {
        const job = q.push(`j${seq}`, op.c, op.v, seq);
        if (live.length >= 8) assert.equal(job, null);
        else live.push({ job: job!, key: [op.c, q.levelOf(op.v), seq] });
        seq++;
      } else if (op.t === 'pop') {
        const j = q.pop();
        if (live.length === 0) { assert.equal(j, null); continue; }
        live.sort((x, y) => x.key[0] - y.key[0] || x.key[1] - y.key[1] || x.key[2] - y.key[2]);
        assert.equal(j, live[0].job);
        q.remove(j!);
        live.shift();
      } else if (live.length > 0) {
        const [x] = live.splice(op.i % live.length, 1);
        assert.equal(q.remove(x.job), true);
      }
      assert.equal(q.size, live.length);
    }
  }));
});
