import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { HttpError } from '../../src/sim/http-errors.js';
import { parseGenerationRequest } from '../../src/sim/openai-request.js';
import { maxTokensFor } from '../../src/sim/generation-handler.js';
import { classifyKvTransferParams } from '../../src/sim/kv-transfer.js';
import { parseKvEventsConfig, shouldBind } from '../../src/sim/kv-events-config.js';

test('defaults as vLLM: completions max_tokens 16, chat up to the context; usage only with stream_options', () => {
  const c = parseGenerationRequest('completion', { prompt: 'x' });
  assert.equal(c.maxTokens, 16);
  assert.equal(c.addSpecialTokens, true);
  const chat = parseGenerationRequest('chat', { messages: [], stream: true, stream_options: {} });
  assert.equal(chat.maxTokens, null);
  assert.equal(chat.addSpecialTokens, false);
  assert.equal(chat.includeUsage, true, 'StreamOptions.include_usage defaults to True');
  assert.equal(parseGenerationRequest('chat', { messages: [], stream: true }).includeUsage, false);
  assert.equal(parseGenerationRequest('chat', { messages: [], max_completion_tokens: 3, max_tokens: 9 }).maxTokens, 3);
  assert.deepEqual(parseGenerationRequest('chat', { messages: [], stop: 'END' }).stop, ['END']);
});

test('context-length checks and their messages', () => {
  assert.equal(maxTokensFor(100, 40, null), 60);
  assert.equal(maxTokensFor(100, 40, 60), 60);
  assert.throws(() => maxTokensFor(100, 40, 61), /'max_tokens' or 'max_completion_tokens' is too large: 61\. .*\(61 > 100 - 40\)/);
  assert.throws(() => maxTokensFor(100, 101, 1), /maximum context length is 100 tokens\. However, your request has 101 input tokens/);
  assert.throws(() => maxTokensFor(100, 100, null), /However, your request has 100 input tokens/);
});

test('any JSON value either parses or raises a 400 HttpError, never anything else', () => {
  fc.assert(fc.property(fc.jsonValue(), fc.constantFrom('chat', 'completion') as fc.Arbitrary<'chat' | 'completion'>, (v, ep) => {
    try {
      parseGenerationRequest(ep, v);
    } catch (err) {
      assert.ok(err instanceof HttpError && err.status === 400, String(err));
    }
  }), { numRuns: 2000 });
  // The same with plausible keys, so deeper checks are reached.
  const keys = ['messages', 'prompt', 'max_tokens', 'stream', 'stream_options', 'n', 'stop', 'seed', 'cache_salt', 'min_tokens', 'kv_transfer_params', 'stop_token_ids', 'echo'];
  fc.assert(fc.property(fc.dictionary(fc.constantFrom(...keys), fc.jsonValue()), (o) => {
    try {
      parseGenerationRequest('chat', o);
      parseGenerationRequest('completion', o);
    } catch (err) {
      assert.ok(err instanceof HttpError && err.status === 400, String(err));
    }
  }), { numRuns: 2000 });
});

test('kv_transfer_params: export, import (flat or grouped block ids), invalid', () => {
  assert.deepEqual(classifyKvTransferParams(null), { kind: 'none' });
  assert.deepEqual(classifyKvTransferParams({ do_remote_decode: true }), { kind: 'export' });
  const full = { do_remote_prefill: true, remote_block_ids: [1, 2], remote_engine_id: 'e', remote_request_id: 'r', remote_host: 'h', remote_port: 5600 };
  const imp = classifyKvTransferParams(full);
  assert.equal(imp.kind, 'import');
  assert.ok(imp.kind === 'import' && imp.params.remoteBlockIds.length === 1);
  assert.equal(classifyKvTransferParams({ ...full, remote_block_ids: [[1], [2]] }).kind, 'import');
  for (const k of ['remote_block_ids', 'remote_engine_id', 'remote_request_id', 'remote_host', 'remote_port']) {
    const p: Record<string, unknown> = { ...full };
    delete p[k];
    assert.deepEqual(classifyKvTransferParams(p), { kind: 'invalid', reason: k });
  }
});

test('--kv-events-config: vLLM keys and defaults; publisher follows the switch; bind vs connect', () => {
  const off = parseKvEventsConfig(undefined);
  assert.equal(off.enableKvCacheEvents, false);
  assert.equal(off.publisher, 'null');
  const on = parseKvEventsConfig('{"enable_kv_cache_events": true}');
  assert.deepEqual(on, { enableKvCacheEvents: true, publisher: 'zmq', endpoint: 'tcp://*:5557', replayEndpoint: null, bufferSteps: 10000, hwm: 100000, maxQueueSize: 100000, topic: '' });
  assert.equal(parseKvEventsConfig({ enable_kv_cache_events: true, publisher: 'null' }).publisher, 'null');
  assert.throws(() => parseKvEventsConfig({ buffer_steps: 0 }), /buffer_steps/);
  assert.throws(() => parseKvEventsConfig('[]'), /JSON object/);
  assert.equal(shouldBind('tcp://*:5557'), true);
  assert.equal(shouldBind('tcp://[::]:5557'), true);
  assert.equal(shouldBind('ipc:///tmp/kv'), true);
  assert.equal(shouldBind('inproc://kv'), true);
  assert.equal(shouldBind('tcp://indexer:5557'), false);
});

test('a deeply nested value in a typed field is a 400 naming the field, not a 500 from JSON.stringify (fuzz regression)', () => {
  // Found by the gateway fuzzer (bench/fuzz.ts): {"seed": [[[…]]]} 10k deep answered 500 "Maximum call stack size exceeded".
  const deep = JSON.parse('['.repeat(10_000) + ']'.repeat(10_000)) as unknown;
  for (const key of ['seed', 'stream', 'temperature']) {
    assert.throws(() => parseGenerationRequest('completion', { prompt: 'x', [key]: deep }), (e: unknown) => e instanceof HttpError && e.status === 400 && e.message.startsWith(`${key}: `), key);
  }
});
