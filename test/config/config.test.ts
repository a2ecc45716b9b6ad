import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildConfig, loadConfigFile, parseBackendFlag, ConfigError } from '../../src/config/index.js';

test('backend flags parse into validated, frozen backends; flags override the file', () => {
  const cfg = buildConfig({ port: 9000, backends: [{ url: 'http://x:1' }] }, {
    backend: ['http://127.0.0.1:8001/,id=a,kv-events=tcp://127.0.0.1:5557,replay=tcp://127.0.0.1:5558,role=prefill', 'http://127.0.0.1:8002'],
    port: '8081'
  });
  assert.equal(cfg.port, 8081);
  assert.deepEqual(cfg.backends[0], { id: 'a', url: 'http://127.0.0.1:8001', kvEvents: 'tcp://127.0.0.1:5557', replay: 'tcp://127.0.0.1:5558', kvTopic: '', role: 'prefill', kvCapacityBlocks: null, maxConcurrent: null, apiKey: null, priority: null });
  assert.equal(cfg.backends[1].id, 'backend-1');
  assert.equal(cfg.backends[1].role, 'both');
  assert.ok(Object.isFrozen(cfg) && Object.isFrozen(cfg.backends[0]));
});

test('every config mistake names the field and the rule', () => {
  const cases: Array<[Record<string, unknown>, Record<string, unknown>, RegExp]> = [
    [{}, { backend: ['ftp://x'] }, /backends\[0\]\.url: "ftp:\/\/x" must use http: or https:/],
    [{}, { backend: ['http://x,role=leader'] }, /backends\[0\]\.role: must be one of both, prefill, decode/],
    [{}, { backend: ['http://x,nonsense'] }, /--backend: "nonsense" is not key=value/],
    [{}, { backend: ['http://x,id=a', 'http://y,id=a'] }, /backends\[1\]\.id: "a" is used twice/],
    [{}, { backend: ['http://x,kv-events=http://y'] }, /backends\[0\]\.kv-events: .* must use tcp: or ipc:/],
    [{ port: 70000 }, {}, /config port: must be an integer in \[0, 65535\]/],
    [{ bogus: 1 }, {}, /config bogus: unknown field/],
    [{ backends: [{ url: 'http://x', colour: 'red' }] }, {}, /backends\[0\]\.colour: unknown field/],
    [{ apiKeys: ['ok', ''] }, {}, /apiKeys\[1\]: must be a non-empty string/],
    [{ assumedTtlMs: -1 }, {}, /config assumedTtlMs: must be an integer in \[0, 2147483647\]/],
    [{ kvMaxMappedBlocks: 10 }, {}, /config kvMaxMappedBlocks: must be an integer in \[1024, /],
    [{ backends: [{ url: 'http://x', topic: 5 }] }, {}, /backends\[0\]\.topic: must be a string/],
    [{ tokenizer: 'remote:ftp://x' }, {}, /config tokenizer: .*http or https/],
    [{ tokenizer: 'remote:localhost' }, {}, /config tokenizer: .*not a URL/],
    [{ remoteTokenizer: { timeoutMs: 0 } }, {}, /config remoteTokenizer\.timeoutMs: must be an integer in \[1, /],
    [{ remoteTokenizer: { retry: 2 } }, {}, /config remoteTokenizer\.retry: unknown field/],
    [{ userWindow: { buckets: 0 } }, {}, /config userWindow\.buckets: must be an integer in \[1, 1024\]/],
    [{ userWindow: { outputWeight: -2 } }, {}, /config userWindow\.outputWeight: must be a number in \[0, 1000\]/],
    [{ userWindow: { window: 5 } }, {}, /config userWindow\.window: unknown field/],
    [{ userWindow: 5 }, {}, /config userWindow: must be a mapping/],
    [{}, { backend: ['http://x,priority=fifo'] }, /backends\[0\]\.priority: must be one of vllm, sglang, sglang-low-first or off, got "fifo"/],
    [{ enginePriorityKeys: 'k' }, {}, /config enginePriorityKeys: must be a list of API keys/],
    [{ enginePriorityKeys: [''] }, {}, /enginePriorityKeys\[0\]: must be a non-empty string/]
  ];
  assert.equal(buildConfig({}, { backend: ['http://x,priority=sglang-low-first'] }).backends[0].priority, 'sglang-low-first');
  assert.equal(buildConfig({ backends: [{ url: 'http://x', priority: 'vllm' }] }).backends[0].priority, 'vllm');
  assert.equal(buildConfig({}, { backend: ['http://x,priority=off'] }).backends[0].priority, null);
  assert.deepEqual(buildConfig({ userWindow: { windowMs: 60_000, outputWeight: 3 } }).userWindow, { windowMs: 60_000, buckets: 5, inputWeight: 1, outputWeight: 3, maxUsers: 65_536 });
  const remote = buildConfig({ tokenizer: 'remote:http://10.0.0.5:8000', remoteTokenizer: { retries: 3 } });
  assert.deepEqual(remote.remoteTokenizer, { timeoutMs: 1000, retries: 3, breakerFailures: 5, breakerCooldownMs: 10_000 });
  const precise = buildConfig({ assumedTtlMs: '2500' }, { backend: ['http://x,kv-events=tcp://127.0.0.1:5557,topic=kv@'] });
  assert.equal(precise.assumedTtlMs, 2500);
  assert.equal(precise.backends[0].kvTopic, 'kv@');
  assert.equal(buildConfig({}).assumedTtlMs, null, 'by default the TTL follows the mode');
  for (const [file, flags, re] of cases) assert.throws(() => buildConfig(file, flags), (e: unknown) => e instanceof ConfigError && re.test((e as Error).message), String(re));
  assert.deepEqual(parseBackendFlag('http://h:1,id=x'), { url: 'http://h:1', id: 'x' });
});

test('a YAML file loads, and a broken one is reported with its path', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-cfg-'));
  const good = join(dir, 'good.yaml');
  writeFileSync(good, 'port: 8090\nbackends:\n  - url: http://127.0.0.1:8001\n    id: e0\n');
  assert.equal(buildConfig(loadConfigFile(good)).backends[0].id, 'e0');
  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, 'port: [1,\n');
  assert.throws(() => loadConfigFile(bad), /bad\.yaml: cannot be read as YAML/);
  const list = join(dir, 'list.yaml');
  writeFileSync(list, '- 1\n');
  assert.throws(() => loadConfigFile(list), /must hold a mapping/);
});
