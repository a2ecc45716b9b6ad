import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { RingConsumer, RingProducer, opTime, type RingOp } from '../../src/core/ring.js';
import { ReferenceRing } from '../../src/core/reference/ring.js';
import { PodTable } from '../../src/core/pod-table.js';
import { smallRegion } from './fixtures/small-region.js';

const u64 = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n });
const timeBits = (t: number) => new BigUint64Array(new Float64Array([t]).buffer)[0];

type Op =
  | { t: 'push'; op: RingOp }
  | { t: 'keys'; opcode: number; pod: number; keys: bigint[]; time: number; first: number; lease: number }
  | { t: 'pop'; max: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ t: fc.constant('push' as const), op: fc.record({ opcode: fc.nat(0xFFFFFFFF), pod: fc.nat(0xFFFFFFFF), key: u64, a: u64, b: u64, lease: fc.nat(0xFFFFFFFF) }) }),
  fc.record({ t: fc.constant('keys' as const), opcode: fc.constantFrom(1, 2), pod: fc.nat(255), keys: fc.array(u64, { maxLength: 12 }), time: fc.double({ noNaN: true }), first: fc.nat(1000), lease: fc.nat(0xFFFFFFFF) }),
  fc.record({ t: fc.constant('pop' as const), max: fc.integer({ min: 1, max: 10 }) })
);

test('ring matches the reference queue on random single-thread sequences (wrap-around and full pushes included)', () => {
  const { region } = smallRegion({ recordRingOps: 8 });
  const init = region.fn<(b: number, c: number) => void>('ringInit');
  const base = region.base('TABLE_RECORD_RING');
  const producer = new RingProducer(region);
  const consumer = new RingConsumer(region);
  fc.assert(fc.property(fc.array(opArb, { minLength: 50, maxLength: 300 }), (ops) => {
    init(base, 8);
    const ref = new ReferenceRing(8);
    for (const o of ops) {
      if (o.t === 'push') {
        assert.equal(producer.push(o.op.opcode, o.op.pod, o.op.key, o.op.a, o.op.b, o.op.lease), ref.push({ ...o.op }));
      } else if (o.t === 'keys') {
        assert.equal(producer.pushKeys(o.opcode, o.pod, o.keys, o.time, o.first, o.lease), ref.pushKeys(o.opcode, o.pod, o.keys, timeBits(o.time), o.first, o.lease));
      } else {
        const n = consumer.pop(o.max);
        assert.deepEqual(Array.from({ length: n }, (_, i) => consumer.op(i)), ref.pop(o.max));
      }
      const st = consumer.stats();
      assert.deepEqual([st.size, st.dropped, st.popped], [ref.size, ref.dropped, ref.popped]);
    }
  }), { numRuns: 200 });
});

test('a full ring drops pushes and counts them; a bulk push keeps the ops that fit', () => {
  const { region } = smallRegion({ recordRingOps: 3 });   // rounded up to 4
  const p = new RingProducer(region);
  const c = new RingConsumer(region);
  const { assumed, touch } = p.layout.opcodes;
  assert.equal(p.stats().capacity, 4);
  for (let i = 0n; i < 4n; i++) assert.equal(p.push(touch, 1, i, 0n, 0n), true);
  assert.equal(p.push(touch, 1, 99n, 0n, 0n), false);
  assert.deepEqual([p.stats().size, p.stats().dropped], [4, 1]);
  assert.equal(c.pop(2), 2);
  assert.deepEqual([c.op(0).key, c.op(1).key], [0n, 1n]);
  assert.equal(p.pushKeys(assumed, 7, [10n, 11n, 12n, 13n, 14n], 1234.5, 20), 2);
  assert.equal(p.stats().dropped, 4);
  const seen: RingOp[] = [];
  assert.equal(c.drain((op) => seen.push(op)), 4);
  assert.deepEqual(seen.map((o) => o.key), [2n, 3n, 10n, 11n]);
  assert.deepEqual([seen[2].opcode, seen[2].pod, opTime(seen[2].a), seen[2].b, seen[3].b], [assumed, 7, 1234.5, 20n, 21n]);
  assert.equal(c.pop(), 0);
  assert.deepEqual(c.stats(), { capacity: 4, size: 0, dropped: 4, popped: 6 });
});

