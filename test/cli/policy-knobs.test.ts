import { test } from 'node:test';
import assert from 'node:assert/strict';
import { configFor, knobValue, policiesTaking } from '../../src/cli/policy-knobs.js';

test('a policy knob goes to the policies that have it; knob-less policies and workload options get none', () => {
  assert.deepEqual(policiesTaking(['round-robin', 'sticky', 'ear', 'ear-proactive', 'kv-load'], 'tHot', 16384), ['ear', 'ear-proactive']);
  assert.deepEqual(policiesTaking(['ear', 'kv-load'], 'prefillScale', 2), ['kv-load']);
  assert.deepEqual(policiesTaking(['round-robin', 'ear'], 'rate', 1), [], 'a workload option is no policy knob');
  assert.deepEqual(configFor('ear-proactive', { tHot: 5, tCool: 30, maxMovesPerPod: 3, prefillScale: 2 }), { tHot: 5, tCool: 30, maxMovesPerPod: 3 });
  assert.deepEqual(configFor('round-robin', { tHot: 5 }), {});
  assert.throws(() => policiesTaking(['ear'], 'tHot', -1), /knob "tHot" must be/);
  assert.deepEqual([knobValue('32768'), knobValue('1e3'), knobValue('kv'), knobValue('')], [32768, 1000, 'kv', '']);
});

test('a boolean knob from --set reaches the policy as a boolean (ear affinity=false, the ablation)', () => {
  assert.equal(knobValue('false'), false);
  assert.equal(knobValue('true'), true);
  assert.deepEqual(policiesTaking(['ear', 'sticky'], 'affinity', knobValue('false')), ['ear']);
});
