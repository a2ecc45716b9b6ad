// Issue 13: new sessions arriving one at a time on an idle fleet must spread over it. A tie-break rotation on
// every decision lined up with the pod count whenever each session's turns were a multiple of it, and every
// new session landed on the same pod, the hot spot once they all woke up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createAndAttach } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { RoutingHost, type HostRequest } from '../../src/core/routing-host.js';
import { createPolicy } from '../../src/core/policies/index.js';

const MODEL = 'm';
const NONE = new Set<number>();
const PODS = 4;

for (const policy of ['sticky', 'ear', 'ear-proactive']) {
  for (const turns of [1, PODS, 2 * PODS, PODS + 1]) {
    test(`${policy}: sessions of ${turns} turns arriving one at a time on an idle fleet take the pods in turn`, () => {
      const region = createAndAttach({ prefixIndexKeys: 1 << 12, sessions: 256, heapJobs: 16, recordRingOps: 4096, pods: 8, scratchSlots: 12, scratchBytes: 1 << 16 });
      const host = new RoutingHost(region, { policy: createPolicy(policy), blockSize: 16, sessionTtlMs: 3_600_000, random: () => 0.5 });
      for (let i = 0; i < PODS; i++) host.addPod({ id: `p${i}`, role: 'both', models: new Set([MODEL]), state: 'ready' });
      const hasher = new BlockHasher(region);
      let now = 0;
      const hostOf: number[] = [];
      for (let s = 0; s < 3 * PODS; s++) {
        // Each session's own prompt (no prefix shared with another session's), growing turn by turn.
        for (let t = 0; t < turns; t++) {
          const tokens = Array.from({ length: 64 * (t + 1) }, (_, i) => 1 + s * 100_000 + i);
          const span = hasher.hash(tokens, 16, hasher.rootSeed(MODEL));
          const req: HostRequest = { model: MODEL, sessionId: `s${s}`, parentSessionId: null, promptTokens: tokens.length, blockKeys: new BigUint64Array(region.memory.buffer, span.ptr, span.count).slice(), maxTokens: null, user: null };
          const p = host.route(req, NONE, now);
          host.dispatched(p, now);
          host.firstToken(p, now + 1);
          host.finished(p, { promptTokens: tokens.length, completionTokens: 8 }, now + 2);
          if (t === 0) hostOf.push(p.pod);
          else assert.equal(p.pod, hostOf[s], 'a later turn stays on its idle host');
          now += 10;
        }
      }
      const perPod = new Array<number>(PODS).fill(0);
      for (const pod of hostOf) perPod[pod]++;
      assert.deepEqual(perPod, new Array<number>(PODS).fill(3), `sessions per pod: ${perPod.join(', ')}`);
    });
  }
}
