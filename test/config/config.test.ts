import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildConfig, loadConfigFile, parseBackendFlag, ConfigError } from '../../src/config/index.js';
import { sessionIdFrom, sessionOf, MAX_SESSION_ID_BYTES } from '../../src/request/session-id.js';
import { parseEngineMetrics } from '../../src/fleet/engine-metrics.js';

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

test('the session id comes from EAR\'s header first, then the agent clients\' headers', () => {
  const from = (h: Record<string, string>) => sessionIdFrom((n) => h[n] ?? '');
  assert.equal(from({ 'x-session-id': 'a', 'x-claude-code-session-id': 'b' }), 'a');
  assert.equal(from({ 'x-claude-code-session-id': ' b ' }), 'b');
  assert.equal(from({ session_id: 'codex' }), 'codex');
  assert.equal(from({ 'session-id': 'codex2' }), 'codex2');
  assert.equal(from({ 'x-session-affinity': 'oc' }), 'oc');
  assert.equal(from({ 'x-session-id': '   ' }), null);
  assert.equal(from({ 'x-session-id': 'x'.repeat(1000) })?.length, MAX_SESSION_ID_BYTES);
});

test('engine /metrics text gives running, waiting and KV usage for vLLM and SGLang', () => {
  const vllm = [
    '# HELP vllm:num_requests_running Number of requests in model execution batches.',
    '# TYPE vllm:num_requests_running gauge',
    'vllm:num_requests_running{engine="0",model_name="m"} 3.0',
    'vllm:num_requests_running{engine="1",model_name="m"} 2.0',
    'vllm:num_requests_waiting{engine="0",model_name="m"} 7.0',
    'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5',
    'vllm:kv_cache_usage_perc{engine="1",model_name="m"} 0.25',
    'vllm:cache_config_info{block_size="16",engine="0",model_name="weird } label"} 1.0'
  ].join('\n');
  // cache_config_info without num_gpu_blocks: the block size is known, the capacity is not.
  assert.deepEqual(parseEngineMetrics(vllm), { running: 5, waiting: 7, kvUsage: 0.375, numGpuBlocks: null, blockSize: 16 });
  const old = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.9\nvllm:num_requests_running{model_name="m"} 1 1700000000000\n';
  assert.deepEqual(parseEngineMetrics(old), { running: 1, waiting: 0, kvUsage: 0.9, numGpuBlocks: null, blockSize: null });
  const sglang = 'sglang:num_running_reqs{model_name="q"} 4\nsglang:num_queue_reqs{model_name="q"} 1\nsglang:token_usage{model_name="q"} 0.2\n';
  assert.deepEqual(parseEngineMetrics(sglang), { running: 4, waiting: 1, kvUsage: 0.2, numGpuBlocks: null, blockSize: null });
  assert.equal(parseEngineMetrics('http_requests_total 5\n'), null);
  assert.equal(parseEngineMetrics('garbage{{{ \n\n vllm:num_requests_running{ NaN'), null);
});

test('a sub-agent\'s parent session comes from EAR\'s header, the common one, or Claude Code\'s agent ids', () => {
  const of = (h: Record<string, string>) => sessionOf((n) => h[n] ?? '');
  assert.deepEqual(of({ 'x-session-id': 'c', 'x-ear-parent-session-id': 'p' }), { sessionId: 'c', parentSessionId: 'p' });
  assert.deepEqual(of({ 'x-session-id': 'c', 'x-parent-session-id': 'p' }), { sessionId: 'c', parentSessionId: 'p' });
  assert.deepEqual(of({ 'x-session-id': 'c' }), { sessionId: 'c', parentSessionId: null });
  // Claude Code sends the parent's session id on a sub-agent's turns and names the agents apart.
  assert.deepEqual(of({ 'x-claude-code-session-id': 's' }), { sessionId: 's', parentSessionId: null });
  assert.deepEqual(of({ 'x-claude-code-session-id': 's', 'x-claude-code-agent-id': 'a1' }), { sessionId: 's:a1', parentSessionId: 's' });
  assert.deepEqual(of({ 'x-claude-code-session-id': 's', 'x-claude-code-agent-id': 'a2', 'x-claude-code-parent-agent-id': 'a1' }), { sessionId: 's:a2', parentSessionId: 's:a1' });
  assert.equal(of({ 'x-session-id': 'c', 'x-parent-session-id': 'p'.repeat(1000) }).parentSessionId!.length, MAX_SESSION_ID_BYTES);
});
