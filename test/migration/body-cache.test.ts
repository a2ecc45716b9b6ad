// The migration thread's body cache: bounded in bytes, least recently used out first, and both ways a body can
// be dropped are counted.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BodyCache } from '../../src/migration/body-cache.js';

const entry = (n: number, id = 's') => ({ sessionId: id, model: 'm', path: '/v1/chat/completions', body: new Uint8Array(n) });

test('body cache: stays within its bytes, drops the least recently used first, counts it', () => {
  const c = new BodyCache(4096);
  for (let k = 1n; k <= 3n; k++) c.set(k, entry(1000));
  assert.equal(c.stats().entries, 3);
  assert.ok(c.get(1n) !== undefined); // 1 is now the most recent: 2 goes first
  c.set(4n, entry(1000));
  assert.equal(c.has(2n), false);
  assert.deepEqual([1n, 3n, 4n].map((k) => c.has(k)), [true, true, true]);
  const s = c.stats();
  assert.equal(s.evicted, 1);
  assert.ok(s.bytes <= s.maxBytes, `${s.bytes} > ${s.maxBytes}`);
  // One large body pushes out as many as it needs.
  c.set(5n, entry(2500)); // with 4 (and each entry's overhead) just within the bound
  assert.deepEqual([1n, 3n, 4n, 5n].map((k) => c.has(k)), [false, false, true, true]);
  assert.equal(c.stats().evicted, 3);
  assert.ok(c.stats().bytes <= 4096);
});

test('body cache: a newer body replaces the session\'s older one; one above the whole bound is never kept', () => {
  const c = new BodyCache(4096);
  c.set(1n, entry(1000));
  const before = c.stats().bytes;
  c.set(1n, entry(2000));
  assert.equal(c.stats().entries, 1);
  assert.equal(c.stats().bytes, before + 1000);
  assert.equal(c.get(1n)!.body.byteLength, 2000);
  c.set(2n, entry(5000));
  assert.equal(c.has(2n), false);
  assert.equal(c.stats().tooLarge, 1);
  // A too-large replacement leaves the session without a body rather than with a stale one.
  c.set(1n, entry(5000));
  assert.equal(c.has(1n), false);
  assert.equal(c.stats().bytes, 0);
  assert.throws(() => new BodyCache(0), RangeError);
});
