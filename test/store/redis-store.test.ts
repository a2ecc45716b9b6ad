// The redis store against a real redis-server (skipped, with the reason, when the binary is not on PATH).
// Two RedisStore instances on one server stand for two `ear serve` replicas.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { RedisStore, type RedisStoreOptions } from '../../src/store/redis-store.js';
import type { StoreLogger, StoreReply } from '../../src/store/session-store.js';
import { contractSuite, value, CTX } from './contract.js';
import { RedisServer, redisServerMissing } from './redis-server.js';
import { until } from '../fixtures/wait.js';

let prefixes = 0;
const newPrefix = (): string => `t${process.pid}.${prefixes++}:`;

function logCapture (): { logger: StoreLogger; warn: Array<[object, string]>; info: Array<[object, string]> } {
  const warn: Array<[object, string]> = [];
  const info: Array<[object, string]> = [];
  return { logger: { warn: (o, m) => { warn.push([o, m]); }, info: (o, m) => { info.push([o, m]); } }, warn, info };
}

async function upStore (server: RedisServer, opts: Partial<RedisStoreOptions> = {}): Promise<RedisStore> {
  // A generous timeout where the test is not about timeouts: two cores are shared with other suites.
  const s = new RedisStore({ host: '127.0.0.1', port: server.port, commandTimeoutMs: 2000, connectTimeoutMs: 10_000, ...opts });
  assert.equal(await s.whenUp(10_000), true, 'the store connects');
  return s;
}

/**
 * Whether `p` settles before a timer of `ms` set with it fires (ms 0: before the loop's next turn, setImmediate).
 * A bound a slow or loaded machine cannot break: a late event loop runs the expired timers in the order they
 * expire, so a call answered by its own earlier timer (or at once) still comes first.
 */
async function answeredWithin<T> (p: Promise<T>, ms: number): Promise<[T, boolean]> {
  let fired = false;
  const t = ms === 0 ? setImmediate(() => { fired = true; }) : setTimeout(() => { fired = true; }, ms);
  const v = await p;
  const inTime = !fired;
  if (ms === 0) clearImmediate(t as NodeJS.Immediate);
  else clearTimeout(t as NodeJS.Timeout);
  return [v, inTime];
}

