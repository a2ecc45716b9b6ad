import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryStore } from '../../src/store/memory-store.js';
import { contractSuite, value, CTX } from './contract.js';

contractSuite('memory', async () => new MemoryStore());

test('memory: sessions end after their TTL of inactivity; every write refreshes it, a load does not', async () => {
  let now = 0;
  const s = new MemoryStore({ sessionTtlMs: 1000, clock: () => now });
  value(await s.bind('s1', 'b1'));
  now = 900;
  value(await s.addService('s1', { serviceMs: 5 }));
  now = 1800;
  assert.equal(value(await s.load('s1'))?.attainedMs, 5, 'refreshed at 900');
  now = 1900;
  assert.equal(value(await s.load('s1')), null);
  assert.equal(s.stats().expired, 1);
  assert.equal(value(await s.bind('s1', 'b2')).session.host, 'b2', 'an expired session is new again');
});

test('memory: contexts end after their TTL', async () => {
  let now = 0;
  const s = new MemoryStore({ clock: () => now });
  value(await s.createContext('c', CTX, 2));
  now = 1500;
  assert.equal(value(await s.getContext('c'))?.ttlMs, 500);
  now = 2000;
  assert.equal(value(await s.getContext('c')), null);
  assert.equal(value(await s.createContext('c', CTX, 2)), true, 'the id is free again');
});

test('memory: bounded: at capacity the oldest write goes, and is counted', async () => {
  let now = 0;
  const s = new MemoryStore({ maxSessions: 3, maxContexts: 2, maxResponses: 2, sessionTtlMs: 1_000_000, clock: () => now });
  for (const id of ['a', 'b', 'c']) { value(await s.bind(id, 'b1')); now++; }
  value(await s.addService('a', { serviceMs: 1 })); // a is now the newest
  value(await s.bind('d', 'b1'));
  assert.equal(value(await s.load('b')), null, 'b was the oldest write');
  for (const id of ['a', 'c', 'd']) assert.notEqual(value(await s.load(id)), null, id);
  for (const id of ['x', 'y', 'z']) value(await s.createContext(id, CTX, 100));
  assert.equal(value(await s.getContext('x')), null);
  for (const id of ['r1', 'r2', 'r3']) value(await s.setResponseOrigin(id, { backendId: 'b1', owner: 'anonymous' }, 100));
  assert.equal(value(await s.getResponseOrigin('r1')), null, 'the oldest response origin went');
  const st = s.stats();
  assert.deepEqual([st.sessions, st.contexts, st.responses, st.evicted, st.kind, st.state], [3, 2, 2, 3, 'memory', 'up']);
});

test('memory: expired entries at the front are swept by writes, without reads', async () => {
  let now = 0;
  const s = new MemoryStore({ sessionTtlMs: 1000, clock: () => now });
  for (let i = 0; i < 5; i++) value(await s.bind(`s${i}`, 'b1'));
  now = 5000;
  value(await s.bind('fresh', 'b1'));
  assert.deepEqual([s.stats().sessions, s.stats().expired], [1, 5]);
});

test('memory: records handed out are copies', async () => {
  const s = new MemoryStore();
  const r = value(await s.bind('s1', 'b1'));
  r.session.host = 'mutated';
  r.session.attainedMs = 99;
  assert.equal(value(await s.load('s1'))?.host, 'b1');
  assert.equal(value(await s.load('s1'))?.attainedMs, 0);
});
