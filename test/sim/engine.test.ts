import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SimEngine, EngineFullError, ContextLengthError, KvCapacityError } from '../../src/sim/engine.js';
import { digestToU64 } from '../../src/sim/block-hash.js';
import type { BlockStored, BlockRemoved } from '../../src/kvevents/types.js';
import { drain, range, req, tinyProfile } from './helpers.js';

const stored = (evs: unknown[]): Array<BlockStored<Uint8Array>> => evs.filter((e) => (e as { type: string }).type === 'BlockStored') as Array<BlockStored<Uint8Array>>;

test('a repeated prompt is served from the prefix cache in whole blocks', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64 });
  e.addRequest(req('a', range(1, 22)));
  const first = drain(e);
  assert.equal(first.finished.get('a')!.numCachedTokens, 0);
  e.addRequest(req('b', range(1, 22)));
  const second = drain(e, first.t);
  const b = second.finished.get('b')!;
  // 22 prompt tokens = 5 full blocks of 4, all cached (the 22nd token is in a partial block anyway).
  assert.equal(b.numCachedTokens, 20);
  assert.equal(b.numCachedTokens % 4, 0);
  assert.equal(b.metrics!.numCachedTokens, 20);
  const s = e.stats();
  assert.equal(s.prefixCacheQueries, 44);
  assert.equal(s.prefixCacheHits, 20);
  assert.equal(s.promptTokens, 44);
  assert.equal(s.generationTokens, 16);
  // A fully cached prompt still computes its last token: 20 tokens hit at most 4 blocks (16), not 5.
  e.addRequest(req('c', range(1, 20)));
  assert.equal(drain(e, second.t).finished.get('c')!.numCachedTokens, 16);
});

test('BlockStored chains parents, carries the tokens of its blocks, and is published for generated tokens too', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64 });
  e.addRequest(req('a', range(1, 10), { maxTokens: 10, loraName: 'ad', cacheSalt: 'salt' }));
  const d = drain(e);
  const evs = stored(d.events);
  const hashes = evs.flatMap((x) => x.blockHashes);
  // 10 prompt + 10 generated, the last generated token's KV never computed: 19 computed → 4 full blocks.
  assert.equal(hashes.length, 4);
  const all = [...range(1, 10), ...d.tokens.get('a')!];
  assert.deepEqual(evs.flatMap((x) => x.tokenIds), all.slice(0, 16));
  assert.equal(evs[0].parentBlockHash, null);
  for (let i = 1; i < evs.length; i++) assert.deepEqual(evs[i].parentBlockHash, evs[i - 1].blockHashes.at(-1));
  assert.equal(evs[0].medium, 'GPU');
  assert.equal(evs[0].loraName, 'ad');
  assert.equal(evs[0].blockSize, 4);
  assert.deepEqual(evs[0].extraKeys![0], ['ad', 'salt']);
  assert.deepEqual(evs.at(-1)!.extraKeys!.at(-1), ['ad']);
  // The blocks holding generated tokens are hits for a follow-up turn that extends the conversation.
  e.addRequest(req('next', [...all.slice(0, 19), 99, 98], { loraName: 'ad', cacheSalt: 'salt' }));
  assert.equal(drain(e, d.t).finished.get('next')!.numCachedTokens, 16);
  // A different salt shares nothing.
  e.addRequest(req('other', all.slice(0, 19), { loraName: 'ad', cacheSalt: 'pepper' }));
  assert.equal(drain(e, d.t + 10).finished.get('other')!.numCachedTokens, 0);
});

test('host-supplied block hashes are used as they are (the host vouches for them)', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64 });
  const digests = e.hasher.extend([], range(1, 12), null, null);
  e.addRequest(req('a', range(1, 12), { blockHashes: digests.slice(0, 2) }));
  const d = drain(e);
  assert.deepEqual(stored(d.events)[0].blockHashes.map(digestToU64), digests.map(digestToU64));
  assert.throws(() => e.addRequest(req('bad', range(1, 12), { blockHashes: [new Uint8Array(8)] })), /32-byte/);
});

