// Config fuzzing (issue 13 item 4): buildConfig over generated YAML documents and `ear serve` flag values, and
// loadConfigFile over mutated YAML text. The only outcomes allowed: a deeply frozen config, or a ConfigError
// whose message names the field at fault; never another exception.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import YAML from 'yaml';
import { buildConfig, ConfigError, DEFAULTS, loadConfigFile, type GatewayConfig } from '../../src/config/index.js';

const FIELDS = Object.keys(DEFAULTS);
const ODD_KEYS = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', 'valueOf', 'prototype', '', ' port', 'Port', 'backend'];
const BACKEND_KEYS = ['id', 'url', 'kvEvents', 'kv-events', 'replay', 'topic', 'role', 'kvCapacityBlocks', 'kv-blocks', 'maxConcurrent', 'max-concurrent', '__proto__', 'constructor', 'x'];

const scalar: fc.Arbitrary<unknown> = fc.oneof(
  fc.constant(null), fc.boolean(), fc.integer(), fc.integer({ min: -2, max: 70_000 }),
  fc.double(), fc.constantFrom(0, -0, 0.5, 1e300, -1e-300, 2 ** 31, 2 ** 53 + 1, Number.NaN, Infinity, -Infinity),
  fc.string({ maxLength: 16 }), fc.constantFrom('', ' ', '8080', ' 12 ', '0x10', '1e3', 'true', 'null', 'auto', 'nixl, recompute', 'memory', 'redis://h:6379/0', 'redis://', 'remote:http://x:1', 'character', 'high', 'atlas', 'http://127.0.0.1:1', 'tcp://127.0.0.1:5557'),
  fc.bigInt({ min: -(1n << 70n), max: 1n << 70n })
);
const value: fc.Arbitrary<unknown> = fc.letrec((tie) => ({
  v: fc.oneof({ depthSize: 'small' }, scalar, fc.array(tie('v'), { maxLength: 4 }), fc.dictionary(fc.oneof(fc.string({ maxLength: 8 }), fc.constantFrom('windowMs', 'buckets', 'timeoutMs', 'retries', 'k', '__proto__')), tie('v'), { maxKeys: 4 }))
})).v;
const backendArb = fc.oneof(value, fc.dictionary(fc.constantFrom(...BACKEND_KEYS), fc.oneof(value, fc.constantFrom('http://127.0.0.1:8001', 'ftp://x', 'tcp://127.0.0.1:5557', 'prefill', 'a', 'a'.repeat(80))), { maxKeys: 6 }));
const docArb: fc.Arbitrary<Record<string, unknown>> = fc.dictionary(
  fc.oneof({ weight: 6, arbitrary: fc.constantFrom(...FIELDS) }, { weight: 1, arbitrary: fc.constantFrom(...ODD_KEYS) }, { weight: 1, arbitrary: fc.string({ maxLength: 10 }) }, { weight: 2, arbitrary: fc.constant('backends') }),
  fc.oneof(value, fc.array(backendArb, { maxLength: 3 })),
  { maxKeys: 6 }
);
// Flags as `ear serve` passes them: strings (or lists of strings), `backend` a list of --backend values.
const backendFlag = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.tuple(fc.constantFrom('http://127.0.0.1:8001', 'https://h', 'http://', 'x', ''), fc.array(fc.tuple(fc.constantFrom(...BACKEND_KEYS, 'kv-events', ''), fc.string({ maxLength: 12 })), { maxLength: 4 }))
    .map(([u, kv]) => [u, ...kv.map(([k, v]) => `${k}=${v}`)].join(','))
);
const flagsArb: fc.Arbitrary<Record<string, unknown>> = fc.record({
  host: fc.option(fc.string({ maxLength: 12 }), { nil: undefined }),
  port: fc.option(fc.oneof(fc.string({ maxLength: 6 }), fc.integer().map(String)), { nil: undefined }),
  blockSize: fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
  scheduler: fc.option(fc.string({ maxLength: 8 }), { nil: undefined }),
  sessionStore: fc.option(fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom('redis://h:1/99', 'redis://:6379', 'memory ')), { nil: undefined }),
  kvConnectors: fc.option(fc.string({ maxLength: 24 }), { nil: undefined }),
  apiKeys: fc.option(fc.array(fc.string({ maxLength: 6 }), { maxLength: 3 }), { nil: undefined }),
  maxContexts: fc.option(fc.string({ maxLength: 10 }), { nil: undefined }),
  backend: fc.option(fc.array(backendFlag, { maxLength: 3 }), { nil: undefined })
});

