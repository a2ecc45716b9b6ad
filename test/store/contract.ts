// The SessionStore contract, one suite for every implementation (memory-store.test.ts, redis-store.test.ts).
// `make` gives a fresh store whose sessions and contexts are its own (a new prefix for redis).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { ContextRecord, SessionStore, StoreReply } from '../../src/store/session-store.js';

export function value<T> (r: StoreReply<T>): T {
  if (!r.ok) assert.fail(`store answered degraded (${r.reason})`);
  return r.value;
}

export const CTX: ContextRecord = { backendId: 'b1', sessionId: 's1', model: 'm', tokens: 1234, createdAt: 1000 };

export function contractSuite (name: string, make: () => Promise<SessionStore>): void {
  const t = (what: string, fn: (s: SessionStore) => Promise<void>): void => {
    test(`${name}: ${what}`, async () => {
      const s = await make();
      try {
        await fn(s);
      } finally {
        await s.close();
      }
    });
  };

  t('an unknown session loads as null; the store is up', async (s) => {
    assert.equal(s.state, 'up');
    assert.equal(await s.whenUp(10), true);
    assert.equal(value(await s.load('nobody')), null);
  });

  t('bind: the first writer wins, a later one gets its binding back', async (s) => {
    const a = value(await s.bind('s1', 'b1'));
    assert.equal(a.won, true);
    assert.equal(a.session.host, 'b1');
    assert.equal(a.session.version, 1);
    assert.equal(a.session.migrations, 0);
    assert.equal(a.session.lastMigration, -Infinity);
    const b = value(await s.bind('s1', 'b2'));
    assert.equal(b.won, false);
    assert.equal(b.session.host, 'b1');
    assert.equal(b.session.version, 1, 'a lost bind writes nothing');
    assert.deepEqual(value(await s.load('s1')), a.session);
  });

  t('bind seeds the figures of a session it creates, and only then', async (s) => {
    const a = value(await s.bind('s1', 'b1', { attainedMs: 500, criticalPathMs: 700, contextTokens: 42 }));
    assert.deepEqual([a.session.attainedMs, a.session.criticalPathMs, a.session.contextTokens], [500, 700, 42]);
    value(await s.casHost('s1', 'b1', null, 1, { migration: false }));
    const b = value(await s.bind('s1', 'b2', { attainedMs: 1, criticalPathMs: 1, contextTokens: 1 }));
    assert.equal(b.won, true, 'an unbound session is bound by the next bind');
    assert.equal(b.session.host, 'b2');
    assert.deepEqual([b.session.attainedMs, b.session.criticalPathMs, b.session.contextTokens], [500, 700, 42]);
  });

  t('addService adds service, keeps the largest critical path, replaces context tokens', async (s) => {
    value(await s.bind('s1', 'b1'));
    let r = value(await s.addService('s1', { serviceMs: 100, criticalPathMs: 300, contextTokens: 1000 }));
    assert.deepEqual([r.attainedMs, r.criticalPathMs, r.contextTokens, r.host, r.version], [100, 300, 1000, 'b1', 2]);
    r = value(await s.addService('s1', { serviceMs: 50.5, criticalPathMs: 200, contextTokens: 900 }));
    assert.deepEqual([r.attainedMs, r.criticalPathMs, r.contextTokens, r.version], [150.5, 300, 900, 3]);
    r = value(await s.addService('s1', { serviceMs: 0, criticalPathMs: 400 }));
    assert.deepEqual([r.attainedMs, r.criticalPathMs, r.contextTokens], [150.5, 400, 900]);
    r = value(await s.addService('s2', { serviceMs: 7 }));
    assert.deepEqual(r, { host: null, attainedMs: 7, criticalPathMs: 0, contextTokens: 0, lastMigration: -Infinity, migrations: 0, version: 1 },
      'a completion of a session the store does not know starts it unbound');
    assert.deepEqual(value(await s.load('s1')), { host: 'b1', attainedMs: 150.5, criticalPathMs: 400, contextTokens: 900, lastMigration: -Infinity, migrations: 0, version: 4 });
  });

  t('casHost: wins only from the expected host; a migration records its time', async (s) => {
    value(await s.bind('s1', 'b1'));
    const lost = value(await s.casHost('s1', 'b9', 'b2', 5000));
    assert.equal(lost.won, false);
    assert.equal(lost.session?.host, 'b1');
    const won = value(await s.casHost('s1', 'b1', 'b2', 5000));
    assert.equal(won.won, true);
    assert.deepEqual([won.session?.host, won.session?.migrations, won.session?.lastMigration, won.session?.version], ['b2', 1, 5000, 2]);
    const again = value(await s.casHost('s1', 'b1', 'b3', 6000));
    assert.equal(again.won, false, 'the second move from the same host loses');
    const retry = value(await s.casHost('s1', 'b2', 'b3', 7000, { migration: false }));
    assert.deepEqual([retry.won, retry.session?.host, retry.session?.migrations, retry.session?.lastMigration], [true, 'b3', 1, 5000],
      'a rebind that is not a migration leaves the migration figures');
    const same = value(await s.casHost('s1', 'b3', 'b3', 8000));
    assert.deepEqual([same.won, same.session?.version], [true, 3], 'a change to the same host wins and writes nothing');
  });

  t('casHost with null: from unbound (absent or unbound sessions) and to unbound', async (s) => {
    const absent = value(await s.casHost('s1', null, null, 1));
    assert.deepEqual(absent, { won: true, session: null });
    assert.equal(value(await s.load('s1')), null, 'an unbind of an absent session creates nothing');
    const bound = value(await s.casHost('s1', null, 'b1', 1));
    assert.deepEqual([bound.won, bound.session?.host, bound.session?.migrations], [true, 'b1', 0], 'unbound → host is no migration');
    assert.equal(value(await s.casHost('s1', null, 'b2', 1)).won, false);
    const unbound = value(await s.casHost('s1', 'b1', null, 2));
    assert.deepEqual([unbound.won, unbound.session?.host, unbound.session?.migrations], [true, null, 0]);
    const lost = value(await s.casHost('nobody', 'b1', 'b2', 3));
    assert.deepEqual(lost, { won: false, session: null });
  });

  t('contexts: create once (NX), read back with their time left, delete', async (s) => {
    assert.equal(value(await s.createContext('c1', CTX, 60)), true);
    assert.equal(value(await s.createContext('c1', { ...CTX, tokens: 1 }, 60)), false, 'an id already taken keeps its context');
    const got = value(await s.getContext('c1'));
    assert.deepEqual(got?.record, CTX);
    assert.ok(got !== null && got.ttlMs > 55_000 && got.ttlMs <= 60_000, `ttlMs ${got?.ttlMs}`);
    assert.equal(value(await s.getContext('c2')), null);
    assert.equal(value(await s.deleteContext('c1')), true);
    assert.equal(value(await s.deleteContext('c1')), false);
    assert.equal(value(await s.getContext('c1')), null);
    assert.equal(value(await s.createContext('c3', { backendId: null, sessionId: null, model: 'm', tokens: 0, createdAt: 0 }, 1)), true);
  });

  t('response origins: written with their owner, read back, replaced by a later write; an unknown id is null', async (s) => {
    assert.equal(value(await s.setResponseOrigin('resp_1', { backendId: 'b1', owner: 'key:a' }, 60)), true);
    assert.deepEqual(value(await s.getResponseOrigin('resp_1')), { backendId: 'b1', owner: 'key:a' });
    assert.equal(value(await s.setResponseOrigin('resp_1', { backendId: 'b2', owner: 'anonymous' }, 60)), true);
    assert.deepEqual(value(await s.getResponseOrigin('resp_1')), { backendId: 'b2', owner: 'anonymous' });
    assert.equal(value(await s.getResponseOrigin('resp_2')), null);
    await assert.rejects(s.setResponseOrigin('resp_3', { backendId: '', owner: 'key:a' }, 60), RangeError);
    await assert.rejects(s.setResponseOrigin('resp_3', { backendId: 'b1', owner: '' }, 60), RangeError);
    await assert.rejects(s.setResponseOrigin('resp_3', { backendId: 'b1', owner: 'key:a' }, 0), RangeError);
    await assert.rejects(s.getResponseOrigin(''), RangeError);
  });

  t('ids over 256 bytes are keyed by their hash, so each is still its own', async (s) => {
    const long1 = 'é'.repeat(200) + 'a';
    const long2 = 'é'.repeat(200) + 'b';
    value(await s.bind(long1, 'b1'));
    value(await s.bind(long2, 'b2'));
    assert.equal(value(await s.load(long1))?.host, 'b1');
    assert.equal(value(await s.load(long2))?.host, 'b2');
    assert.equal(value(await s.createContext('x'.repeat(1000), CTX, 60)), true);
    assert.deepEqual(value(await s.getContext('x'.repeat(1000)))?.record, CTX);
  });

  t('invalid arguments reject with RangeError (a caller bug), never a degraded answer', async (s) => {
    await assert.rejects(s.load(''), RangeError);
    await assert.rejects(s.bind('s1', ''), RangeError);
    await assert.rejects(s.bind('s1', 'b'.repeat(300)), RangeError);
    await assert.rejects(s.addService('s1', { serviceMs: -1 }), RangeError);
    await assert.rejects(s.addService('s1', { serviceMs: Number.NaN }), RangeError);
    await assert.rejects(s.addService('s1', { serviceMs: 1, contextTokens: 1.5 }), RangeError);
    await assert.rejects(s.casHost('s1', 'b1', 'b2', Number.POSITIVE_INFINITY), RangeError);
    await assert.rejects(s.createContext('c', CTX, 0), RangeError);
    await assert.rejects(s.createContext('c', { ...CTX, model: 'x'.repeat(5000) }, 10), RangeError);
    await assert.rejects(s.createContext('c', { ...CTX, tokens: -1 }, 10), RangeError);
    assert.equal(s.stats().degraded, 0);
  });
}