test('a small cache evicts the least recently freed block and reports BlockRemoved', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 8 });
  e.addRequest(req('a', range(1, 16), { maxTokens: 1 }));
  const a = drain(e);
  const aHashes = stored(a.events).flatMap((x) => x.blockHashes).map(digestToU64);
  assert.equal(aHashes.length, 4);
  e.addRequest(req('b', range(100, 24), { maxTokens: 1 }));
  const b = drain(e, a.t);
  const removed = (b.events.filter((x) => x.type === 'BlockRemoved') as Array<BlockRemoved<Uint8Array>>).flatMap((x) => x.blockHashes).map(digestToU64);
  // b needs 7 blocks: the 4 never-cached free blocks go first, then a's blocks, its last block first.
  assert.ok(removed.length >= 1);
  for (const h of removed) assert.ok(aHashes.includes(h));
  assert.equal(removed[0], aHashes[3]);
  e.addRequest(req('a2', range(1, 16), { maxTokens: 1 }));
  assert.ok(drain(e, b.t).finished.get('a2')!.numCachedTokens < 12);
});

test('when blocks run out the newest running request is preempted, recomputed, and still completes', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 12 });
  for (let i = 0; i < 4; i++) e.addRequest(req(`r${i}`, range(1000 * i, 8), { maxTokens: 16 }));
  const d = drain(e);
  const s = e.stats();
  assert.ok(s.preemptions > 0, 'expected a preemption');
  assert.equal(d.finished.size, 4);
  for (const [id, o] of d.finished) {
    assert.equal(o.finished, 'length');
    assert.equal(d.tokens.get(id)!.length, 16, `${id} produced all its tokens once`);
  }
  assert.ok([...d.finished.values()].some((o) => o.metrics!.numPreemptions > 0));
  assert.equal(s.kvUsage, 0);
  // Preempted output is the same as an unpreempted run of the same request.
  const solo = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64 });
  solo.addRequest(req('r3', range(3000, 8), { maxTokens: 16 }));
  assert.deepEqual(drain(solo).tokens.get('r3'), d.tokens.get('r3'));
});

test('step time follows the profile formulas (by hand, one prefill then decodes)', () => {
  const p = tinyProfile();
  const e = new SimEngine({ profile: p, numGpuBlocks: 64 });
  e.addRequest(req('a', range(1, 10), { maxTokens: 3 }));
  e.addRequest(req('b', range(50, 6), { maxTokens: 3 }));
  const r1 = e.step(0);
  // Both prefill: 0.01 + Σ (0.001·n + 1e-5·n·(0 + n/2)), n = 10 and 6.
  const prefill = 0.01 + (0.001 * 10 + 1e-5 * 10 * 5) + (0.001 * 6 + 1e-5 * 6 * 3);
  assert.ok(Math.abs(r1.duration - prefill) < 1e-12, `${r1.duration} vs ${prefill}`);
  assert.equal(e.stats().pendingPrefillTokens, 0);
  const r2 = e.step(r1.duration);
  // Both decode: 0.01 + 0.002·2 + 0.0001·(11 + 7).
  assert.ok(Math.abs(r2.duration - (0.01 + 0.002 * 2 + 0.0001 * 18)) < 1e-12, `${r2.duration}`);
});

test('chunked prefill splits a long prompt under max_num_batched_tokens and pending prefill drains', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 256 });
  e.addRequest(req('long', range(1, 150), { maxTokens: 2 }));
  assert.equal(e.stats().pendingPrefillTokens, 150);
  const r1 = e.step(0);
  assert.deepEqual(r1.outputs.map((o) => o.newTokenIds.length), [0]);
  assert.equal(e.stats().pendingPrefillTokens, 150 - 64);
  // Second chunk: n = 64 after p = 64 computed tokens.
  const r2 = e.step(1);
  assert.ok(Math.abs(r2.duration - (0.01 + 0.001 * 64 + 1e-5 * 64 * (64 + 32))) < 1e-12);
  const d = drain(e, 2);
  assert.equal(d.tokens.get('long')!.length, 2);
});

