// The mapping from EAR's admission rank to an engine's request priority (src/core/engine-priority.ts): the class
// first, then the order inside it, in the engine's polarity; a KV leg before any request; neutral = the default 0.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ENGINE_PRIORITY_KINDS, NEUTRAL_RANK, ORDER_SPAN, enginePriority, lowerFirst, parseEnginePriority, priorityToSend, urgentEnginePriority, type AdmissionRank } from '../../src/core/engine-priority.js';
import { PRIORITY_CLASSES } from '../../src/core/admission.js';

/** Every rank, best first: class, then order. */
function ranks (): AdmissionRank[] {
  const out: AdmissionRank[] = [];
  for (let c = 0; c < PRIORITY_CLASSES.length; c++) for (let o = 0; o < ORDER_SPAN; o++) out.push({ classRank: c, order: o });
  return out;
}

/** Whether engine value a runs before b on an engine of `kind`. */
const runsBefore = (kind: typeof ENGINE_PRIORITY_KINDS[number], a: number, b: number): boolean => (lowerFirst(kind) ? a < b : a > b);

test('each engine runs the ranks in EAR\'s order: class first, then order, and a leg before all', () => {
  for (const kind of ENGINE_PRIORITY_KINDS) {
    const values = ranks().map((r) => enginePriority(kind, r));
    for (let i = 1; i < values.length; i++) assert.ok(runsBefore(kind, values[i - 1], values[i]), `${kind}: rank ${i - 1} before ${i}`);
    assert.ok(runsBefore(kind, urgentEnginePriority(kind), values[0]), `${kind}: the leg before the best request`);
    for (const v of values) assert.ok(Number.isSafeInteger(v));
  }
});

test('polarity: vLLM and sglang-low-first lower first, sglang higher first; neutral is the engines\' default 0', () => {
  assert.equal(lowerFirst('vllm'), true);
  assert.equal(lowerFirst('sglang-low-first'), true);
  assert.equal(lowerFirst('sglang'), false);
  for (const kind of ENGINE_PRIORITY_KINDS) assert.ok(Object.is(enginePriority(kind, NEUTRAL_RANK), 0), `${kind}: neutral is +0`);
  assert.deepEqual([0, 1, 2].map((c) => enginePriority('vllm', { classRank: c, order: 3 })), [-61, 3, 67]);
  assert.deepEqual([0, 1, 2].map((c) => enginePriority('sglang', { classRank: c, order: 3 })), [61, -3, -67]);
  assert.equal(urgentEnginePriority('vllm'), -65);
  assert.equal(urgentEnginePriority('sglang'), 65);
});

test('out-of-range ranks are clamped, never outside the classes\' bands', () => {
  assert.equal(enginePriority('vllm', { classRank: 1, order: 1e9 }), ORDER_SPAN - 1);
  assert.equal(enginePriority('vllm', { classRank: 1, order: -5 }), 0);
  assert.equal(enginePriority('vllm', { classRank: 9, order: 0 }), ORDER_SPAN);
  assert.equal(enginePriority('vllm', { classRank: 1, order: Number.NaN }), ORDER_SPAN - 1);
});

test('priorityToSend: none without a priority backend or an API that takes the field', () => {
  assert.equal(priorityToSend(null, true, NEUTRAL_RANK), null);
  assert.equal(priorityToSend('vllm', false, 'urgent'), null);
  assert.equal(priorityToSend('vllm', true, 'urgent'), -65);
  assert.equal(priorityToSend('sglang', true, { classRank: 2, order: 0 }), -64);
});

test('parseEnginePriority takes the kinds and off; anything else is an error naming them', () => {
  for (const k of ENGINE_PRIORITY_KINDS) assert.equal(parseEnginePriority(k), k);
  for (const off of [undefined, null, '', 'off', 'none']) assert.equal(parseEnginePriority(off), null);
  assert.throws(() => parseEnginePriority('VLLM'), /must be one of vllm, sglang, sglang-low-first or off/);
  assert.throws(() => parseEnginePriority(1), /must be one of/);
});
