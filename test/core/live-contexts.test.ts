// LiveContexts: the sum of the last context of every session seen within the window, bounded in sessions.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { LiveContexts } from '../../src/core/live-contexts.js';

test('a session counts with its last context while it was seen within the window', () => {
  const live = new LiveContexts(1000);
  live.observe(1n, 500, 0);
  live.observe(2n, 300, 100);
  assert.equal(live.tokens(100), 800);
  live.observe(1n, 700, 600); // its later turn replaces its context and renews it
  assert.equal(live.tokens(600), 1000);
  assert.equal(live.tokens(1100), 1000, 'session 2 seen at 100 is still within 1000 ms at 1100');
  assert.equal(live.tokens(1101), 700, 'session 2 is gone; session 1, renewed at 600, stays');
  assert.equal(live.tokens(1601), 0);
  assert.equal(live.size, 0);
  live.observe(3n, -5, 2000); // a negative context counts as none
  assert.equal(live.tokens(2000), 0);
  assert.equal(live.size, 1);
});

test('at maxSessions the oldest session is dropped first, and its context leaves the sum', () => {
  const live = new LiveContexts(60_000, 2);
  live.observe(1n, 100, 0);
  live.observe(2n, 200, 1);
  live.observe(1n, 150, 2); // renews 1: 2 is now the oldest
  live.observe(3n, 400, 3);
  assert.equal(live.size, 2);
  assert.equal(live.tokens(3), 550);
  assert.throws(() => new LiveContexts(0), /window must be > 0/);
  assert.throws(() => new LiveContexts(10, 0), /maxSessions/);
});

test('the sum equals a recount of the sessions seen within the window (property)', () => {
  fc.assert(fc.property(fc.array(fc.tuple(fc.integer({ min: 0, max: 7 }), fc.integer({ min: 0, max: 100_000 }), fc.integer({ min: 0, max: 400 })), { maxLength: 200 }), (ops) => {
    const window = 1000;
    const live = new LiveContexts(window, 5);
    const last = new Map<number, [number, number]>();
    let now = 0;
    for (const [key, tokens, dt] of ops) {
      now += dt;
      live.observe(BigInt(key), tokens, now);
      last.delete(key);
      last.set(key, [now, tokens]);
      while (last.size > 5) last.delete(last.keys().next().value!);
      let want = 0;
      for (const [t, v] of last.values()) if (t >= now - window) want += v;
      assert.equal(live.tokens(now), want);
    }
  }));
});