test('stop tokens end generation after min_tokens; output is deterministic for (seed, prompt)', () => {
  const vocab = [[5, 6], [7], [2]];
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64, vocabulary: vocab });
  e.addRequest(req('s', range(1, 8), { maxTokens: 50, stopTokenIds: [2], minTokens: 0 }));
  e.addRequest(req('m', range(1, 8), { maxTokens: 50, stopTokenIds: [2], minTokens: 10 }));
  e.addRequest(req('n', range(1, 8), { maxTokens: 50, stopTokenIds: [] }));
  const d = drain(e);
  const s = d.tokens.get('s')!;
  assert.equal(d.finished.get('s')!.finished, 'stop');
  assert.equal(d.finished.get('s')!.stopReason, 2);
  assert.equal(s.at(-1), 2);
  assert.equal(s.indexOf(2), s.length - 1);
  const m = d.tokens.get('m')!;
  assert.equal(d.finished.get('m')!.finished, 'stop');
  assert.ok(m.length >= 10);
  assert.equal(m.slice(9).indexOf(2), m.length - 10, 'the first stop token at or after min_tokens ends it');
  assert.equal(d.finished.get('n')!.finished, 'length');
  assert.equal(d.tokens.get('n')!.length, 50);
  for (const t of d.tokens.get('n')!) assert.ok([5, 6, 7, 2].includes(t));
  const again = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64, vocabulary: vocab });
  again.addRequest(req('n', range(1, 8), { maxTokens: 50 }));
  again.addRequest(req('n2', range(1, 8), { maxTokens: 50, seed: 8 }));
  const d2 = drain(again);
  assert.deepEqual(d2.tokens.get('n'), d.tokens.get('n'));
  assert.notDeepEqual(d2.tokens.get('n2'), d.tokens.get('n'));
});

test('an export stops after one token and holds its blocks until released or expired', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64, holdTimeout: 100 });
  e.addRequest(req('x', range(1, 18), { maxTokens: 9, kvExport: true }));
  const d = drain(e);
  const out = d.finished.get('x')!;
  assert.equal(out.finished, 'length');
  assert.equal(d.tokens.get('x')!.length, 1);
  assert.equal(out.heldBlockIds!.length, 5);
  assert.equal(e.stats().kvUsage, 5 / 64);
  assert.deepEqual(e.heldBlocks('x'), range(1, 16));
  assert.throws(() => e.addRequest(req('x', [1])), /already in use/);
  assert.equal(e.resetPrefixCache(), false, 'held blocks are in use');
  assert.equal(e.releaseHeld('x'), true);
  assert.equal(e.releaseHeld('x'), false);
  assert.equal(e.stats().kvUsage, 0);
  assert.equal(e.heldBlocks('x'), null);
  // Expiry: a second export is released lazily by a step (or expireHolds) after the timeout.
  e.addRequest(req('y', range(1, 18), { kvExport: true }));
  const d2 = drain(e, 10);
  assert.ok(e.heldBlocks('y') !== null);
  e.expireHolds(d2.t + 99);
  assert.ok(e.heldBlocks('y') !== null);
  e.step(d2.t + 100.5);
  assert.equal(e.heldBlocks('y'), null);
  assert.equal(e.expiredHolds, 1);
  e.check();
});

test('an import pulls the blocks it lacks, waits for the transfer, then gets ordinary prefix hits', () => {
  const p = tinyProfile();
  const src = new SimEngine({ profile: p, numGpuBlocks: 64 });
  const dst = new SimEngine({ profile: p, numGpuBlocks: 64 });
  const prompt = range(1, 16);
  src.addRequest(req('x', prompt, { kvExport: true }));
  drain(src);
  const held = src.heldBlocks('x')!;
  // The target already has the first block of this prefix.
  dst.addRequest(req('warm', range(1, 5), { maxTokens: 1 }));
  const w = drain(dst);
  dst.addRequest(req('imp', prompt, { maxTokens: 4, kvImport: { prefixTokenIds: held, sourceEngineId: 'src' } }));
  const t0 = w.t;
  const r = dst.step(t0);
  assert.equal(r.outputs.length, 0);
  // 3 missing blocks × 4 tokens × kv bytes per token (2·2·1·4·2 = 32) / 1000 B/s + 0.5 s setup.
  const ready = t0 + 0.5 + (3 * 4 * 32) / 1000;
  assert.ok(Math.abs(dst.nextStepTime(t0)! - ready) < 1e-9);
  assert.equal(dst.stats().waiting, 1);
  assert.equal(dst.importedTokens, 12);
  const d = drain(dst, t0);
  const out = d.finished.get('imp')!;
  // All 16 prompt tokens are on the target; the last one is recomputed, so 15 count as cached.
  assert.equal(out.numCachedTokens, 15);
  assert.ok(out.metrics!.firstScheduledTime >= ready - 1e-9);
  const pulled = stored(d.events).flatMap((x) => x.tokenIds);
  assert.deepEqual(pulled.slice(0, 12), range(5, 12));
  src.releaseHeld('x');
  dst.addRequest(req('later', [...prompt, 77, 78], { maxTokens: 1 }));
  assert.equal(drain(dst, d.t).finished.get('later')!.numCachedTokens, 16);
});

