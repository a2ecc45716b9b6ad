// httpThreads (docs/configuration.md#server): 1 by default, 1 to 64, with either session store (the data-plane
// threads carry a shared store's turns: test/gateway/shared-sessions.test.ts under EAR_TEST_HTTP_THREADS=2).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { availableParallelism } from 'node:os';
import { buildConfig, ConfigError } from '../../src/config/index.js';

test('httpThreads: 1 by default, 1 to 64, with a shared session store too', () => {
  assert.equal(buildConfig({}).httpThreads, 1);
  assert.equal(buildConfig({ httpThreads: 64 }).httpThreads, 64);
  assert.equal(buildConfig({}, { httpThreads: '4' }).httpThreads, 4, 'the flag');
  for (const bad of [0, 65, 1.5, 'two']) assert.throws(() => buildConfig({ httpThreads: bad }), ConfigError, String(bad));
  const c = buildConfig({ httpThreads: 2, sessionStore: 'redis://127.0.0.1:6379' });
  assert.deepEqual([c.httpThreads, c.sessionStore], [2, 'redis://127.0.0.1:6379']);
  assert.equal(buildConfig({ httpThreads: 1, sessionStore: 'redis://127.0.0.1:6379' }).httpThreads, 1);
});

test('httpThreads auto: one per core the process may use, at most 64, from a file or the flag', () => {
  const cores = Math.max(1, Math.min(64, availableParallelism()));
  assert.equal(buildConfig({ httpThreads: 'auto' }).httpThreads, cores);
  assert.equal(buildConfig({}, { httpThreads: 'auto' }).httpThreads, cores, 'the flag');
  assert.throws(() => buildConfig({ httpThreads: 'Auto' }), ConfigError, 'only the word itself');
});
