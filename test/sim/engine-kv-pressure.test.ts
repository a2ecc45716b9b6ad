// An engine under KV pressure must keep moving. The lab's ear run at numGpuBlocks=8192 hung with, on one engine,
// a self-preempted 48k-token request at the head of the queue, a landed 92k-token import behind it holding 5762 of
// the 8192 blocks, and nothing running: the step that preempted was taken for a stall (so the engine never stepped
// again), and FCFS stopped at the head, which could not fit while the import held its blocks. vLLM had the second
// deadlock too (vllm-project/vllm#45388, #57841): its scan stopped at the head and never reached the parked request.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SimEngine } from '../../src/sim/engine.js';
import { drain, range, req, tinyProfile } from './helpers.js';

test('a landed import behind a head that cannot fit still runs, and the head runs once it has finished', () => {
  // 20 blocks of 4 tokens. R (32-token prompt, 40 to generate) runs; L pulls a 10-block prefix meanwhile.
  // R's decode eats the 2 free blocks, L lands with none left, R preempts itself and returns to the head of
  // the queue needing 11 blocks while L (10 held) needs 1 more: 10 free, and nothing runs.
  const e = new SimEngine({ profile: tinyProfile({ maxNumSeqs: 2 }), numGpuBlocks: 20 });
  e.addRequest(req('R', range(1, 32), { maxTokens: 40, ignoreEos: true }));
  e.addRequest(req('L', range(1000, 41), { maxTokens: 1, kvImport: { prefixTokenIds: range(1000, 40), sourceEngineId: 's' } }));
  const d = drain(e);
  assert.equal(d.finished.get('L')?.finished, 'length', 'the landed import finished');
  assert.equal(d.finished.get('R')?.finished, 'length', 'the head finished after it');
  assert.equal(d.tokens.get('R')!.length, 40);
  assert.ok(e.stats().preemptions >= 1, 'the scenario did preempt R');
  assert.equal(e.stats().waiting + e.stats().running, 0);
});

test('a step that only preempts leaves the engine ready to step again (the lab\'s hang: the import had landed before)', () => {
  // As above, but L's pull lands before R preempts itself, so no transfer is left to wake the engine: the step
  // that preempted R scheduled nothing, and the engine took that for a stall and never stepped again.
  const e = new SimEngine({ profile: tinyProfile({ maxNumSeqs: 2, transfer: { bytesPerSecond: 1e6, setup: 0.13 } }), numGpuBlocks: 20 });
  e.addRequest(req('R', range(1, 32), { maxTokens: 40, ignoreEos: true }));
  e.addRequest(req('L', range(1000, 41), { maxTokens: 1, kvImport: { prefixTokenIds: range(1000, 40), sourceEngineId: 's' } }));
  const d = drain(e);
  assert.equal(d.finished.get('L')?.finished, 'length', 'the landed import finished');
  assert.equal(d.finished.get('R')?.finished, 'length', 'the head finished after it');
  assert.equal(e.stats().preemptions, 1);
});

test('when nothing runs and no waiting request fits, landed KV is dropped (newest first) and every request completes', () => {
  // 24 blocks. R (12-token prompt) runs while L1 and L2 each pull a 10-block prefix: 1 block left. R preempts
  // itself on its 17th token and needs 5 blocks at the head of the queue; L1 and L2 land needing 5 more each;
  // 4 are free and nothing runs. Only giving up one landed prefix (it stays cached) lets the queue move.
  const e = new SimEngine({ profile: tinyProfile({ maxNumSeqs: 4 }), numGpuBlocks: 24 });
  e.addRequest(req('R', range(1, 12), { maxTokens: 20, ignoreEos: true }));
  e.addRequest(req('L1', range(1000, 60), { maxTokens: 1, kvImport: { prefixTokenIds: range(1000, 40), sourceEngineId: 's' } }));
  e.addRequest(req('L2', range(2000, 60), { maxTokens: 1, kvImport: { prefixTokenIds: range(2000, 40), sourceEngineId: 's' } }));
  const d = drain(e);
  for (const id of ['R', 'L1', 'L2']) assert.equal(d.finished.get(id)?.finished, 'length', `${id} finished`);
  assert.equal(d.tokens.get('R')!.length, 20);
  assert.ok(e.stats().preemptions >= 2, `R preempted itself and L2 gave up its KV (${e.stats().preemptions} preemptions)`);
  // L2's pulled prefix entered the prefix cache when it landed: after the drop it is still counted as cached.
  assert.ok(d.finished.get('L2')!.numCachedTokens >= 40);
});