test('an import whose prefix is already local pulls nothing', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64 });
  e.addRequest(req('a', range(1, 12), { maxTokens: 1 }));
  const a = drain(e);
  e.addRequest(req('b', range(1, 13), { maxTokens: 1, kvImport: { prefixTokenIds: range(1, 12), sourceEngineId: 's' } }));
  const b = drain(e, a.t);
  assert.equal(e.importedTokens, 0);
  assert.equal(b.finished.get('b')!.numCachedTokens, 12);
});

test('reset_prefix_cache refuses while requests run, then clears every hash', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64 });
  e.addRequest(req('a', range(1, 12)));
  e.step(0);
  assert.equal(e.resetPrefixCache(), false);
  const d = drain(e, 1);
  assert.equal(e.resetPrefixCache(), true);
  assert.deepEqual(e.takeKvEvents(), [{ type: 'AllBlocksCleared' }]);
  e.addRequest(req('b', range(1, 12)));
  assert.equal(drain(e, d.t).finished.get('b')!.numCachedTokens, 0);
});

test('abort frees blocks wherever the request is; bad input gets clear errors; the queue is bounded', () => {
  const e = new SimEngine({ profile: tinyProfile(), numGpuBlocks: 64, maxWaiting: 2 });
  e.addRequest(req('a', range(1, 12)));
  e.step(0);
  assert.ok(e.stats().kvUsage > 0);
  assert.equal(e.abortRequest('a'), true);
  assert.equal(e.abortRequest('a'), false);
  assert.equal(e.stats().kvUsage, 0);
  e.check();
  assert.throws(() => e.addRequest(req('e', [])), /at least one token/);
  assert.throws(() => e.addRequest(req('e', [1.5])), /non-negative integer/);
  assert.throws(() => e.addRequest(req('e', [1], { maxTokens: 0 })), /maxTokens/);
  // Over max_model_len: vLLM's two messages, under a stable code (a 400, as every bad input).
  const tooLong = (re: RegExp) => (err: unknown) => err instanceof ContextLengthError && err.status === 400 &&
    err.code === 'EAR_ERR_CONTEXT_LENGTH' && err.name === 'ContextLengthError' && re.test(err.message);
  assert.throws(() => e.addRequest(req('e', range(1, 4000), { maxTokens: 200 })),
    tooLong(/^'max_tokens' or 'max_completion_tokens' is too large: 200\. This model's maximum context length is 4096 tokens and your request has 4000 input tokens \(200 > 4096 - 4000\)\.$/));
  assert.throws(() => e.addRequest(req('e', range(1, 4200))),
    tooLong(/^This model's maximum context length is 4096 tokens\. However, your request has 4200 input tokens\. Please reduce the length of the input messages\.$/));
  assert.throws(() => e.addRequest(req('e', range(1, 300))), (err: unknown) => err instanceof KvCapacityError && err.code === 'EAR_ERR_KV_CAPACITY' && /KV cache/.test(err.message));
  assert.throws(() => e.addRequest(req('e', [1], { kvImport: { prefixTokenIds: 5 as unknown as number[], sourceEngineId: 's' } })), /kvImport/);
  assert.throws(() => e.addRequest(req('e', [1], { kvExport: true, kvImport: { prefixTokenIds: [1], sourceEngineId: 's' } })), /both/);
  e.addRequest(req('w1', [1]));
  e.addRequest(req('w2', [1]));
  assert.throws(() => e.addRequest(req('w3', [1])), EngineFullError);
  assert.equal(e.nextStepTime(5), 5);
});