test('three producer threads and one consumer: every op is delivered once or counted dropped, in per-producer order', async (t) => {
  const { shared, region } = smallRegion({ recordRingOps: 64, scratchSlots: 8 });
  const PRODUCERS = 3;
  const PER = 60_000;
  const done = new Int32Array(new SharedArrayBuffer(4));
  const consumer = new RingConsumer(region);
  const results = Array.from({ length: PRODUCERS }, (_, id) => {
    const w = new Worker(new URL('./fixtures/ring-producer.js', import.meta.url), { workerData: { shared, id, count: PER, done } });
    return new Promise<{ dropped: number[] }>((resolve, reject) => {
      w.once('message', resolve);
      w.once('error', reject);
    }).finally(() => w.terminate());
  });
  const delivered = Array.from({ length: PRODUCERS }, () => new Uint8Array(PER));
  const last = new Array<number>(PRODUCERS).fill(-1);
  let outOfOrder = 0;
  let duplicates = 0;
  const take = () => {
    const n = consumer.pop();
    for (let i = 0; i < n; i++) {
      const { key } = consumer.op(i);
      const id = Number(key >> 32n);
      const seq = Number(key & 0xFFFFFFFFn);
      if (seq <= last[id]) outOfOrder++;
      last[id] = seq;
      if (delivered[id][seq]++) duplicates++;
    }
    return n;
  };
  // The consumer runs here, on its own thread, while the producers push; it yields now and then so the
  // producers' messages can arrive.
  while (Atomics.load(done, 0) < PRODUCERS) {
    for (let spin = 0; spin < 1000; spin++) take();
    await new Promise((r) => setImmediate(r));
  }
  while (take() > 0);
  const reports = await Promise.all(results);
  assert.equal(outOfOrder, 0, 'per-producer order broken');
  assert.equal(duplicates, 0, 'an op was delivered twice');
  let droppedTotal = 0;
  let deliveredTotal = 0;
  for (let id = 0; id < PRODUCERS; id++) {
    const dropped = new Set(reports[id].dropped);
    droppedTotal += dropped.size;
    for (let seq = 0; seq < PER; seq++) {
      const got = delivered[id][seq] === 1;
      deliveredTotal += got ? 1 : 0;
      if (got === dropped.has(seq)) assert.fail(`producer ${id} op ${seq}: ${got ? 'delivered and dropped' : 'neither delivered nor dropped'}`);
    }
  }
  const st = consumer.stats();
  assert.equal(deliveredTotal + droppedTotal, PRODUCERS * PER);
  assert.equal(st.dropped, droppedTotal);
  assert.equal(st.popped, deliveredTotal);
  assert.equal(st.size, 0);
  t.diagnostic(`delivered ${deliveredTotal}, dropped ${droppedTotal}`);
});

test('an op carries its pod row\'s lease: the one given, or the row\'s lease at the push', () => {
  const { region } = smallRegion({ recordRingOps: 8, pods: 4 });
  const p = new RingProducer(region);
  const c = new RingConsumer(region);
  const pods = new PodTable(region);
  const { assumed, forgetPod } = p.layout.opcodes;
  pods.release(1);
  pods.release(1);
  assert.equal(p.lease(1), 2);
  assert.equal(p.lease(9), 0, 'a row outside the pod table reads 0');
  p.push(forgetPod, 1, 0n, 0n, 0n);
  p.push(forgetPod, 1, 0n, 0n, 0n, 7);
  p.pushKeys(assumed, 1, [5n], 1.5);
  p.pushKeys(assumed, 1, [6n], 1.5, 0, 0xFFFFFFFF);
  assert.equal(c.pop(), 4);
  assert.deepEqual([0, 1, 2, 3].map((i) => c.op(i).lease), [2, 7, 2, 0xFFFFFFFF]);
  assert.equal(region.const('RING_OP_LEASE') + 8, region.const('RING_OP_BYTES'), 'the lease and the reserved word close the op');
});

test('a producer notifies only while the consumer waits, and the wait is woken by the push', async (t) => {
  const { region } = smallRegion({ recordRingOps: 64 });
  const producer = new RingProducer(region);
  const consumer = new RingConsumer(region);
  let notifies = 0;
  const notify = Atomics.notify;
  t.after(() => { Atomics.notify = notify; });
  Atomics.notify = ((a: Int32Array, i: number, c?: number) => { notifies++; return notify(a, i, c); }) as typeof Atomics.notify;

  for (let i = 0; i < 10; i++) assert.equal(producer.push(1, 0, BigInt(i), 0n, 0n), true);
  assert.equal(producer.pushKeys(1, 0, [1n, 2n, 3n], 0), 3);
  assert.equal(notifies, 0, 'no consumer waits: no notify');
  assert.equal(consumer.pop(), 13);

  // A wait on a tail that has already moved returns at once, and leaves the consumer awake.
  const stale = consumer.tail();
  producer.push(1, 0, 99n, 0n, 0n);
  assert.equal(await consumer.waitForOps(stale, 60_000), 'not-equal');
  assert.equal(consumer.pop(), 1);

  const waited = consumer.waitForOps(consumer.tail(), 60_000);
  producer.push(1, 0, 100n, 0n, 0n);
  assert.equal(notifies, 1, 'the consumer waits: the push notifies it');
  assert.equal(await waited, 'ok');
  producer.push(1, 0, 101n, 0n, 0n);
  assert.equal(notifies, 1, 'woken, the consumer no longer waits: no notify');
  assert.equal(consumer.pop(), 2);
});

test('a push of no keys does not wake a waiting consumer', async () => {
  const { region } = smallRegion({ recordRingOps: 64 });
  const producer = new RingProducer(region);
  const consumer = new RingConsumer(region);
  const waited = consumer.waitForOps(consumer.tail(), 50);
  assert.equal(producer.pushKeys(1, 0, [], 0), 0);
  // An async wait does not keep Node's loop alive: a timer does, until the wait times out.
  const alive = setTimeout(() => {}, 10_000);
  assert.equal(await waited, 'timed-out', 'nothing was pushed: the consumer sleeps on');
  clearTimeout(alive);
});
