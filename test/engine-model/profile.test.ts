import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DEFAULT_OFFLOAD, kvBytesPerToken, offloadLoadTime, prefillTime, stepTime, transferTime } from '../../src/engine-model/figures.js';
import { loadProfile, profileNames, resolveProfile } from '../../src/engine-model/profile.js';
import { readFileSync } from 'node:fs';
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
  assert.throws(() => loadProfile('no-such-profile'), /unknown engine profile "no-such-profile" \(known: h100-llama-3.1-8b, h20-qwen3-coder, h200-llama-3.1-8b\)/);
  assert.deepEqual(profileNames(), ['h100-llama-3.1-8b', 'h20-qwen3-coder', 'h200-llama-3.1-8b']);
  assert.throws(() => resolveProfile(tinyProfile({ blockSize: 0 })), /blockSize must be a positive integer/);
  assert.throws(() => resolveProfile(tinyProfile({ sources: [] })), /sources/);
  assert.throws(() => resolveProfile(tinyProfile({ weightsGiB: 10 })), /no memory left/);
  assert.throws(() => resolveProfile({ ...tinyProfile(), step: { ...tinyProfile().step, stepOverhead: 0 } }), /stepOverhead/);
  assert.equal(kvBytesPerToken(tinyProfile().model), 32);
  assert.throws(() => resolveProfile(tinyProfile({ offload: { loadBytesPerSecond: 0, setup: 0 } })), /offload.loadBytesPerSecond must be a positive number/);
  assert.throws(() => resolveProfile(tinyProfile({ offload: { loadBytesPerSecond: 1, setup: -1 } })), /offload.setup must be a number ≥ 0/);
});

test('the measured H200 profile reproduces every calibration point within 25%', () => {
  const h200 = resolveProfile(loadProfile('h200-llama-3.1-8b'));
  // The run the profile was fitted to (test/fixtures/engine-calibration/README.md): seconds measured on the GPU.
  const run = JSON.parse(readFileSync(new URL('../../../test/fixtures/engine-calibration/h200-llama-3.1-8b-2026-11-28.json', import.meta.url), 'utf8')) as {
    prefill: Array<{ n: number; p: number; s: number }>;
    decode: Array<{ D: number; C: number; graph: number }>;
  };
  assert.equal(run.prefill.length, 12);
  assert.equal(run.decode.length, 7);
  const off: string[] = [];
  const check = (what: string, predicted: number, measured: number): void => {
    if (Math.abs(predicted - measured) > 0.25 * measured) off.push(`${what}: ${predicted.toFixed(4)} s predicted, ${measured.toFixed(4)} s measured`);
  };
  // A prefill point is one chunk of n new tokens after p computed ones, nothing decoding (chunks ≤ 8192 fit one step).
  for (const { n, p, s } of run.prefill) check(`prefill n=${n} p=${p}`, stepTime(h200.step, [n], [p], 1, 0, 0), s);
  // A decode point is one step of D sequences of C context each, replayed as a CUDA graph as vLLM does.
  for (const { D, C, graph } of run.decode) check(`decode D=${D} C=${C}`, stepTime(h200.step, [], [], 0, D, D * C), graph);
  assert.deepEqual(off, []);
  // The published H100 estimate misses the same points by more: the reason this profile exists.
  const h100 = resolveProfile(loadProfile('h100-llama-3.1-8b'));
  const miss = run.prefill.filter(({ n, p, s }) => Math.abs(stepTime(h100.step, [n], [p], 1, 0, 0) - s) > 0.25 * s).length +
    run.decode.filter(({ D, C, graph }) => Math.abs(stepTime(h100.step, [], [], 0, D, D * C) - graph) > 0.25 * graph).length;
  assert.ok(miss >= 5, `${miss} of 19 points off by more than 25% under h100-llama-3.1-8b`);
  // The memory side: the same KV per token as the H100 profile, on a larger card.
  assert.equal(h200.kvBytesPerToken, 131072);
  assert.equal(h200.numGpuBlocks, Math.floor((140 * 0.9 - 14.96 - 4) * 2 ** 30 / (131072 * 16)));
});
