// A move is timed at its decision (the session's lastMigration, which the policy's tCool is judged on), not at
// its dispatch: a placement held at the gateway is dispatched later, and two moves decided tCool apart must not
// read as thrash. Here the first move parks behind a long request on its target (max-concurrent 1) until just
// before the second move is decided.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runDes } from '../../../src/eval/drivers/des.js';
import { registerPolicy } from '../../../src/core/policies/index.js';
import type { OpenLoopWorkload, OpenRequest } from '../../../src/eval/workloads/index.js';

const T_COOL = 5;

// New sessions alternate between the two pods; a known session moves to the other pod once tCool has passed since
// its last move (as ear's trigger allows it), else stays.
registerPolicy('test-move-after-cool', () => {
  let fresh = 0;
  return {
    name: 'test-move-after-cool',
    route (req, cluster, now) {
      const s = req.sessionKey === null ? undefined : cluster.sessions.get(req.sessionKey);
      if (s === undefined || s === null || s.host < 0) return { pod: cluster.pods[fresh++ % 2].index, reason: 'new-session' };
      if (now - s.lastMigration < T_COOL * 1000) return { pod: s.host, reason: 'sticky' };
      return { pod: s.host === 0 ? 1 : 0, migrateFrom: s.host, reason: 'move' };
    }
  };
});

let nextBlock = 1;
function open (sessionId: string, turn: number, at: number, promptTokens: number, outputTokens: number, final: boolean): OpenRequest {
  const newBlocks = Uint32Array.from({ length: Math.ceil(promptTokens / 16) }, () => nextBlock++);
  return { at, sessionId, turn, final, outputTokens, keepBlocks: 0, newBlocks, promptTokens };
}

test('des: a parked move is timed at its decision, so moves decided tCool apart are no thrash', () => {
  // a starts on pod 0, the blocker on pod 1 with a long output; a's turn at 10 s moves to pod 1 and waits there
  // (max-concurrent 1) until the blocker ends, near a's turn at 20 s, which moves back to pod 0 at once.
  const requests = [
    open('a', 0, 0, 256, 2, false), open('blocker', 0, 1, 256, 2600, true),
    open('a', 1, 10, 256, 2, false), open('a', 2, 20, 256, 2, true)
  ];
  const workload: OpenLoopWorkload = { kind: 'open', name: 'parked-move', blockSize: 16, seed: 1, sharedPrefixBlocks: new Set(), config: {}, requests };
  const r = runDes({ workload, policy: 'test-move-after-cool', engines: 2, profile: 'h100-llama-3.1-8b', seed: 1, maxConcurrent: 1, kvConnector: 'recompute', tCool: T_COOL });
  const s = r.summary;
  assert.equal(s.requests.completed, 4);
  assert.equal(s.migrations.count, 2, JSON.stringify(s.migrations));
  assert.ok(r.admission.longestWaitMs > T_COOL * 1000, `the first move waited ${r.admission.longestWaitMs} ms at the gateway`);
  assert.deepEqual(s.timeline.migrations.map((m) => m.t), [10, 20], 'timed at the decisions');
  assert.equal(s.migrations.thrash, 0);
});