describe('redis store', { skip: redisServerMissing }, () => {
  let server: RedisServer;
  let raw: Redis;
  before(async () => {
    server = await RedisServer.start();
    raw = new Redis({ host: '127.0.0.1', port: server.port, lazyConnect: true });
    await raw.connect();
  });
  after(async () => {
    raw?.disconnect();
    await server?.kill();
  });

  contractSuite('redis', async () => upStore(server, { prefix: newPrefix() }));

  test('the key schema: ear:s:<id> hash, ear:ctx:<id> string, both expiring', async () => {
    const s = await upStore(server, { sessionTtlMs: 60_000 });
    const id = `schema-${process.pid}`;
    value(await s.bind(id, 'pod-a'));
    value(await s.addService(id, { serviceMs: 12.5, criticalPathMs: 40, contextTokens: 900 }));
    value(await s.casHost(id, 'pod-a', 'pod-b', 1700000000000));
    assert.deepEqual(await raw.hgetall(`ear:s:${id}`), { h: 'pod-b', a: '12.5', cp: '40', ct: '900', lm: '1700000000000', m: '1', v: '3' });
    const pttl = await raw.pttl(`ear:s:${id}`);
    assert.ok(pttl > 55_000 && pttl <= 60_000, `session PTTL ${pttl}`);
    value(await s.createContext(id, CTX, 30));
    assert.deepEqual(JSON.parse(await raw.get(`ear:ctx:${id}`) as string), CTX);
    const cttl = await raw.ttl(`ear:ctx:${id}`);
    assert.ok(cttl > 25 && cttl <= 30, `context TTL ${cttl}`);
    await raw.del(`ear:s:${id}`, `ear:ctx:${id}`);
    await s.close();
  });

  test('a foreign value under the prefix is an error answer, never a throw', async () => {
    const prefix = newPrefix();
    const s = await upStore(server, { prefix });
    await raw.hset(`${prefix}s:bad`, 'a', 'not-a-number');
    await raw.set(`${prefix}ctx:bad`, '{"nope":1}');
    assert.deepEqual(await s.load('bad'), { ok: false, reason: 'error' });
    assert.deepEqual(await s.getContext('bad'), { ok: false, reason: 'error' });
    assert.equal(s.stats().errors, 2);
    await s.close();
  });

  test('two replicas: bind is first-writer-wins under concurrency, and both follow the winner', async () => {
    const prefix = newPrefix();
    const [a, b] = [await upStore(server, { prefix }), await upStore(server, { prefix })];
    for (let i = 0; i < 40; i++) {
      const [ra, rb] = await Promise.all([a.bind(`s${i}`, 'pod-a'), b.bind(`s${i}`, 'pod-b')]);
      const [va, vb] = [value(ra), value(rb)];
      assert.equal(Number(va.won) + Number(vb.won), 1, `exactly one replica binds s${i}`);
      assert.equal(va.session.host, vb.session.host, 'both see one host');
      assert.equal(va.session.host, va.won ? 'pod-a' : 'pod-b');
    }
    // Sequentially: the second replica learns the binding through load and bind alike.
    value(await a.bind('seq', 'pod-a'));
    assert.equal(value(await b.load('seq'))?.host, 'pod-a');
    assert.equal(value(await b.bind('seq', 'pod-b')).session.host, 'pod-a');
    await a.close();
    await b.close();
  });

  test('two replicas: concurrent addService increments all count, the critical path is the largest', async () => {
    const prefix = newPrefix();
    const [a, b] = [await upStore(server, { prefix }), await upStore(server, { prefix })];
    value(await a.bind('s', 'pod-a'));
    const calls: Array<Promise<StoreReply<unknown>>> = [];
    for (let i = 0; i < 200; i++) {
      calls.push(a.addService('s', { serviceMs: 1.5, criticalPathMs: i, contextTokens: i }));
      calls.push(b.addService('s', { serviceMs: 2, criticalPathMs: 1000 - i }));
    }
    for (const r of await Promise.all(calls)) value(r);
    const s = value(await b.load('s'));
    assert.equal(s?.attainedMs, 200 * 3.5);
    assert.equal(s?.criticalPathMs, 1000);
    assert.equal(s?.version, 401);
    assert.equal(s?.host, 'pod-a');
    await a.close();
    await b.close();
  });

  test('two replicas: casHost has exactly one winner among concurrent moves from the same host', async () => {
    const prefix = newPrefix();
    const [a, b] = [await upStore(server, { prefix }), await upStore(server, { prefix })];
    for (let i = 0; i < 20; i++) {
      const id = `m${i}`;
      value(await a.bind(id, 'pod-0'));
      const attempts = [];
      for (let j = 0; j < 5; j++) {
        attempts.push(a.casHost(id, 'pod-0', `pod-a${j}`, 1000 + j));
        attempts.push(b.casHost(id, 'pod-0', `pod-b${j}`, 2000 + j));
      }
      const results = (await Promise.all(attempts)).map(value);
      const winners = results.filter((r) => r.won);
      assert.equal(winners.length, 1, `one winner for ${id}`);
      const final = value(await b.load(id));
      assert.equal(final?.host, winners[0].session?.host);
      assert.equal(final?.migrations, 1, 'moved once');
      for (const r of results) if (!r.won) assert.notEqual(r.session?.host, 'pod-0', 'a loser sees the move');
    }
    await a.close();
    await b.close();
  });

  test('contexts end on their own (Redis expiry, 1 s TTL)', async () => {
    const s = await upStore(server, { prefix: newPrefix() });
    assert.equal(value(await s.createContext('c', CTX, 1)), true);
    const got = value(await s.getContext('c'));
    assert.ok(got !== null && got.ttlMs > 0 && got.ttlMs <= 1000, `ttlMs ${got?.ttlMs}`);
    await until(async () => value(await s.getContext('c')) === null, { what: 'Redis to expire the context', timeoutMs: 2000 });
    assert.equal(value(await s.createContext('c', CTX, 1)), true, 'the id is free again');
    await s.close();
  });

  test('sessions expire after sessionTtlMs without writes; a write refreshes it, a load does not', async () => {
    const s = await upStore(server, { prefix: newPrefix(), sessionTtlMs: 1000 });
    value(await s.bind('s', 'pod-a'));
    // Time passing is what this tests: a write 600 ms in, then a load 1.2 s in, past the bind's TTL.
    await sleep(600);
    value(await s.addService('s', { serviceMs: 1 }));
    await sleep(600);
    assert.equal(value(await s.load('s'))?.host, 'pod-a', 'alive: refreshed 600 ms ago');
    // Loads every few ms until it expires: had a load refreshed it, it never would.
    await until(async () => value(await s.load('s')) === null, { what: 'the session to expire (a load does not refresh it)', timeoutMs: 1000 });
    await s.close();
  });

  test('a store that never reaches its server answers degraded at once, logs once, and counts', async () => {
    const log = logCapture();
    const s = new RedisStore({ host: '127.0.0.1', port: 1, logger: log.logger, reconnectMaxMs: 20 });
    assert.equal(await s.whenUp(300), false);
    const [r, atOnce] = await answeredWithin(s.bind('s', 'pod-a'), 0);
    assert.deepEqual(r, { ok: false, reason: 'down' });
    assert.ok(atOnce, 'answered at once (before the event loop turned)');
    // Reconnection attempts go on (one every 20 ms) and each fails: proves that none logs, so there is no event to
    // wait for; a few attempts' time.
    await sleep(100);
    assert.equal(log.warn.length, 1);
    assert.match(log.warn[0][1], /unreachable/);
    assert.equal(s.state, 'down');
    const st = s.stats();
    assert.deepEqual([st.calls, st.degraded, st.fastFails, st.backlog], [1, 1, 1, 1]);
    await s.close();
  });
});

