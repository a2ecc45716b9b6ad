// threads/batched-port.ts over a real MessageChannel: what one turn posts arrives as one batch in order; a burst
// larger than the bound goes as full batches at once, none lost or reordered; later turns make later batches.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import { setImmediate as turn } from 'node:timers/promises';
import { BatchedPort } from '../../src/threads/batched-port.js';

function channel (t: TestContext, bound?: number) {
  const { port1, port2 } = new MessageChannel();
  const batches: number[][] = [];
  port2.on('message', (b: number[]) => batches.push(b));
  // Closed however the test ends: an open port would keep the test's process alive.
  t.after(() => { port1.close(); port2.close(); });
  return { out: new BatchedPort<number>(port1, bound), batches };
}

/** Until `n` messages arrived. */
async function received (batches: number[][], n: number): Promise<void> {
  while (batches.flat().length < n) await turn();
}

test('what one turn posts goes as one message, in the order posted', async (t) => {
  const { out, batches } = channel(t);
  for (let i = 0; i < 100; i++) out.post(i);
  assert.equal(out.queued, 100);
  await received(batches, 100);
  assert.deepEqual(batches, [Array.from({ length: 100 }, (_, i) => i)]);
});

test('a burst past the bound in one tick goes as full batches at once: nothing lost, nothing reordered', async (t) => {
  const { out, batches } = channel(t, 16);
  for (let i = 0; i < 1000; i++) {
    out.post(i);
    assert.ok(out.queued < 16, 'the queue never holds a full batch');
  }
  await received(batches, 1000);
  assert.deepEqual(batches.flat(), Array.from({ length: 1000 }, (_, i) => i));
  assert.equal(batches.length, Math.ceil(1000 / 16));
  assert.ok(batches.slice(0, -1).every((b) => b.length === 16));
});

test('turns make batches of their own; flush sends at once; an empty flush sends nothing', async (t) => {
  const { out, batches } = channel(t);
  out.flush();
  out.post(1);
  out.post(2);
  await turn();
  out.post(3);
  out.flush();
  out.post(4);
  await received(batches, 4);
  await turn();
  assert.deepEqual(batches, [[1, 2], [3], [4]]);
  assert.throws(() => new BatchedPort<number>({ postMessage () {} }, 0), RangeError);
});

test('a record posted in one call is never split between batches, even past the bound', async (t) => {
  const { out, batches } = channel(t, 4);
  out.postRecord([1, 2, 3]);
  out.postRecord([4, 5, 6, 7, 8]);
  out.post(9);
  await received(batches, 9);
  assert.deepEqual(batches, [[1, 2, 3, 4, 5, 6, 7, 8], [9]]);
});
