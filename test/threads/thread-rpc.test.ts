// src/threads/ against a real worker thread (counter-thread.ts): requests answered under their ids and in
// order with notes, errors carried as {code, message} and rebuilt on this side, a thread's end rejecting what
// waits on it, and stop.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ThreadClient } from '../../src/threads/thread-client.js';
import { ThreadError, threadError } from '../../src/threads/outcome.js';
import type { CounterProtocol } from './counter-thread.js';

const URL_ = new URL('./counter-thread.js', import.meta.url);

function start (opts: { toError?: (e: { code: string; message: string }) => Error } = {}) {
  const events: Array<CounterProtocol['event']> = [];
  const failures: Error[] = [];
  const client = new ThreadClient<CounterProtocol>(URL_, { start: 10 }, {
    name: 'counter thread', onEvent: (e) => events.push(e), onFailure: (e) => failures.push(e), ...opts
  });
  return { client, events, failures };
}

test('requests are answered under their ids, in order with the notes sent before them', async () => {
  const { client, failures } = start();
  const answers = Promise.all([client.call({ type: 'read' }), client.call({ type: 'add', n: 5 })]);
  client.note({ type: 'set', n: 100 });
  const after = client.call({ type: 'add', n: 1 });
  assert.deepEqual(await answers, [10, 15]);
  assert.equal(await after, 101);
  assert.equal(await client.stop({ type: 'stop' }), 101);
  assert.deepEqual(failures, [], 'a stop asked for is no failure');
});

test('a refusal reaches the caller as an error with its code; a bug too, and the thread reports it', async () => {
  const { client, events } = start();
  const refused = await client.call({ type: 'add', n: -1 }).catch((e: unknown) => e);
  assert.ok(refused instanceof ThreadError);
  assert.deepEqual([refused.code, refused.message], ['ERR_OUT_OF_RANGE', 'n must be at least 0, got -1']);
  const bug = await client.call({ type: 'bug' }).catch((e: unknown) => e);
  assert.ok(bug instanceof ThreadError);
  assert.deepEqual([bug.code, bug.message], ['EAR_ERR_INTERNAL', 'a bug']);
  // The thread goes on, and only the bug was reported (the refusal was an answer on purpose).
  assert.equal(await client.call({ type: 'read' }), 10);
  assert.deepEqual(events, [{ type: 'bug', message: 'a bug', in: 'bug' }]);
  await client.stop({ type: 'stop' });
});

test('the caller rebuilds errors with its own class', async () => {
  const { client } = start({ toError: (e) => e.code === 'ERR_OUT_OF_RANGE' ? new RangeError(e.message) : threadError(e) });
  await assert.rejects(client.call({ type: 'add', n: -2 }), (e: unknown) => e instanceof RangeError && /got -2/.test(e.message));
  await assert.rejects(client.call({ type: 'bug' }), (e: unknown) => e instanceof ThreadError);
  await client.stop({ type: 'stop' });
});

test('a thread that ends rejects the request waiting on it and every later one; stop then rejects', async () => {
  const { client, failures } = start();
  const read = client.call({ type: 'read' });
  const waiting = client.call({ type: 'exit' });
  assert.equal(await read, 10);
  await assert.rejects(waiting, /the counter thread has exited/);
  await assert.rejects(client.call({ type: 'read' }), /the counter thread has exited/);
  assert.equal(failures.length, 1);
  await assert.rejects(client.stop({ type: 'stop' }), /has exited/);
});

test('stop waits for the exit, once; afterwards requests reject', async () => {
  const { client } = start();
  const a = client.stop({ type: 'stop' });
  assert.equal(client.stop({ type: 'stop' }), a);
  assert.equal(await a, 10);
  await assert.rejects(client.call({ type: 'read' }), /has exited/);
});
