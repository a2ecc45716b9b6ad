import { test } from 'node:test';
import assert from 'node:assert/strict';
import { failureCause, HttpStatusError } from '../../../src/eval/metrics/failure-cause.js';
import { runDes } from '../../../src/eval/drivers/des.js';
import { ContextLengthError, EngineFullError, KvCapacityError } from '../../../src/sim/engine.js';
import type { ClosedLoopWorkload, Turn } from '../../../src/eval/workloads/types.js';
import { post, sim } from '../../sim/http-helpers.js';

test('engine errors count by their code, HTTP answers by status and vLLM message, the rest by name', () => {
  assert.equal(failureCause(new ContextLengthError('x')), 'context_length_exceeded');
  assert.equal(failureCause(new KvCapacityError('x')), 'kv_capacity_exceeded');
  assert.equal(failureCause(new EngineFullError('x')), 'engine_queue_full');
  const vllm400 = (message: string) => JSON.stringify({ error: { message, type: 'BadRequestError', param: null, code: 400 } });
  assert.equal(failureCause(new HttpStatusError(400, vllm400("This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. Please reduce the length of the input messages."))), 'context_length_exceeded');
  assert.equal(failureCause(new HttpStatusError(400, vllm400("'max_tokens' or 'max_completion_tokens' is too large: 200. This model's maximum context length is 4096 tokens and your request has 3999 input tokens (200 > 4096 - 3999)."))), 'context_length_exceeded');
  assert.equal(failureCause(new HttpStatusError(400, vllm400('min_tokens must be less than or equal to max_tokens=1, got 2.'))), 'status 400');
  assert.equal(failureCause(new HttpStatusError(503, 'busy')), 'status 503');
  assert.equal(failureCause(new RangeError('bad')), 'RangeError');
  assert.equal(failureCause(Object.assign(new Error('socket'), { code: 'UND_ERR_SOCKET' }), 'connection'), 'connection');
  assert.equal(failureCause(null), 'error');
});

test('des: a prompt over the engine\'s max_model_len fails as context_length_exceeded, the rest are served', () => {
  // h100-llama-3.1-8b: max_model_len 131072. Session a sends one prompt of 140,000 tokens; b a short one.
  const turn = (blocks: number, first: number): Turn => ({
    keepBlocks: 0, newBlocks: Uint32Array.from({ length: blocks }, (_, i) => first + i), promptTokens: blocks * 64, outputTokens: 4, thinkTime: 0, nominalServiceTime: 1,
  });
  const w: ClosedLoopWorkload = {
    kind: 'closed', name: 't', blockSize: 64, seed: 1, sharedPrefixBlocks: new Set(), config: {}, arrival: { mode: 'poisson', rate: 1 },
    sessions: [
      { id: 'a', parentId: null, client: 'c', start: 0, turns: [turn(2188, 0)], children: [] },
      { id: 'b', parentId: null, client: 'c', start: 1, turns: [turn(10, 5000)], children: [] },
    ],
  };
  const s = runDes({ workload: w, policy: 'round-robin', engines: 1, profile: 'h100-llama-3.1-8b', seed: 1 }).summary;
  assert.deepEqual(s.failures, { context_length_exceeded: 1 });
  assert.deepEqual(s.requests, { sent: 2, completed: 1, failed: 1, incomplete: 0 });
});

test('over HTTP the simulator answers an over-long prompt as vLLM does (400), which counts as context_length_exceeded', async () => {
  const s = await sim({ maxModelLen: 256, stopProbability: 0 });
  try {
    const prompt = Array.from({ length: 300 }, (_, i) => 1 + (i % 20)); // ids inside the character tokenizer's vocabulary
    const r = await post(`${s.url}/v1/completions`, { prompt, max_tokens: 4, ignore_eos: true, stream: true, stream_options: { include_usage: true } });
    assert.equal(r.status, 400);
    assert.deepEqual(r.json, { error: {
      message: "This model's maximum context length is 256 tokens. However, your request has 300 input tokens. Please reduce the length of the input messages.",
      type: 'BadRequestError', param: null, code: 400,
    } });
    assert.equal(failureCause(new HttpStatusError(r.status, r.text)), 'context_length_exceeded');
    const fits = await post(`${s.url}/v1/completions`, { prompt: prompt.slice(0, 250), max_tokens: 4 });
    assert.equal(fits.status, 200);
  } finally { await s.close(); }
});
