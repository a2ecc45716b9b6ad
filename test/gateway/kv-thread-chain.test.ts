// The main thread's chain to the kv-events thread: backend lists and purges in order, rows released while a
// purge runs batched into the next message, a row never purged before a list that still follows it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KvThreadChain, type KvChainTarget } from '../../src/gateway/kv-thread-chain.js';
import type { KvBackendSpec } from '../../src/kvevents/kv-events-thread.js';

/** A thread that records what it was sent, and answers each message when the test lets it. */
class FakeThread implements KvChainTarget {
  readonly log: string[] = [];
  readonly #gates: Array<() => void> = [];
  fail: Error | null = null;
  async setBackends (backends: readonly KvBackendSpec[]): Promise<void> {
    this.log.push(`list ${backends.map((b) => b.index).join(',')}`);
    await new Promise<void>((resolve) => this.#gates.push(resolve));
  }

  async purgePods (rows: readonly number[]): Promise<number> {
    this.log.push(`purge ${rows.join(',')}`);
    await new Promise<void>((resolve) => this.#gates.push(resolve));
    if (this.fail !== null) throw this.fail;
    return rows.length;
  }

  async engineRestarted (row: number, backendId: string): Promise<void> {
    this.log.push(`restarted ${row} ${backendId}`);
    await new Promise<void>((resolve) => this.#gates.push(resolve));
  }

  /** Answers the message in flight; false if none is. */
  async step (): Promise<boolean> {
    for (let i = 0; i < 5 && this.#gates.length === 0; i++) await new Promise((r) => setImmediate(r));
    const g = this.#gates.shift();
    g?.();
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    return g !== undefined;
  }
}

const spec = (index: number): KvBackendSpec => ({ index, id: `b${index}`, model: 'm', kvEvents: 'tcp://127.0.0.1:1', replay: null, topic: '' });

test('rows released while a purge runs go together in the next message; each row settles with its batch', async () => {
  const t = new FakeThread();
  const chain = new KvThreadChain(t, 256);
  const done: number[] = [];
  const purge = (row: number): Promise<void> => chain.purge(row).then(() => { done.push(row); });
  const first = purge(3);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(t.log, ['purge 3'], 'sent at once: the chain was free');
  const rest = [7, 1, 200, 42].map(purge);
  assert.equal(chain.pending, 5);
  await t.step();
  await first;
  assert.deepEqual(done, [3]);
  assert.deepEqual(t.log, ['purge 3', 'purge 7,1,200,42'], 'one message for the four released meanwhile');
  assert.deepEqual(done, [3], 'not before their batch is done');
  await t.step();
  await Promise.all(rest);
  assert.deepEqual(done.sort((a, b) => a - b), [1, 3, 7, 42, 200]);
  assert.deepEqual(chain.stats, { purgedRows: 5, batches: 2, largestBatch: 4, restartNotes: 0 });
  assert.equal(chain.pending, 0);
  assert.equal(await t.step(), false, 'nothing more was sent');
});

test('a row is never purged before a list queued after its batch that still follows it', async () => {
  const t = new FakeThread();
  const chain = new KvThreadChain(t, 256);
  chain.setBackends([spec(1), spec(2)]);
  const p1 = chain.purge(5); // batch A, behind the first list
  chain.setBackends([spec(2)]); // computed after backend 1 retired: does not list row 1
  const p2 = chain.purge(1); // may join A: no later list follows row 1
  chain.setBackends([spec(9)]); // (a list computed before backend 9 retired, queued late)
  const p3 = chain.purge(9); // listed after A: a new batch behind that list
  const p4 = chain.purge(4); // joins the open batch, the one of row 9
  for (let i = 0; i < 5; i++) await t.step();
  await Promise.all([p1, p2, p3, p4]);
  assert.deepEqual(t.log, ['list 1,2', 'purge 5,1', 'list 2', 'list 9', 'purge 9,4']);
  await chain.idle();
});

test('bad or repeated rows are refused at once; a failed batch rejects its rows and the chain goes on', async () => {
  const t = new FakeThread();
  const chain = new KvThreadChain(t, 8);
  await assert.rejects(chain.purge(8), RangeError);
  await assert.rejects(chain.purge(-1), RangeError);
  await assert.rejects(chain.purge(1.5), RangeError);
  t.fail = new Error('the kv-events thread has exited');
  const a = chain.purge(2);
  const b = chain.purge(3);
  await assert.rejects(chain.purge(2), /already waiting/);
  const failed = Promise.all([assert.rejects(a, /exited/), assert.rejects(b, /exited/)]);
  await t.step();
  await failed;
  assert.equal(chain.pending, 0, 'the rows can be queued again');
  t.fail = null;
  const c = chain.purge(2);
  await t.step();
  await c;
  assert.deepEqual(t.log, ['purge 2,3', 'purge 2']);
  assert.throws(() => new KvThreadChain(t, 0), RangeError);
});

test('an engine restart note never passes a purge of its row, and a row waiting for its purge gets none', async () => {
  const t = new FakeThread();
  const chain = new KvThreadChain(t, 16);
  const p5 = chain.purge(5); // batch A, sent at once
  await new Promise((r) => setImmediate(r));
  const p6 = chain.purge(6); // batch B, open
  chain.engineRestarted(6, 'b6'); // waiting for its purge: no note
  chain.engineRestarted(7, 'b7'); // noted behind B
  const p7 = chain.purge(7); // noted after B opened: a new batch behind the note
  const p8 = chain.purge(8); // joins that batch
  for (let i = 0; i < 5; i++) await t.step();
  await Promise.all([p5, p6, p7, p8]);
  assert.deepEqual(t.log, ['purge 5', 'purge 6', 'restarted 7 b7', 'purge 7,8']);
  assert.equal(chain.stats.restartNotes, 1);
  assert.throws(() => chain.engineRestarted(16, 'b16'), RangeError);
  await chain.idle();
});
