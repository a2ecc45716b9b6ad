// ear-proactive's settings: defaults, flags as strings, and mistakes named with the field and the rule.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { migrationBackends } from '../../src/gateway/proactive-migration.js';

const BACKEND = { backends: [{ url: 'http://127.0.0.1:9', id: 'e0' }] };

test('proactiveIntervalMs and proactiveBodyCacheBytes: defaults, flags, bounds', () => {
  const d = buildConfig(BACKEND, {});
  assert.equal(d.proactiveIntervalMs, 1000);
  assert.equal(d.proactiveBodyCacheBytes, 256 << 20);
  const c = buildConfig(BACKEND, { proactiveIntervalMs: '250', proactiveBodyCacheBytes: String(64 << 20) });
  assert.deepEqual([c.proactiveIntervalMs, c.proactiveBodyCacheBytes], [250, 64 << 20]);
  for (const [field, v] of [['proactiveIntervalMs', 5], ['proactiveIntervalMs', 1.5], ['proactiveBodyCacheBytes', 1024], ['proactiveBodyCacheBytes', 'lots']] as const) {
    assert.throws(() => buildConfig({ ...BACKEND, [field]: v }, {}), (e: unknown) => e instanceof ConfigError && e.message.includes(field) && /must be an integer in/.test(e.message), `${field}: ${v}`);
  }
});

test('the migration thread is told the backends that are not leaving, with their models, engine keys and priority', () => {
  const b = (index: number, id: string, over: Record<string, unknown> = {}) => ({ index, id, gone: false, draining: false, models: new Set(['m2', 'm1']), config: { url: `http://h${index}:8000` }, ...over });
  const list = [b(0, 'e0'), b(1, 'e1', { draining: true }), b(2, 'e2', { gone: true }), b(3, 'e3', { config: { url: 'http://h3:8000', apiKey: 'k3' } }), b(4, 'e4', { config: { url: 'http://h4:8000', priority: 'vllm' } })];
  assert.deepEqual(migrationBackends(list as never), [
    { index: 0, id: 'e0', url: 'http://h0:8000', models: ['m1', 'm2'] },
    { index: 3, id: 'e3', url: 'http://h3:8000', apiKey: 'k3', models: ['m1', 'm2'] },
    { index: 4, id: 'e4', url: 'http://h4:8000', priority: 'vllm', models: ['m1', 'm2'] }
  ]);
});
