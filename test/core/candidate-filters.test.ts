// The routing host's candidate filters: each keeps what its name says, and a request that finds no candidate is
// told which filter left none (the first, in the order they apply).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CANDIDATE_FILTERS, emptiedBy, isCandidate, type CandidatePod } from '../../src/core/candidate-filters.js';

const pod = (row: number, over: Partial<CandidatePod> = {}): CandidatePod => ({ state: 'ready', role: 'both', models: new Set(['m']), row, ...over });
const q = (over: { model?: string; exclude?: number[]; disaggregated?: boolean } = {}) =>
  ({ model: over.model ?? 'm', exclude: new Set(over.exclude ?? []), disaggregated: over.disaggregated ?? false });

test('the filters, in order: ready, role, model, not-excluded', () => {
  assert.deepEqual(CANDIDATE_FILTERS.map((f) => f.name), ['ready', 'role', 'model', 'not-excluded']);
  assert.equal(isCandidate(pod(0), q()), true);
  assert.equal(isCandidate(pod(0, { state: 'draining' }), q()), false);
  assert.equal(isCandidate(pod(0, { state: 'down' }), q()), false);
  assert.equal(isCandidate(pod(0, { role: 'prefill' }), q()), false, 'a prefill-only pod takes no whole request');
  assert.equal(isCandidate(pod(0, { role: 'prefill' }), q({ disaggregated: true })), true, 'under P/D it does');
  assert.equal(isCandidate(pod(0, { role: 'decode' }), q()), true);
  assert.equal(isCandidate(pod(0), q({ model: 'other' })), false);
  assert.equal(isCandidate(pod(3), q({ exclude: [3] })), false);
  assert.equal(isCandidate(pod(3), q({ exclude: [2] })), true);
});

test('a request with no candidate is told the first filter that left none', () => {
  assert.equal(emptiedBy([pod(0), pod(1)], q()), null);
  assert.equal(emptiedBy([], q()), 'ready');
  assert.equal(emptiedBy([pod(0, { state: 'down' }), pod(1, { state: 'draining' })], q()), 'ready');
  assert.equal(emptiedBy([pod(0, { state: 'down' }), pod(1, { role: 'prefill' })], q()), 'role');
  assert.equal(emptiedBy([pod(0, { models: new Set(['x']) }), pod(1, { state: 'down' })], q()), 'model');
  assert.equal(emptiedBy([pod(0), pod(1)], q({ exclude: [0, 1] })), 'not-excluded');
});
