import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MetricsCollector } from '../../../src/eval/metrics/collector.js';
import { ApcBound } from '../../../src/eval/metrics/apc-bound.js';

test('TTFT, TPOT, E2E, session completion, throughput and goodput on three requests', () => {
  const m = new MetricsCollector({ engines: 2, ttftSlo: 0.0005 });
  // a/0: sent 0, first token 0.0002, done 0.0012 with 11 tokens → TPOT 100 µs; a/1: 0.002 → 0.0026 → 0.0036, 5 tokens → 250 µs.
  // b/0: sent 0.001, first 0.0019, done 0.002, 1 token (no TPOT).
  m.requestSent({ id: 'a/0', sessionId: 'a', at: 0, promptTokens: 100 });
  m.requestSent({ id: 'b/0', sessionId: 'b', at: 0.001, promptTokens: 50 });
  m.firstToken('a/0', 0.0002); m.firstToken('a/0', 0.0003); // only the first counts
  m.requestFinished('a/0', { at: 0.0012, cachedTokens: 0, outputTokens: 11 });
  m.firstToken('b/0', 0.0019);
  m.requestFinished('b/0', { at: 0.002, cachedTokens: 20, outputTokens: 1 });
  m.sessionDone('b', 0.002);
  m.requestSent({ id: 'a/1', sessionId: 'a', at: 0.002, promptTokens: 150 });
  m.firstToken('a/1', 0.0026);
  m.requestFinished('a/1', { at: 0.0036, cachedTokens: 100, outputTokens: 5 });
  m.sessionDone('a', 0.0036);
  const s = m.summary();
  assert.deepEqual(s.requests, { sent: 3, completed: 3, failed: 0, incomplete: 0 });
  assert.deepEqual([s.ttft.p50, s.ttft.p99, s.ttft.mean], [600, 900, 1700 / 3]); // 200, 900, 600
  assert.deepEqual([s.tpot.count, s.tpot.p50, s.tpot.p99], [2, 100, 250]);
  assert.deepEqual([s.e2e.p50, s.e2e.max], [1200, 1600]); // 1200, 1000, 1600
  assert.deepEqual([s.sessionCompletion.count, s.sessionCompletion.p50, s.sessionCompletion.max], [2, 1000, 3600]);
  assert.equal(s.makespan, 0.0036);
  assert.equal(s.throughput.outputTokens, 17);
  assert.ok(Math.abs(s.throughput.outputTokensPerSec - 17 / 0.0036) < 1e-6);
  assert.ok(Math.abs(s.throughput.sessionsPerMin - 2 * 60 / 0.0036) < 1e-6);
  assert.ok(Math.abs(s.goodput.share - 1 / 3) < 1e-12); // only a/0 (200 µs) is under 500 µs
  assert.equal(s.apc.value, 120 / 300);
  assert.equal(s.apc.bound, null);
});

test('APC and both upper bounds on a constructed trace', () => {
  // Block size 10. Session a: [1,2,3] then [1,2,3,4]; session b: [1,2,9]; a sub-agent a:k of a: [1,2,3,7].
  const m = new MetricsCollector({ engines: 1, blockSize: 10 });
  const send = (id: string, sessionId: string, blocks: number[], promptTokens: number, at: number, root?: string) =>
    m.requestSent({ id, sessionId, rootSessionId: root, at, promptTokens, blocks });
  send('a/0', 'a', [1, 2, 3], 30, 0); //                 all 0, intra 0
  send('b/0', 'b', [1, 2, 9], 25, 1); // 2 full blocks:   all 20 (1,2 seen), intra 0
  send('a/1', 'a', [1, 2, 3, 4], 40, 2); //               all 30, intra 30
  send('a:k/0', 'a:k', [1, 2, 3, 7], 35, 3, 'a'); //      all 30, intra 30 (its root a saw them)
  send('b/1', 'b', [1, 2, 3, 4], 40, 4); //               all 40, intra 20 (b saw 1,2 only)
  for (const [id, cached] of [['a/0', 0], ['b/0', 10], ['a/1', 30], ['a:k/0', 20], ['b/1', 20]] as const) {
    m.requestFinished(id, { at: 5, cachedTokens: cached, outputTokens: 2 });
  }
  const s = m.summary();
  assert.equal(s.apc.promptTokens, 170);
  assert.equal(s.apc.value, 80 / 170);
  assert.equal(s.apc.bound, 120 / 170);
  assert.equal(s.apc.intraSessionBound, 80 / 170);
  assert.equal(s.apc.ratio, 80 / 120);
});

