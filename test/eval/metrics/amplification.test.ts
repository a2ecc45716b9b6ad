import { test } from 'node:test';
import assert from 'node:assert/strict';
import { amplification, idealMakespan } from '../../../src/eval/metrics/amplification.js';
import { MetricsCollector } from '../../../src/eval/metrics/collector.js';
import type { ClosedLoopWorkload, Session, Turn } from '../../../src/eval/workloads/types.js';

const turn = (thinkTime: number): Turn => ({ keepBlocks: 0, newBlocks: new Uint32Array([0]), promptTokens: 1, outputTokens: 1, thinkTime, nominalServiceTime: 99 });
const session = (id: string, start: number, thinks: number[]): Session => ({ id, parentId: null, client: 'c', start, turns: thinks.map(turn), children: [] });

test('ideal makespan replays the closed loop with isolated times; amplification = makespan / ideal', () => {
  const w: ClosedLoopWorkload = {
    kind: 'closed', name: 't', blockSize: 1, seed: 1, sharedPrefixBlocks: new Set(), config: {}, arrival: { mode: 'poisson', rate: 1 },
    sessions: [session('a', 0, [0, 3]), session('b', 2, [0])],
  };
  // a: 0→1, think 3, 4→6; b: 2→2.5. Ideal makespan 6 s (nominal times are ignored).
  const isolated = (s: string, k: number) => (s === 'a' ? [1, 2][k] : 0.5);
  assert.equal(idealMakespan(w, isolated), 6);
  // The run: a/1 waited in a queue, finishing at 9 s.
  const m = new MetricsCollector({ engines: 1 });
  m.requestSent({ id: 'a/0', sessionId: 'a', at: 0, promptTokens: 1 });
  m.requestFinished('a/0', { at: 1, cachedTokens: 0, outputTokens: 1 });
  m.requestSent({ id: 'b/0', sessionId: 'b', at: 2, promptTokens: 1 });
  m.requestFinished('b/0', { at: 3, cachedTokens: 0, outputTokens: 1 });
  m.requestSent({ id: 'a/1', sessionId: 'a', at: 4, promptTokens: 1 });
  m.requestFinished('a/1', { at: 9, cachedTokens: 0, outputTokens: 1 });
  const s = m.summary({ idealMakespan: idealMakespan(w, isolated) });
  assert.equal(s.makespan, 9);
  assert.equal(s.amplification, 1.5);
  assert.equal(amplification(5, 0), null);
});
