import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MetricsCollector } from '../../../src/eval/metrics/collector.js';
import { arrivalRate, couplingAmplification, couplingOf, serviceShare } from '../../../src/eval/metrics/coupling.js';

const close = (a: number | null, b: number, msg?: string) => assert.ok(a !== null && Math.abs(a - b) < 1e-9, `${msg ?? ''} ${a} ≠ ${b}`);

test('the coupling curve: 1 / (1 − Λ·N·W′ / (Λ·N·(W′ + G))), diverging as the gaps vanish', () => {
  // Λ = 0.5 sessions/s, N = 10 turns, G = 4 s: x = W′ / (W′ + 4), curve = 1 + W′ / 4.
  close(couplingAmplification(0.5, 10, 0, 4), 1);
  close(serviceShare(0.5, 10, 4, 4), 0.5);
  close(couplingAmplification(0.5, 10, 4, 4), 2);
  close(couplingAmplification(0.5, 10, 12, 4), 4);
  close(couplingAmplification(0.5, 10, 100, 4), 26);
  assert.equal(couplingAmplification(0.5, 10, 3, 0), null, 'no gap at all: x = 1, the pole');
  assert.equal(couplingAmplification(0.5, 10, 0, 0), null, 'nothing at all: undefined');
  // Λ and N cancel in x (the load acts through W′).
  close(couplingAmplification(2, 3, 12, 4), 4);
  const c = couplingOf({ meanTurnServiceTime: 12, sessionArrivalRate: 0.5, meanTurnsPerSession: 10, meanToolGap: 4, engines: 8 });
  close(c.serviceShare, 0.75);
  close(c.predictedAmplification, 4);
  close(c.occupancy, (0.5 * 10 * 12) / 8, 'turns in service per engine');
  const noGap = couplingOf({ meanTurnServiceTime: 1, sessionArrivalRate: 1, meanTurnsPerSession: 3, meanToolGap: null, engines: 1 });
  assert.deepEqual([noGap.serviceShare, noGap.predictedAmplification, noGap.occupancy], [null, null, 3]);
  const noLambda = couplingOf({ meanTurnServiceTime: 1, sessionArrivalRate: null, meanTurnsPerSession: 3, meanToolGap: 1, engines: 1 });
  assert.deepEqual([noLambda.serviceShare, noLambda.predictedAmplification, noLambda.occupancy], [null, null, null]);
});

test('Λ from the root sessions\' starts; fewer than two or all at once give null', () => {
  close(arrivalRate([0, 2, 4, 6, 8]), 0.5);
  close(arrivalRate([8, 0, 4]), 0.25);
  assert.equal(arrivalRate([3]), null);
  assert.equal(arrivalRate([1, 1]), null);
});

test('the collector gives W′ (mean E2E), Λ, N and G, and takes them as options', () => {
  const m = new MetricsCollector({ engines: 2 });
  // Roots a (with sub-agent a:k) at 0, b at 4, c at 8: Λ = 2 / 8. Requests: a 3 (+1 of a:k), b 2, c 1 → N = 7 / 3.
  const req = (id: string, sessionId: string, at: number, e2e: number, root?: string) => {
    m.requestSent({ id, sessionId, rootSessionId: root, at, promptTokens: 1 });
    m.requestFinished(id, { at: at + e2e, cachedTokens: 0, outputTokens: 1 });
  };
  req('a/0', 'a', 0, 1); req('a:k/0', 'a:k', 1.5, 2, 'a'); req('a/1', 'a', 2, 3); req('b/0', 'b', 4, 2);
  req('a/2', 'a', 6, 1); req('b/1', 'b', 7, 4);
  m.requestSent({ id: 'c/0', sessionId: 'c', at: 8, promptTokens: 1 }); // never completes: not in W′
  // Gaps: a/0 ends 1 → a/1 at 2 (1 s); a/1 ends 5 → a/2 at 6 (1 s); b/0 ends 6 → b/1 at 7 (1 s). The sub-agent's
  // first turn follows no turn of its own session: no gap.
  const c = m.summary().coupling;
  close(c.meanTurnServiceTime, (1 + 2 + 3 + 2 + 1 + 4) / 6, 'W′');
  close(c.sessionArrivalRate, 0.25, 'Λ');
  close(c.meanTurnsPerSession, 7 / 3, 'N');
  close(c.meanToolGap, 1, 'G');
  assert.equal(c.engines, 2);
  close(c.serviceShare, (13 / 6) / (13 / 6 + 1), 'x');
  close(c.predictedAmplification, 1 + 13 / 6, '1 / (1 − x) = 1 + W′ / G');
  const given = new MetricsCollector({ engines: 4, sessionArrivalRate: 1, turnsPerSession: 2, toolGap: 3 });
  given.requestSent({ id: 'x', sessionId: 'x', at: 0, promptTokens: 1 });
  given.requestFinished('x', { at: 1, cachedTokens: 0, outputTokens: 1 });
  assert.deepEqual(given.summary().coupling, { meanTurnServiceTime: 1, sessionArrivalRate: 1, meanTurnsPerSession: 2, meanToolGap: 3, engines: 4, serviceShare: 0.25, occupancy: 0.5, predictedAmplification: 4 / 3 });
  assert.deepEqual(new MetricsCollector({ engines: 1 }).summary().coupling,
    { meanTurnServiceTime: 0, sessionArrivalRate: null, meanTurnsPerSession: null, meanToolGap: null, engines: 1, serviceShare: null, occupancy: null, predictedAmplification: null });
});