test('the bound only counts a prefix: a seen block after an unseen one is a miss', () => {
  const b = new ApcBound(4);
  b.observe('x', [1, 2, 3], 12);
  assert.deepEqual(b.observe('y', [1, 5, 3], 12), { all: 4, intra: 0 });
  assert.deepEqual(b.observe('x', [1, 2, 3], 11), { all: 8, intra: 8 }); // the cut third block is not cached
});

test('hotspot index: max / mean per loaded sample, mean over loaded samples and p99', () => {
  const m = new MetricsCollector({ engines: 4 });
  m.pendingPrefill(0, [0, 0, 0, 0]); //       idle: skipped
  m.pendingPrefill(0.1, [100, 100, 100, 100]); // 1
  m.pendingPrefill(0.2, [400, 0, 0, 0]); //    4 (all on one engine: K)
  m.pendingPrefill(0.3, [300, 100, 0, 0]); //  300 / 100 = 3
  const s = m.summary();
  assert.equal(s.hotspot.samples, 4);
  assert.equal(s.hotspot.loadedSamples, 3);
  assert.equal(s.hotspot.mean, (1 + 4 + 3) / 3);
  assert.equal(s.hotspot.p99, 4);
  // Σ max / Σ mean over the samples: (0 + 100 + 400 + 300) / (0 + 100 + 100 + 100).
  assert.equal(s.hotspot.loadWeighted, 800 / 300);
  assert.deepEqual(s.timeline.t, [0, 0.1, 0.2, 0.3]);
  assert.deepEqual(s.timeline.pendingPrefill[0], [0, 100, 400, 300]);
  assert.throws(() => m.pendingPrefill(0.4, [1, 2]), /has 2 engines, want 4/);
});

test('load-weighted hotspot index: a trickle on one engine reads K per sample, but weighs little', () => {
  const m = new MetricsCollector({ engines: 4 });
  for (let i = 0; i < 9; i++) m.pendingPrefill(i / 10, [1, 0, 0, 0]); // index 4 each, mean load 0.25
  m.pendingPrefill(0.9, [1000, 1000, 1000, 1000]); //                   index 1, mean load 1000
  const s = m.summary().hotspot;
  assert.equal(s.mean, (9 * 4 + 1) / 10);
  assert.equal(s.p99, 4);
  assert.equal(s.loadWeighted, (9 * 1 + 1000) / (9 * 0.25 + 1000));
  assert.equal(new MetricsCollector({ engines: 2 }).summary().hotspot.loadWeighted, 0, 'no load at all');
});

test('session slowdown: each root session against its ideal completion time, mean and p90', () => {
  const m = new MetricsCollector({ engines: 1 });
  // Sessions a..e start at 0, 1, 2, 3, 4 and take 2, 3, 4, 10, 6 s; their ideal times are 2, 1, 2, 2, 3 s.
  const took = { a: 2, b: 3, c: 4, d: 10, e: 6 };
  Object.entries(took).forEach(([id, d], i) => {
    m.requestSent({ id: `${id}/0`, sessionId: id, at: i, promptTokens: 1 });
    m.requestFinished(`${id}/0`, { at: i + d, cachedTokens: 0, outputTokens: 1 });
    m.sessionDone(id, i + d);
  });
  m.requestSent({ id: 'f/0', sessionId: 'f', at: 0, promptTokens: 1 }); // never done: not counted
  const ideal = new Map([['a', 2], ['b', 1], ['c', 2], ['d', 2], ['e', 3], ['f', 1], ['ghost', 5]]);
  const s = m.summary({ idealSessionCompletion: ideal }).sessionSlowdown;
  // Slowdowns 1, 3, 2, 5, 2: mean 13 / 5; p90 (nearest rank, 5 values) is the largest. The ideals of the sessions
  // done (f never was, ghost never ran) average 10 / 5: the floor under the mean session completion (5 s here).
  assert.deepEqual(s, { mean: 13 / 5, p90: 5, sessions: 5, idealMean: 10 / 5 });
  // Without ideal times, or with an ideal time of 0, there is nothing to divide by.
  assert.deepEqual(m.summary().sessionSlowdown, { mean: null, p90: null, sessions: 0, idealMean: null });
  assert.deepEqual(m.summary({ idealSessionCompletion: new Map([['a', 0]]) }).sessionSlowdown, { mean: null, p90: null, sessions: 0, idealMean: null });
});