/** A config is well formed: frozen all the way down, with a backends list. */
function assertFrozen (o: unknown, path = 'config'): void {
  if (typeof o !== 'object' || o === null) return;
  assert.ok(Object.isFrozen(o), `${path} is frozen`);
  for (const [k, v] of Object.entries(o)) assertFrozen(v, `${path}.${k}`);
}

/** Builds; a failure must be a ConfigError naming a field of the input (or the file). */
function checked (build: () => Readonly<GatewayConfig>, fields: () => string[]): void {
  let cfg: Readonly<GatewayConfig>;
  try {
    cfg = build();
  } catch (err) {
    if (!(err instanceof ConfigError)) throw new Error(`threw ${(err as Error)?.name}: ${(err as Error)?.message}`);
    // `config <field>: rule`, `config <field>.<sub>: …` or `config <field>[i]…: …`, or `config --backend: …`.
    const named = [...fields(), '--backend'].some((f) => [': ', '.', '['].some((sep) => err.message.startsWith(`config ${f}${sep}`)));
    assert.ok(named, `the error names no field of ${JSON.stringify(fields())}: ${err.message}`);
    return;
  }
  assertFrozen(cfg);
  assert.ok(Array.isArray(cfg.backends));
  // httpThreadsAuto is buildConfig's own (whether httpThreads came from `auto`), not a setting.
  for (const k of Object.keys(cfg)) assert.ok(k === 'backends' || k === 'httpThreadsAuto' || FIELDS.includes(k), `an unknown field "${k}" was accepted`);
  assert.equal(Object.getPrototypeOf(cfg), Object.prototype, 'the config\'s prototype is untouched');
}

test('buildConfig over generated documents and flags: a frozen config or a ConfigError naming the field', () => {
  fc.assert(fc.property(docArb, flagsArb, (doc, flags) => {
    checked(() => buildConfig(doc, flags), () => [...Object.keys(doc), ...Object.keys(flags), 'backends']);
  }), { numRuns: 3000, seed: 13 });
});

test('the same documents through YAML text and loadConfigFile, and mutated YAML text', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-cfg-fuzz-'));
  const file = join(dir, 'ear.yaml');
  try {
    const yamlText = fc.oneof(
      docArb.map((d) => { try { return YAML.stringify(d); } catch { return 'port: 1'; } }),
      fc.tuple(docArb, fc.nat(), fc.constantFrom('\t', ':', '- ', '&a ', '*a', '!!binary ', '{', '[', '"', '\0', '\n  ', '<<: *a\n', '%YAML 1.1\n', '---\n', '? ')).map(([d, at, ins]) => {
        let t = 'port: 1';
        try { t = YAML.stringify(d); } catch { /* a value YAML cannot write */ }
        const i = at % (t.length + 1);
        return t.slice(0, i) + ins + t.slice(i);
      }),
      fc.string({ unit: 'binary', maxLength: 200 })
    );
    fc.assert(fc.property(yamlText, (text) => {
      writeFileSync(file, text);
      let doc: Record<string, unknown> = {};
      checked(() => buildConfig(doc = loadConfigFile(file)), () => ['backends', ...Object.keys(doc), file]);
    }), { numRuns: 1500, seed: 13 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('what the config fuzzing found: prototype keys and cyclic YAML values are ConfigErrors (they threw TypeError or were accepted)', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-cfg-fuzz-'));
  try {
    const cases: Array<[string, RegExp]> = [
      ['__proto__: 0\n', /^config __proto__: unknown field/], // TypeError: check is not a function
      ['constructor: 5\n', /^config constructor: unknown field/], // was accepted as a field
      ['toString: x\n', /^config toString: unknown field/],
      ['remoteTokenizer: { constructor: 1 }\n', /^config remoteTokenizer\.constructor: unknown field/],
      ['userWindow: { hasOwnProperty: 1 }\n', /^config userWindow\.hasOwnProperty: unknown field/],
      ['port: &x [1, *x]\n', /^config port: must be an integer .* got a list that cannot be shown/] // TypeError: circular structure
    ];
    for (const [i, [text, re]] of cases.entries()) {
      const file = join(dir, `c${i}.yaml`);
      writeFileSync(file, text);
      assert.throws(() => buildConfig(loadConfigFile(file)), (e: unknown) => e instanceof ConfigError && re.test(e.message), text);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
