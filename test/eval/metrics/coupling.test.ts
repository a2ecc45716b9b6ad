import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MetricsCollector } from '../../../src/eval/metrics/collector.js';
import { arrivalRate, couplingAmplification, couplingOf, couplingPole } from '../../../src/eval/metrics/coupling.js';

const close = (a: number | null, b: number, msg?: string) => assert.ok(a !== null && Math.abs(a - b) < 1e-9, `${msg ?? ''} ${a} ≠ ${b}`);

test('the coupling curve: 1 / (1 − Λ·N·W′/K), diverging at the pole', () => {
  // Λ = 0.5 sessions/s, N = 10 turns, K = 8 engines: ρ = 5·W′/8.
  close(couplingAmplification(0.5, 10, 0, 8), 1);
  close(couplingAmplification(0.5, 10, 0.8, 8), 2); // ρ = 0.5
  close(couplingAmplification(0.5, 10, 1.2, 8), 4); // ρ = 0.75
  assert.equal(couplingAmplification(0.5, 10, 1.6, 8), null, 'ρ = 1: the pole');
  assert.equal(couplingAmplification(0.5, 10, 3, 8), null, 'past the pole');
  close(couplingPole(0.5, 10, 8), 1.6);
  const c = couplingOf({ meanTurnServiceTime: 1.2, sessionArrivalRate: 0.5, meanTurnsPerSession: 10, engines: 8 });
  close(c.occupancy, 0.75);
  close(c.predictedAmplification, 4);
  assert.deepEqual(couplingOf({ meanTurnServiceTime: 1, sessionArrivalRate: null, meanTurnsPerSession: 3, engines: 1 }).predictedAmplification, null);
});

test('Λ from the root sessions\' starts; fewer than two or all at once give null', () => {
  close(arrivalRate([0, 2, 4, 6, 8]), 0.5);
  close(arrivalRate([8, 0, 4]), 0.25);
  assert.equal(arrivalRate([3]), null);
  assert.equal(arrivalRate([1, 1]), null);
});

test('the collector gives W′ (mean E2E), Λ and N, and takes them as options', () => {
  const m = new MetricsCollector({ engines: 2 });
  // Roots a (with sub-agent a:k) at 0, b at 4, c at 8: Λ = 2 / 8. Requests: a 3 (+1 of a:k), b 2, c 1 → N = 7 / 3.
  const req = (id: string, sessionId: string, at: number, e2e: number, root?: string) => {
    m.requestSent({ id, sessionId, rootSessionId: root, at, promptTokens: 1 });
    m.requestFinished(id, { at: at + e2e, cachedTokens: 0, outputTokens: 1 });
  };
  req('a/0', 'a', 0, 1); req('a/1', 'a', 2, 3); req('a:k/0', 'a:k', 2.5, 2, 'a'); req('a/2', 'a', 6, 1);
  req('b/0', 'b', 4, 2); req('b/1', 'b', 7, 4);
  m.requestSent({ id: 'c/0', sessionId: 'c', at: 8, promptTokens: 1 }); // never completes: not in W′
  const c = m.summary().coupling;
  close(c.meanTurnServiceTime, (1 + 3 + 2 + 1 + 2 + 4) / 6, 'W′');
  close(c.sessionArrivalRate, 0.25, 'Λ');
  close(c.meanTurnsPerSession, 7 / 3, 'N');
  assert.equal(c.engines, 2);
  close(c.occupancy, (0.25 * (7 / 3) * (13 / 6)) / 2, 'ρ');
  close(c.predictedAmplification, 1 / (1 - (0.25 * (7 / 3) * (13 / 6)) / 2));
  const given = new MetricsCollector({ engines: 4, sessionArrivalRate: 1, turnsPerSession: 2 });
  given.requestSent({ id: 'x', sessionId: 'x', at: 0, promptTokens: 1 });
  given.requestFinished('x', { at: 1, cachedTokens: 0, outputTokens: 1 });
  assert.deepEqual(given.summary().coupling, { meanTurnServiceTime: 1, sessionArrivalRate: 1, meanTurnsPerSession: 2, engines: 4, occupancy: 0.5, predictedAmplification: 2 });
  assert.deepEqual(new MetricsCollector({ engines: 1 }).summary().coupling,
    { meanTurnServiceTime: 0, sessionArrivalRate: null, meanTurnsPerSession: null, engines: 1, occupancy: null, predictedAmplification: null });
});
