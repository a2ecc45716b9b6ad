import { test } from 'node:test';
import assert from 'node:assert/strict';
import { replay } from '../../../src/eval/workloads/replay.js';
import type { ClosedLoopWorkload, OpenLoopWorkload, Session, Turn } from '../../../src/eval/workloads/types.js';

const turn = (thinkTime: number): Turn => ({ keepBlocks: 0, newBlocks: new Uint32Array([0]), promptTokens: 1, outputTokens: 1, thinkTime, nominalServiceTime: 0 });
const session = (id: string, start: number, thinks: number[], children: Session['children'] = []): Session =>
  ({ id, parentId: null, client: 'c', start, turns: thinks.map(turn), children });
const closed = (sessions: Session[], arrival: ClosedLoopWorkload['arrival']): ClosedLoopWorkload =>
  ({ kind: 'closed', name: 't', blockSize: 1, seed: 1, sharedPrefixBlocks: new Set(), config: {}, sessions, arrival });

test('closed loop: each turn is sent its think time after the previous response ends', () => {
  const w = closed([session('a', 10, [0, 2, 3]), session('b', 11, [0, 1])], { mode: 'poisson', rate: 1 });
  const r = replay(w, (s, k) => (s === 'a' ? [1, 4, 0.5][k] : 2));
  // a: 10→11, 13→17, 20→20.5; b: 11→13, 14→16.
  assert.deepEqual(r.requests.map((x) => [x.id, x.sent, x.end]), [
    ['a/0', 10, 11], ['b/0', 11, 13], ['a/1', 13, 17], ['b/1', 14, 16], ['a/2', 20, 20.5]]);
  assert.equal(r.firstSent, 10);
  assert.equal(r.makespan, 10.5);
  // Each root session's completion: its start to its last response.
  assert.deepEqual([...r.sessionCompletion], [['b', 5], ['a', 10.5]]);
});

test('sub-agents start after their delay, run concurrently, and the joining turn waits for them', () => {
  const kid1 = session('p:k1', 0, [0, 1]);
  const kid2 = session('p:k2', 0, [0]);
  const parent = session('p', 0, [0, 2, 0], [
    { afterTurn: 0, delay: 0.5, joinBeforeTurn: 1, session: kid1 },
    { afterTurn: 0, delay: 0, joinBeforeTurn: null, session: kid2 },
  ]);
  const r = replay(closed([parent], { mode: 'poisson', rate: 1 }), () => 1);
  const at = Object.fromEntries(r.requests.map((x) => [x.id, x.sent]));
  // p/0 0→1; k2 starts at 1 (1→2), k1 at 1.5: 1.5→2.5, 3.5→4.5; p/1 waits for k1: 4.5 + 2 = 6.5→7.5; p/2 at 7.5.
  assert.deepEqual(at, { 'p/0': 0, 'p:k2/0': 1, 'p:k1/0': 1.5, 'p:k1/1': 3.5, 'p/1': 6.5, 'p/2': 7.5 });
  assert.equal(r.lastEnd, 8.5);
  assert.deepEqual([...r.sessionCompletion], [['p', 8.5]], 'one root: the sub-agents count toward it');
});

test('concurrency arrivals keep N session trees running, the next starting when one finishes', () => {
  const w = closed([session('a', 99, [0]), session('b', 99, [0, 0]), session('c', 99, [0])], { mode: 'concurrency', n: 2 });
  const r = replay(w, () => 1);
  // a's end frees a slot before b's end readies b/1 (ties run in the order they were scheduled).
  assert.deepEqual(r.requests.map((x) => [x.id, x.sent]), [['a/0', 0], ['b/0', 0], ['c/0', 1], ['b/1', 1]]);
  assert.equal(r.makespan, 2);
  // c starts when a's slot frees (t = 1): its completion counts from there.
  assert.deepEqual(Object.fromEntries(r.sessionCompletion), { a: 1, b: 2, c: 1 });
});

test('open loop: requests at their times whatever the service time; bad service times are refused', () => {
  const req = (at: number, turn: number) => ({ at, sessionId: 'm0', turn, final: turn === 1, keepBlocks: 0, newBlocks: new Uint32Array([1]), promptTokens: 1, outputTokens: 1 });
  const w: OpenLoopWorkload = { kind: 'open', name: 'o', blockSize: 1, seed: 1, sharedPrefixBlocks: new Set(), config: {}, requests: [req(1, 0), req(2, 1)] };
  const r = replay(w, (_, k) => (k === 0 ? 5 : 1));
  assert.deepEqual(r.requests.map((x) => [x.sent, x.end]), [[1, 6], [2, 3]]);
  assert.equal(r.makespan, 5);
  assert.equal(r.sessionCompletion.size, 0, 'open loop: no session trees');
  assert.throws(() => replay(w, () => Number.NaN), /service time of m0\/0/);
});
