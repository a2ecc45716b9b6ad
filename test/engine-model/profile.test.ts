import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_OFFLOAD, kvBytesPerToken, offloadLoadTime, prefillTime, stepTime, transferTime } from '../../src/engine-model/figures.js';
import { loadProfile, profileNames, resolveProfile } from '../../src/engine-model/profile.js';
import { tinyProfile } from '../sim/helpers.js';

test('shipped profiles load, cite sources, and derive KV size and capacity from the model and GPU', () => {
  const h20 = resolveProfile(loadProfile('h20-qwen3-coder'));
  // 2 × 48 layers × 4 KV heads × 128 × 2 bytes = 98,304 B ≈ 98 KB per token: a 33.6k prompt holds ≈ 3.3 GB.
  assert.equal(h20.kvBytesPerToken, 98304);
  assert.ok(Math.abs(33600 * h20.kvBytesPerToken / 1e9 - 3.3) < 0.01);
  assert.ok(h20.numGpuBlocks * h20.blockSize > 400_000, 'an H20 holds a dozen 33.6k-token sessions');
  assert.ok(h20.sources.length > 0);
  const h100 = resolveProfile(loadProfile('h100-llama-3.1-8b'));
  assert.equal(h100.kvBytesPerToken, 131072);
  assert.equal(h100.numGpuBlocks, Math.floor((79.6 * 0.9 - 14.96 - 4) * 2 ** 30 / (131072 * 16)));
  // A cold 33.6k-token prefill on the H20 profile, chunked by 8192: seconds, not milliseconds or minutes.
  let t = 0;
  for (let past = 0; past < 33600; past += 8192) t += stepTime(h20.step, [Math.min(8192, 33600 - past)], [past], 1, 0, 0);
  assert.ok(t > 3 && t < 20, `${t}`);
  // prefillTime is those chunked steps in closed form.
  assert.ok(Math.abs(prefillTime(h20, 33600) - t) < 1e-9, `${prefillTime(h20, 33600)} vs ${t}`);
  assert.ok(Math.abs(transferTime(h20, 33600) - (0.005 + 33600 * 98304 / 4e10)) < 1e-12);
  // A shared-store hit costs load bandwidth, not prefill: the same prefix loads an order of magnitude faster.
  assert.ok(Math.abs(offloadLoadTime(h20, 33600) - (0.01 + 33600 * 98304 / 1.5e10)) < 1e-12);
  assert.ok(offloadLoadTime(h20, 33600) * 10 < t);
  // A profile without an offload section gets the documented default.
  assert.equal(offloadLoadTime(resolveProfile(tinyProfile()), 1000), DEFAULT_OFFLOAD.setup + 1000 * 32 / DEFAULT_OFFLOAD.loadBytesPerSecond);
});

test('prefill after a cached prefix: the steps of the chunks, each attending to everything before it', () => {
  const p = tinyProfile(); // chunks of 64
  let t = 0;
  for (let past = 40; past < 40 + 150; past += 64) t += stepTime(p.step, [Math.min(64, 40 + 150 - past)], [past], 1, 0, 0);
  assert.ok(Math.abs(prefillTime(p, 150, 40) - t) < 1e-12);
  assert.equal(prefillTime(p, 0), 0);
});

test('bad profiles and names get clear errors', () => {
  assert.throws(() => loadProfile('../etc/passwd'), /profile name/);
  assert.throws(() => loadProfile('no-such-profile'), /unknown engine profile "no-such-profile" \(known: h100-llama-3.1-8b, h20-qwen3-coder\)/);
  assert.deepEqual(profileNames(), ['h100-llama-3.1-8b', 'h20-qwen3-coder']);
  assert.throws(() => resolveProfile(tinyProfile({ blockSize: 0 })), /blockSize must be a positive integer/);
  assert.throws(() => resolveProfile(tinyProfile({ sources: [] })), /sources/);
  assert.throws(() => resolveProfile(tinyProfile({ weightsGiB: 10 })), /no memory left/);
  assert.throws(() => resolveProfile({ ...tinyProfile(), step: { ...tinyProfile().step, stepOverhead: 0 } }), /stepOverhead/);
  assert.equal(kvBytesPerToken(tinyProfile().model), 32);
  assert.throws(() => resolveProfile(tinyProfile({ offload: { loadBytesPerSecond: 0, setup: 0 } })), /offload.loadBytesPerSecond must be a positive number/);
  assert.throws(() => resolveProfile(tinyProfile({ offload: { loadBytesPerSecond: 1, setup: -1 } })), /offload.setup must be a number ≥ 0/);
});
