// Issue 13: new sessions arriving one at a time on an idle fleet must spread over it. A tie-break rotation on
// every decision lined up with the pod count whenever each session's turns were a multiple of it, and every
// new session landed on the same pod, the hot spot once they all woke up.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { routingHost } from '../fixtures/host.js';

const NONE = new Set<number>();
const PODS = 4;

for (const policy of ['sticky', 'ear', 'ear-proactive']) {
  for (const turns of [1, PODS, 2 * PODS, PODS + 1]) {
    test(`${policy}: sessions of ${turns} turns arriving one at a time on an idle fleet take the pods in turn`, () => {
      const { host, keysOf, request } = routingHost({ policy, pods: PODS, sessionTtlMs: 3_600_000 });
      let now = 0;
      const hostOf: number[] = [];
      for (let s = 0; s < 3 * PODS; s++) {
        // Each session's own prompt (no prefix shared with another session's), growing turn by turn.
        for (let t = 0; t < turns; t++) {
          const tokens = Array.from({ length: 64 * (t + 1) }, (_, i) => 1 + s * 100_000 + i);
          const req = request({ sessionId: `s${s}`, promptTokens: tokens.length, blockKeys: keysOf(tokens) });
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
