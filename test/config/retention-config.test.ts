// The retention section (src/config/retention.ts): defaults, partial mappings, and a config error naming the field
// for each bad value.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { RETENTION_DEFAULTS } from '../../src/core/retention.js';

test('retention: the defaults, and a partial mapping over them (numbers from flags or YAML strings too)', () => {
  assert.deepEqual(buildConfig({}).retention, RETENTION_DEFAULTS);
  const c = buildConfig({ retention: { maxShare: 0.25, gapFactor: '3', maxTtlMs: 600_000 } });
  assert.deepEqual(c.retention, { ...RETENTION_DEFAULTS, maxShare: 0.25, gapFactor: 3, maxTtlMs: 600_000 });
  assert.ok(Object.isFrozen(c.retention));
});

for (const [bad, path] of [
  [{ maxShare: 1.5 }, 'retention.maxShare'],
  [{ maxShare: -0.1 }, 'retention.maxShare'],
  [{ gapFactor: 0 }, 'retention.gapFactor'],
  [{ gapAlpha: 0 }, 'retention.gapAlpha'],
  [{ gapAlpha: 2 }, 'retention.gapAlpha'],
  [{ defaultGapMs: -1 }, 'retention.defaultGapMs'],
  [{ minTtlMs: 1.5 }, 'retention.minTtlMs'],
  [{ minTtlMs: 10_000, maxTtlMs: 5000 }, 'retention.minTtlMs'],
  [{ maxLearnt: 0 }, 'retention.maxLearnt'],
  [{ maxTtl: 5 }, 'retention.maxTtl'],
  ['half', 'retention']
] as const) {
  test(`retention: ${JSON.stringify(bad)} is refused naming ${path}`, () => {
    assert.throws(() => buildConfig({ retention: bad }), (err: unknown) => err instanceof ConfigError && err.message.startsWith(`config ${path}:`));
  });
}
