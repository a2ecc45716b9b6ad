import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MetricsCollector } from '../../../src/eval/metrics/collector.js';
import type { Migration } from '../../../src/eval/metrics/migrations.js';

const move = (m: MetricsCollector, at: number, sessionId: string, to: number, extra: Partial<Migration> = {}) =>
  m.migration({ at, sessionId, from: 0, to, tokens: 1000, bytes: 1e6, transferTime: 0.002, ...extra });

/** Sends one request of `sessionId` at `at` and finishes it right away. */
function turn (m: MetricsCollector, id: string, sessionId: string, at: number): void {
  m.requestSent({ id, sessionId, at, promptTokens: 10 });
  m.requestFinished(id, { at: at + 0.01, cachedTokens: 0, outputTokens: 2 });
}

test('accuracy: a move whose target later exceeds tHot within the next k turns is inaccurate', () => {
  const m = new MetricsCollector({ engines: 3, tHot: 100, accuracyTurns: 3 });
  turn(m, 'a/0', 'a', 0); turn(m, 'b/0', 'b', 0);
  move(m, 1, 'a', 1); move(m, 1, 'b', 2);
  // Engine 1 (a's target) stays ≤ 100 for a's next three sends; engine 2 (b's) goes to 101 before b's third.
  m.pendingPrefill(1.1, [500, 100, 50]); turn(m, 'a/1', 'a', 1.15); turn(m, 'b/1', 'b', 1.15);
  m.pendingPrefill(1.2, [500, 0, 80]); turn(m, 'a/2', 'a', 1.25); turn(m, 'b/2', 'b', 1.25);
  m.pendingPrefill(1.3, [500, 90, 101]); turn(m, 'a/3', 'a', 1.35); turn(m, 'b/3', 'b', 1.35);
  // Past k turns: engine 1 running hot no longer counts against a's move.
  m.pendingPrefill(1.4, [0, 5000, 0]); turn(m, 'a/4', 'a', 1.45);
  const acc = m.summary().migrations.accuracy;
  assert.deepEqual(acc, { tHot: 100, k: 3, accurate: 1, judged: 2, share: 0.5 });
});

test('accuracy: turns that never happen do not count, a move with none is not judged, and no tHot means null', () => {
  const m = new MetricsCollector({ engines: 2, tHot: 10 });
  turn(m, 'a/0', 'a', 0); turn(m, 'b/0', 'b', 0);
  move(m, 1, 'a', 1); move(m, 1, 'b', 1);
  m.pendingPrefill(1.1, [0, 5]);
  turn(m, 'a/1', 'a', 1.2); // a ends after one turn under tHot: accurate; b sends nothing: not judged
  assert.deepEqual(m.summary().migrations.accuracy, { tHot: 10, k: 3, accurate: 1, judged: 1, share: 1 });
  // A second move closes the first one's judgement with the turns it had, then starts its own.
  m.pendingPrefill(1.3, [0, 50]); turn(m, 'a/2', 'a', 1.35); // a's first move: inaccurate now
  move(m, 100, 'a', 0); turn(m, 'a/3', 'a', 100.1); //           second move: engine 0 at 0, accurate
  assert.deepEqual(m.summary().migrations.accuracy, { tHot: 10, k: 3, accurate: 1, judged: 2, share: 0.5 });
  const none = new MetricsCollector({ engines: 2 });
  move(none, 0, 'a', 1);
  assert.equal(none.summary().migrations.accuracy, null);
  assert.deepEqual(new MetricsCollector({ engines: 1, tHot: 5 }).summary().migrations.accuracy, { tHot: 5, k: 3, accurate: 0, judged: 0, share: null });
});

test('by-mode counts, failed transfers, trigger rate and bytes per move', () => {
  const m = new MetricsCollector({ engines: 2, tCool: 10 });
  for (let i = 0; i < 20; i++) m.requestSent({ id: `r${i}`, sessionId: `s${i % 4}`, at: i, promptTokens: 1 });
  move(m, 0, 's0', 1, { mode: 'nixl', bytes: 100, transferTime: 0.001 });
  move(m, 0, 's1', 1, { mode: 'nixl', bytes: 300, transferTime: 0.003, exportWait: 0.002 });
  move(m, 0, 's2', 1, { mode: 'shared-store', bytes: 200, transferTime: 0.002 });
  move(m, 0, 's3', 1, { mode: 'recompute', bytes: 0, transferTime: 0 });
  move(m, 1, 's0', 0, { mode: 'nixl', ok: false, bytes: 999, transferTime: 5 });
  move(m, 2, 's1', 0, {}); // a driver that names no mode
  const s = m.summary().migrations;
  assert.deepEqual(s.byMode, { nixl: 2, 'shared-store': 1, recompute: 1, unspecified: 1 });
  assert.deepEqual(s.failedByMode, { nixl: 1, 'shared-store': 0, recompute: 0, unspecified: 0 });
  assert.deepEqual([s.count, s.failed], [5, 1]);
  assert.equal(s.triggerRatePct, (6 / 20) * 100);
  // The failed transfer's bytes and time are not moved bytes.
  assert.equal(s.bytes, 100 + 300 + 200 + 0 + 1e6);
  assert.deepEqual([s.bytesPerMove.count, s.bytesPerMove.p50, s.bytesPerMove.max], [5, 200, 1e6]);
  assert.equal(s.transferTime.max, 3000);
  assert.deepEqual([s.nixlTransferTime.count, s.nixlTransferTime.max], [2, 3000], 'the successful NIXL moves alone');
  assert.deepEqual([s.nixlExportWait.count, s.nixlExportWait.max], [1, 2000], 'the moves whose driver measured the leg\'s wait');
  assert.equal(m.summary().timeline.migrations.length, 5, 'failed transfers are not marked as moves');
  assert.equal(s.thrash, 1, 's1 moved twice within 10 s');
});

test('failed moves are excluded from thrash: a session that failed to move may move right after', () => {
  const m = new MetricsCollector({ engines: 2, tCool: 60 });
  move(m, 0, 's', 1, { ok: false });
  move(m, 1, 's', 1, { ok: false });
  move(m, 2, 's', 1); // the first real move
  assert.deepEqual([m.summary().migrations.thrash, m.summary().migrations.count, m.summary().migrations.failed], [0, 1, 2]);
  move(m, 3, 's', 0, { ok: false }); // failed: still not a thrash
  assert.equal(m.summary().migrations.thrash, 0);
  move(m, 4, 's', 0); // a real second move within tCool: a thrash
  assert.deepEqual([m.summary().migrations.thrash, m.summary().migrations.thrashSessions], [1, 1]);
  assert.throws(() => new MetricsCollector({ engines: 1, accuracyTurns: 0 }), /k must be an integer > 0/);
});
