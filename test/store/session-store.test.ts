import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RedisStore } from '../../src/store/redis-store.js';
import { createSessionStore } from '../../src/store/create.js';
import { StoreConfigError, parseSessionStoreSpec, storeKeyPart } from '../../src/store/session-store.js';

test('--session-store: memory and redis://HOST[:PORT][/DB]', () => {
  assert.deepEqual(parseSessionStoreSpec('memory'), { kind: 'memory' });
  assert.deepEqual(parseSessionStoreSpec('redis://10.0.0.5:6380'), { kind: 'redis', host: '10.0.0.5', port: 6380, db: 0 });
  assert.deepEqual(parseSessionStoreSpec(' redis://cache.internal:6379/3 '), { kind: 'redis', host: 'cache.internal', port: 6379, db: 3 });
  assert.deepEqual(parseSessionStoreSpec('redis://cache'), { kind: 'redis', host: 'cache', port: 6379, db: 0 });
  assert.deepEqual(parseSessionStoreSpec('redis://cache/'), { kind: 'redis', host: 'cache', port: 6379, db: 0 });
  assert.deepEqual(parseSessionStoreSpec('redis://[::1]:7000/1'), { kind: 'redis', host: '::1', port: 7000, db: 1 });
});

test('--session-store: anything else is a config error that names the flag and the form', () => {
  const bad = ['', 'redis', 'mem', 'http://h:1', 'rediss://h:6379', 'redis://', 'redis://h:0', 'redis://h:70000', 'redis://h:1/x',
    'redis://h:1/1/2', 'redis://h:1/-1', 'redis://u:p@h:1', 'redis://:p@h:1', 'redis://h:1?db=2', 'redis://h:1#x', 'redis://h:1/99999'];
  for (const v of bad) {
    assert.throws(() => parseSessionStoreSpec(v), (err: unknown) => {
      assert.ok(err instanceof StoreConfigError, v);
      assert.equal((err as StoreConfigError).code, 'EAR_ERR_CONFIG');
      assert.match((err as Error).message, /^config --session-store: /, v);
      return true;
    }, v);
  }
  assert.throws(() => parseSessionStoreSpec(42, 'sessionStore'), /^StoreConfigError: config sessionStore: must be "memory" or redis:\/\/HOST:PORT\[\/DB\]$/);
});

test('key parts: ids up to 256 bytes as they are, longer ones by SHA-256, in a form that cannot collide', () => {
  assert.equal(storeKeyPart('abc', 'id'), ':abc');
  assert.equal(storeKeyPart('x'.repeat(256), 'id'), `:${'x'.repeat(256)}`);
  assert.match(storeKeyPart('x'.repeat(257), 'id'), /^#[0-9a-f]{64}$/);
  assert.match(storeKeyPart('é'.repeat(129), 'id'), /^#[0-9a-f]{64}$/, '258 bytes in 129 characters');
  assert.equal(storeKeyPart('é'.repeat(128), 'id'), `:${'é'.repeat(128)}`);
  assert.throws(() => storeKeyPart('', 'session id'), /session id must be a non-empty string/);
});

test('createSessionStore builds the store the spec names', async () => {
  const m = createSessionStore({ kind: 'memory' }, { sessionTtlMs: 5000, maxSessions: 10 });
  assert.ok(m instanceof MemoryStore);
  assert.equal(m.shared, false);
  // A redis store on a port nothing listens on: it never throws, it answers degraded.
  const r = createSessionStore({ kind: 'redis', host: '127.0.0.1', port: 1, db: 0 }, { sessionTtlMs: 5000 });
  assert.ok(r instanceof RedisStore);
  assert.equal(r.shared, true);
  const reply = await r.load('s');
  assert.deepEqual(reply, { ok: false, reason: 'down' });
  await r.close();
});
