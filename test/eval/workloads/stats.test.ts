import { test } from 'node:test';
import assert from 'node:assert/strict';
import { workloadStats } from '../../../src/eval/workloads/stats.js';
import type { ClosedLoopWorkload, Session, Turn } from '../../../src/eval/workloads/types.js';

const turn = (keepBlocks: number, newBlocks: number[], outputTokens: number, thinkTime = 0): Turn =>
  ({ keepBlocks, newBlocks: Uint32Array.from(newBlocks), promptTokens: keepBlocks + newBlocks.length, outputTokens, thinkTime, nominalServiceTime: 1 });

test('realised statistics on a constructed workload: ratio, mean, top share and the reuse split', () => {
  // Blocks of one token. Shared system blocks 1, 2; session a: [1,2,10] then [1,2,10,11]; b (later): [1,2,10,20].
  const a: Session = { id: 'a', parentId: null, client: 'c', start: 0, turns: [turn(0, [1, 2, 10], 1), turn(3, [11], 1, 1)], children: [] };
  const b: Session = { id: 'b', parentId: null, client: 'c', start: 5, turns: [turn(0, [1, 2, 10, 20], 2)], children: [] };
  const w: ClosedLoopWorkload = { kind: 'closed', name: 't', blockSize: 1, seed: 1, sharedPrefixBlocks: new Set([1, 2]), config: {}, sessions: [a, b], arrival: { mode: 'poisson', rate: 1 } };
  const s = workloadStats(w);
  // a/1 hits 1,2,10 in its own session (3 intra); b/0 hits 1,2 (shared prefix) and 10 (cross-session). Restricted
  // to its own session's blocks, b/0 hits nothing: the intra-session bound is 3 / 11.
  assert.deepEqual(s, {
    requests: 3, sessions: 2, promptTokens: 11, outputTokens: 4, promptOutputRatio: 11 / 4, meanPrompt: 11 / 3, p99Prompt: 4,
    top1PctTokenShare: 7 / 11, reusableShare: 6 / 11, intraSessionShare: 3 / 11,
    reuseSplit: { intraSession: 3 / 6, crossSession: 1 / 6, sharedPrefix: 2 / 6 },
  });
});