test('the timeline keeps bucket maxima when downsampled, and a bounded number of samples', () => {
  const m = new MetricsCollector({ engines: 1, timelinePoints: 2 });
  [5, 9, 1, 7].forEach((v, i) => m.pendingPrefill(i / 10, [v]));
  const s = m.summary();
  assert.deepEqual(s.timeline.t, [0, 0.2]);
  assert.deepEqual(s.timeline.pendingPrefill, [[9, 7]]);
  const b = new MetricsCollector({ engines: 2, timelineSamplesKept: 2 });
  [[1, 1], [2, 0], [0, 3]].forEach((v, i) => b.pendingPrefill(i / 10, v));
  const bs = b.summary();
  assert.deepEqual([bs.timeline.t, bs.timeline.droppedSamples, bs.hotspot.samples], [[0, 0.1], 1, 3]);
  assert.equal(bs.hotspot.p99, 2, 'the dropped sample still counts for the index');
});

test('migrations: totals, transfer time and thrash (a session moved again within T_cool)', () => {
  const m = new MetricsCollector({ engines: 2, tCool: 10 });
  const mv = (at: number, sessionId: string) => m.migration({ at, sessionId, from: 0, to: 1, tokens: 1000, bytes: 98_000_000, transferTime: 0.0005 });
  mv(0, 's1'); mv(5, 's1'); /* thrash */ mv(16, 's1'); /* 11 s later: fine */ mv(1, 's2'); mv(30, 's2');
  const s = m.summary().migrations;
  assert.deepEqual([s.count, s.tokens, s.bytes, s.thrash, s.thrashSessions, s.transferTime.p50], [5, 5000, 490_000_000, 1, 1, 500]);
  assert.equal(m.summary().timeline.migrations.length, 5);
});

test('failures by cause, requests never finished, gateway cost, and misuse', () => {
  const m = new MetricsCollector({ engines: 1 });
  for (const id of ['x', 'y', 'z', 'w']) m.requestSent({ id, sessionId: 's', at: 0, promptTokens: 10 });
  m.requestFailed('x', 1, 'upstream_5xx');
  m.requestFailed('y', 2, 'upstream_5xx');
  m.firstToken('z', 0.0004);
  m.requestFinished('z', { at: 0.001, cachedTokens: 0, outputTokens: 3, engineTtft: 0.0001 });
  m.routingDecision(0.000002); m.routingDecision(0.000010);
  const s = m.summary();
  assert.deepEqual(s.failures, { upstream_5xx: 2, incomplete: 1 });
  assert.deepEqual(s.requests, { sent: 4, completed: 1, failed: 2, incomplete: 1 });
  assert.equal(s.gateway.addedLatency.p50, 300);
  assert.deepEqual([s.gateway.decision.p50, s.gateway.decision.p99], [2, 10]);
  assert.equal(s.goodput.share, 1 / 4);
  assert.equal(s.makespan, 2);
  assert.throws(() => m.requestSent({ id: 'w', sessionId: 's', at: 0, promptTokens: 1 }), /sent twice/);
  assert.throws(() => m.firstToken('nope', 0), /not in flight/);
  assert.throws(() => m.requestFinished('x', { at: 3, cachedTokens: 0, outputTokens: 1 }), /not in flight/);
  assert.throws(() => m.sessionDone('ghost', 1), /never sent/);
});