describe('redis store: Redis down and back', { skip: redisServerMissing }, () => {
  let server: RedisServer;
  before(async () => { server = await RedisServer.start(); });
  after(async () => { await server?.kill(); });

  test('killed mid-test: degraded within the timeout, counted, logged once; restarted on the same port: up again, logged once', async () => {
    const log = logCapture();
    const timeout = 50;
    const a = await upStore(server, { commandTimeoutMs: timeout, logger: log.logger, prefix: 'k:', reconnectMaxMs: 50 });
    value(await a.bind('s', 'pod-a'));
    value(await a.addService('s', { serviceMs: 10 }));
    assert.deepEqual(log.info.map(([, m]) => m), ['session store up']);

    await server.kill();
    let degraded = 0;
    for (let i = 0; i < 30; i++) {
      const [r, inTime] = await answeredWithin<StoreReply<unknown>>(i % 3 === 0 ? a.load('s') : i % 3 === 1 ? a.casHost('s', 'pod-a', 'pod-b', 5) : a.getContext('c'), timeout + 150);
      assert.equal(r.ok, false, `call ${i} while down`);
      assert.ok(inTime, `call ${i} answered within its timeout (${timeout} ms)`);
      degraded++;
      await sleep(5);
    }
    await until(() => a.state === 'down', 'the store to be down');
    assert.equal(log.warn.length, 1, 'one warning for the change, not one per call or per reconnection attempt');
    assert.match(log.warn[0][1], /session store down/);
    const st = a.stats();
    assert.equal(st.degraded, degraded);
    assert.equal(st.fastFails + st.timeouts + st.errors, degraded);
    assert.equal(st.state, 'down');

    await server.start();
    assert.equal(await a.whenUp(10_000), true, 'reconnects on its own');
    assert.equal(log.info.length, 2);
    assert.match(log.info[1][1], /back up/);
    assert.equal(log.warn.length, 1);
    // The server lost everything (no persistence); calls work again and the store catches up from here.
    const r = value(await a.bind('s', 'pod-a', { attainedMs: 10 }));
    assert.deepEqual([r.won, r.session.attainedMs], [true, 10], 'the local table seeds what the server lost');
    value(await a.addService('s', { serviceMs: 5 }));
    assert.equal(value(await a.load('s'))?.attainedMs, 15);
    assert.equal(a.stats().stateChanges, 3); // connecting → up → down → up
    await a.close();
  });

  test('writes made while down are replayed when Redis comes back (service summed, the latest host change)', async () => {
    const log = logCapture();
    const a = await upStore(server, { commandTimeoutMs: 50, logger: log.logger, prefix: 'r:', reconnectMaxMs: 50 });
    await server.kill();
    await until(() => a.state === 'down', 'the store to be down');
    for (const ms of [10, 20, 30]) assert.deepEqual(await a.addService('x', { serviceMs: ms, criticalPathMs: ms, contextTokens: ms }), { ok: false, reason: 'down' });
    assert.deepEqual(await a.bind('y', 'pod-a'), { ok: false, reason: 'down' });
    assert.deepEqual(await a.casHost('y', 'pod-a', 'pod-b', 77), { ok: false, reason: 'down' });
    assert.equal(a.stats().backlog, 2);
    await server.start();
    assert.equal(await a.whenUp(10_000), true);
    await until(() => a.stats().backlog === 0 && a.stats().replayed === 2, 'the backlog to drain');
    assert.deepEqual(value(await a.load('x')), { host: null, attainedMs: 60, criticalPathMs: 30, contextTokens: 30, lastMigration: -Infinity, migrations: 0, version: 1 });
    // bind(pod-a) then pod-a → pod-b, folded into one change from unbound: on an empty server it binds pod-b.
    assert.equal(value(await a.load('y'))?.host, 'pod-b');
    await a.close();
  });

  test('the backlog is bounded: the oldest sessions go first, counted', async () => {
    const a = await upStore(server, { commandTimeoutMs: 50, prefix: 'b:', maxBacklog: 2, reconnectMaxMs: 50 });
    await server.kill();
    await until(() => a.state === 'down', 'the store to be down');
    for (const id of ['s1', 's2', 's3', 's2']) await a.addService(id, { serviceMs: 1 });
    assert.deepEqual([a.stats().backlog, a.stats().backlogDropped], [2, 1]);
    await server.start();
    assert.equal(await a.whenUp(10_000), true);
    await until(() => a.stats().backlog === 0, 'the backlog to drain');
    assert.equal(value(await a.load('s1')), null, 's1 was dropped');
    assert.equal(value(await a.load('s2'))?.attainedMs, 2);
    assert.equal(value(await a.load('s3'))?.attainedMs, 1);
    await a.close();
  });

  test('slow (a server that answers nothing): timeouts within the bound, then down and fast; back up when it answers', async () => {
    const log = logCapture();
    const timeout = 50;
    const a = await upStore(server, { commandTimeoutMs: timeout, failuresToDown: 3, probeIntervalMs: 100, logger: log.logger, prefix: 'p:' });
    value(await a.bind('s', 'pod-a'));
    // What the connection's own start logged and counted is not this test's: on a loaded machine the first
    // connect can time out and come back (one more warning, two more state changes) before the store is up.
    const before = { warn: log.warn.length, info: log.info.length, changes: a.stats().stateChanges };
    server.pause();
    try {
      for (let i = 0; i < 3; i++) {
        const t0 = performance.now();
        const [r, inTime] = await answeredWithin(a.load('s'), timeout + 150);
        const ms = performance.now() - t0;
        assert.deepEqual(r, { ok: false, reason: 'timeout' });
        assert.ok(ms >= timeout - 5 && inTime, `timeout ${i} after ${ms.toFixed(1)} ms`);
      }
      assert.equal(a.state, 'down', `down after 3 consecutive timeouts`);
      const [r, atOnce] = await answeredWithin(a.addService('s', { serviceMs: 4 }), 0);
      assert.deepEqual(r, { ok: false, reason: 'down' });
      assert.ok(atOnce, 'a call while down is answered at once (before the event loop turned)');
      // Probes (every 100 ms, each timing out after 50 ms) go unanswered meanwhile: proves that they log nothing
      // more, so there is no event to wait for; two probes' time.
      await sleep(250);
      assert.equal(log.warn.length - before.warn, 1);
      assert.match(log.warn.at(-1)![1], /down/);
    } finally {
      server.resume();
    }
    assert.equal(await a.whenUp(5000), true, 'a probe finds it answering again');
    assert.equal(log.info.length - before.info, 1);
    await until(() => a.stats().backlog === 0, 'the backlog to drain');
    assert.equal(value(await a.load('s'))?.attainedMs, 4, 'the increment answered `down` was replayed');
    const st = a.stats();
    assert.deepEqual([st.timeouts, st.fastFails, st.stateChanges - before.changes], [3, 1, 2]);
    await a.close();
  });
});
