import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseEngineMetrics, parseLabels } from '../../src/fleet/engine-metrics.js';
import { SimEngine } from '../../src/sim/engine.js';
import { SimMetrics } from '../../src/sim/sim-metrics.js';
import { loadProfile } from '../../src/engine-model/profile.js';

// Exactly what `ear sim --profile h100-llama-3.1-8b` serves on /metrics for these series (prom-client's text,
// label order as SimMetrics declares it), idle.
const SIM_TEXT = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="meta-llama/Llama-3.1-8B-Instruct",engine="0"} 0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="meta-llama/Llama-3.1-8B-Instruct",engine="0"} 0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{model_name="meta-llama/Llama-3.1-8B-Instruct",engine="0"} 0
# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",cache_dtype="auto",enable_prefix_caching="True",gpu_memory_utilization="0.9",num_cpu_blocks="None",num_gpu_blocks="26972",num_gpu_blocks_override="None",prefix_caching_hash_algo="sha256",engine="0"} 1
`;

test('KV capacity and block size come from the simulator\'s vllm:cache_config_info, as it prints it', () => {
  assert.deepEqual(parseEngineMetrics(SIM_TEXT), { running: 0, waiting: 0, kvUsage: 0, numGpuBlocks: 26972, blockSize: 16 });
});

test('a live simulator\'s /metrics text gives its pool\'s capacity', async () => {
  const profile = loadProfile('h100-llama-3.1-8b');
  for (const override of [undefined, 777]) {
    const e = new SimEngine({ profile, numGpuBlocks: override });
    const m = new SimMetrics('m', 3, profile.maxModelLen, {
      blockSize: e.blockSize, numGpuBlocks: e.pool.numBlocks, numGpuBlocksOverride: override ?? null, gpuMemoryUtilization: profile.gpuMemoryUtilization
    }, () => e.stats());
    const load = parseEngineMetrics(await m.render());
    assert.ok(load !== null);
    assert.equal(load.numGpuBlocks, e.pool.numBlocks);
    assert.equal(load.blockSize, e.blockSize);
    if (override !== undefined) assert.equal(load.numGpuBlocks, override);
  }
});

test('a data-parallel engine: blocks add up over the ranks; "None" or a disagreeing block size gives null', () => {
  const info = (engine: string, blocks: string, bs = '16'): string =>
    `vllm:cache_config_info{block_size="${bs}",engine="${engine}",num_gpu_blocks="${blocks}",num_gpu_blocks_override="None"} 1.0`;
  const running = 'vllm:num_requests_running{engine="0",model_name="m"} 2.0\nvllm:num_requests_running{engine="1",model_name="m"} 1.0';
  const two = [running, info('0', '1000'), info('1', '1200')].join('\n');
  assert.deepEqual(parseEngineMetrics(two), { running: 3, waiting: 0, kvUsage: 0, numGpuBlocks: 2200, blockSize: 16 });
  // One rank not profiled yet: a partial sum would understate the capacity.
  const partial = parseEngineMetrics([running, info('0', '1000'), info('1', 'None')].join('\n'));
  assert.equal(partial?.numGpuBlocks, null);
  assert.equal(partial?.blockSize, 16);
  const mixed = parseEngineMetrics([running, info('0', '1000', '16'), info('1', '1000', '32')].join('\n'));
  assert.deepEqual([mixed?.numGpuBlocks, mixed?.blockSize], [2000, null]);
  // The same rank twice (a re-registered series): counted once, the last one wins.
  assert.equal(parseEngineMetrics([running, info('0', '1000'), info('0', '1500')].join('\n'))?.numGpuBlocks, 1500);
  // No engine label at all: one rank.
  assert.equal(parseEngineMetrics(`${running}\nvllm:cache_config_info{num_gpu_blocks="42",block_size="8"} 1`)?.numGpuBlocks, 42);
  // Not counts: floats with a fraction, negatives, words, empty.
  for (const bad of ['12.5', '-3', 'lots', '']) {
    const r = parseEngineMetrics(`${running}\nvllm:cache_config_info{num_gpu_blocks="${bad}",block_size="${bad}"} 1`);
    assert.deepEqual([r?.numGpuBlocks, r?.blockSize], [null, null], bad);
  }
  assert.equal(parseEngineMetrics(`${running}\nvllm:cache_config_info{num_gpu_blocks="64.0",block_size="16"} 1`)?.numGpuBlocks, 64);
});

test('cache_config_info labels: escapes, braces and commas inside values, any order, sloppy unquoted values', () => {
  const line = 'vllm:cache_config_info{a="x\\"}, y",b="back\\\\slash",c="line\\nbreak", num_gpu_blocks = 512 ,block_size="16"} 1 1700000000000';
  const labels = parseLabels(line, line.indexOf('{'));
  assert.deepEqual([...labels], [['a', 'x"}, y'], ['b', 'back\\slash'], ['c', 'line\nbreak'], ['num_gpu_blocks', '512'], ['block_size', '16']]);
  const r = parseEngineMetrics(`vllm:num_requests_waiting 4\n${line}\n`);
  assert.deepEqual(r, { running: 0, waiting: 4, kvUsage: 0, numGpuBlocks: 512, blockSize: 16 });
  // The info series alone is no load report; a torn line reads what it can.
  assert.equal(parseEngineMetrics('vllm:cache_config_info{num_gpu_blocks="5"} 1\n'), null);
  assert.deepEqual(parseLabels('x{a="1",b="unterminated', 1), new Map([['a', '1'], ['b', 'unterminated']]));
  assert.deepEqual(parseLabels('x{a', 1), new Map());
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
