// The engine's scheduler against vLLM V1's, rule by rule, under --scheduling-policy fcfs and priority and with
// --long-prefill-token-threshold. Each test names the vLLM function it follows:
//   vllm/v1/core/sched/request_queue.py  FCFSRequestQueue, PriorityRequestQueue (a heap of Requests)
//   vllm/v1/request.py                   Request.__lt__: (priority, arrival_time, request_id)
//   vllm/v1/core/sched/scheduler.py      Scheduler.schedule(), Scheduler._preempt_request()
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SimEngine, type SchedulingPolicy } from '../../src/sim/engine.js';
import type { SimRequest } from '../../src/sim/engine-types.js';
import { drain, range, req, tinyProfile } from './helpers.js';

interface Stepped { t: number; ids: string[]; prefillIds: string[] }

/** One step at `t`: the ids it scheduled, in the order it scheduled them (running first, then waiting). */
function stepAt (e: SimEngine, t: number): Stepped {
  const r = e.step(t);
  e.check();
  return { t: t + r.duration, ids: r.outputs.map((o) => o.id), prefillIds: r.outputs.filter((o) => o.newTokenIds.length === 0).map((o) => o.id) };
}

function engine (policy: SchedulingPolicy, over: { maxNumSeqs?: number; maxNumBatchedTokens?: number; numGpuBlocks?: number; threshold?: number } = {}): SimEngine {
  return new SimEngine({
    profile: tinyProfile({ maxNumSeqs: over.maxNumSeqs ?? 8, maxNumBatchedTokens: over.maxNumBatchedTokens ?? 64 }),
    numGpuBlocks: over.numGpuBlocks ?? 256,
    schedulingPolicy: policy,
    longPrefillTokenThreshold: over.threshold ?? 0
  });
}

/** The order in which requests were first scheduled (metrics.firstScheduledTime, ties by finish order). */
function startOrder (e: SimEngine): string[] {
  const d = drain(e);
  return [...d.finished.values()].sort((a, b) => a.metrics!.firstScheduledTime - b.metrics!.firstScheduledTime).map((o) => o.id);
}

const queued: Array<[string, Partial<SimRequest>]> = [
  ['late-0', { priority: 0, arrivalTime: 2 }],
  ['b-urgent', { priority: -3, arrivalTime: 1 }],
  ['lazy', { priority: 7, arrivalTime: 0 }],
  ['a-urgent', { priority: -3, arrivalTime: 1 }],
  ['early-0', { priority: 0, arrivalTime: 1.5 }],
  ['first-urgent', { priority: -3, arrivalTime: 0.5 }]
];

test('PriorityRequestQueue + Request.__lt__: waiting requests start by (priority, arrival_time, request_id), lower first', () => {
  // One request runs at a time, and the first one holds the seat while the rest queue up behind it.
  const e = engine('priority', { maxNumSeqs: 1 });
  e.addRequest(req('holder', range(1, 8), { arrivalTime: 0, priority: 99 }));
  stepAt(e, 0);
  for (const [id, over] of queued) e.addRequest(req(id, range(100 * id.length, 8), over));
  assert.deepEqual(startOrder(e), ['holder', 'first-urgent', 'a-urgent', 'b-urgent', 'early-0', 'late-0', 'lazy']);
});

test('FCFSRequestQueue: under fcfs the body\'s priority is accepted and ignored (vLLM V1), requests start in arrival order', () => {
  const e = engine('fcfs', { maxNumSeqs: 1 });
  e.addRequest(req('holder', range(1, 8), { arrivalTime: 0, priority: 99 }));
  stepAt(e, 0);
  for (const [id, over] of queued) e.addRequest(req(id, range(100 * id.length, 8), over));
  assert.deepEqual(startOrder(e), ['holder', ...queued.map(([id]) => id)]);
});

test('schedule(): running requests are served first in admission order, not by priority; an urgent arrival waits for budget they leave', () => {
  // Budget 8 tokens a step: the lazy request's 20-token prefill takes all of it for two steps, then leaves 4.
  const e = engine('priority', { maxNumBatchedTokens: 8 });
  e.addRequest(req('lazy', range(1, 20), { priority: 50, maxTokens: 4 }));
  let s = stepAt(e, 0);
  assert.deepEqual(s.ids, ['lazy']);
  e.addRequest(req('urgent', range(500, 20), { priority: -50, arrivalTime: s.t, maxTokens: 4 }));
  s = stepAt(e, s.t);
  assert.deepEqual(s.ids, ['lazy'], 'the running request keeps the whole budget; the urgent one waits');
  s = stepAt(e, s.t);
  assert.deepEqual(s.ids, ['lazy', 'urgent'], 'the urgent one gets what the running prefill left over (4 tokens), after it');
  // From then on both run, still in admission order: the lazy one first in every step.
  for (let i = 0; i < 3; i++) {
    s = stepAt(e, s.t);
    assert.equal(s.ids[0], 'lazy');
  }
});

test('schedule(): an urgent arrival never preempts a running request, even with every seat taken (max_num_seqs)', () => {
  const e = engine('priority', { maxNumSeqs: 2 });
  e.addRequest(req('lazy-1', range(1, 8), { priority: 10, maxTokens: 12 }));
  e.addRequest(req('lazy-2', range(100, 8), { priority: 10, maxTokens: 12 }));
  let s = stepAt(e, 0);
  e.addRequest(req('urgent', range(500, 8), { priority: -10, arrivalTime: s.t, maxTokens: 2 }));
  for (let i = 0; i < 11; i++) {
    s = stepAt(e, s.t);
    assert.deepEqual(s.ids, ['lazy-1', 'lazy-2'], `step ${i}: the seats stay with the running requests`);
  }
  const d = drain(e, s.t);
  assert.equal(d.finished.get('urgent')!.metrics!.numPreemptions, 0);
  assert.ok(d.finished.get('urgent')!.metrics!.firstScheduledTime >= s.t, 'the urgent request started only once a seat was free');
  assert.equal(e.stats().preemptions, 0);
});

test('schedule(): long_prefill_token_threshold caps each request\'s chunk, running and waiting alike, leaving budget to others', () => {
  // Budget 64, threshold 8: two 30-token prompts each get 8 tokens a step, in the same step (8, 8, 8, 6).
  const e = engine('fcfs', { threshold: 8 });
  e.addRequest(req('a', range(1, 30), { maxTokens: 2 }));
  e.addRequest(req('b', range(100, 30), { maxTokens: 2 }));
  const pending: number[] = [];
  let t = 0;
  for (let i = 0; i < 4; i++) {
    const s = stepAt(e, t);
    t = s.t;
    assert.deepEqual(s.prefillIds, i < 3 ? ['a', 'b'] : [], `step ${i}`);
    pending.push(e.stats().pendingPrefillTokens);
  }
  assert.deepEqual(pending, [44, 28, 12, 0]);
  // Without the threshold (vLLM's default, 0) each prompt goes in one step.
  const u = engine('fcfs');
  u.addRequest(req('a', range(1, 30), { maxTokens: 2 }));
  u.addRequest(req('b', range(100, 30), { maxTokens: 2 }));
  stepAt(u, 0);
  assert.equal(u.stats().pendingPrefillTokens, 0);
  // Under a smaller budget the threshold is what lets the second request in at all: 16 tokens, 8 each.
  const small = engine('priority', { maxNumBatchedTokens: 16, threshold: 8 });
  const plain = engine('priority', { maxNumBatchedTokens: 16 });
  for (const x of [small, plain]) {
    x.addRequest(req('a', range(1, 30)));
    x.addRequest(req('b', range(100, 30)));
  }
  assert.deepEqual(stepAt(small, 0).ids, ['a', 'b']);
  assert.deepEqual(stepAt(plain, 0).ids, ['a']);
});

test('schedule(): a tie on (priority, arrival_time) preempts the first such running request under priority, the last admitted under fcfs', () => {
  // 8 blocks of 4 tokens: two 7-token prompts take 2 blocks each and grow a block every 4 decode tokens, so the
  // pool runs out while both decode. Same priority, same arrival time: max() in schedule() returns the first.
  for (const policy of ['priority', 'fcfs'] as const) {
    const e = engine(policy, { numGpuBlocks: 5 });
    e.addRequest(req('first', range(1, 7), { maxTokens: 8 }));
    e.addRequest(req('second', range(100, 7), { maxTokens: 8 }));
    const d = drain(e);
    const preempted = [...d.finished.values()].filter((o) => o.metrics!.numPreemptions > 0).map((o) => o.id);
    assert.deepEqual(preempted, [policy === 'priority' ? 'first' : 'second'], policy);
    for (const id of ['first', 'second']) assert.equal(d.tokens.get(id)!.length, 8, `${policy}: ${id} recomputed and completed`);
  }
});

test('schedule(): out of blocks, priority preempts the largest (priority, arrival_time) even if admitted first (its step\'s tokens go back to the budget); fcfs the last admitted', () => {
  for (const policy of ['priority', 'fcfs'] as const) {
    const e = engine(policy, { numGpuBlocks: 7 });
    // `lazy` is admitted alone first, then the two others: admission order lazy, mid, top.
    e.addRequest(req('lazy', range(1, 7), { priority: 9, maxTokens: 10 }));
    let s = stepAt(e, 0);
    e.addRequest(req('top', range(100, 7), { priority: 0, arrivalTime: s.t, maxTokens: 10 }));
    e.addRequest(req('mid', range(200, 7), { priority: 1, arrivalTime: s.t, maxTokens: 10 }));
    s = stepAt(e, s.t);
    assert.deepEqual(s.ids, policy === 'priority' ? ['lazy', 'top', 'mid'] : ['lazy', 'top', 'mid']);
    let preemptingStep: Stepped | null = null;
    for (let i = 0; i < 20 && preemptingStep === null; i++) {
      const before = e.stats().preemptions;
      s = stepAt(e, s.t);
      if (e.stats().preemptions > before) preemptingStep = s;
    }
    assert.ok(preemptingStep !== null, `${policy}: the pool ran out`);
    if (policy === 'priority') {
      // The victim was first in the running list and already scheduled in that step: it is taken out of it.
      assert.ok(!preemptingStep.ids.includes('lazy'), `lazy was unscheduled: ${preemptingStep.ids.join(',')}`);
      assert.deepEqual(preemptingStep.ids, ['top', 'mid']);
    } else {
      assert.deepEqual(preemptingStep.ids, ['lazy', 'top']);
    }
    const d = drain(e, s.t);
    const preemptions = (id: string): number => d.finished.get(id)!.metrics!.numPreemptions;
    // Later preemptions follow the same rule (the pool holds only one request's full growth).
    if (policy === 'priority') {
      assert.ok(preemptions('lazy') > 0);
      assert.equal(preemptions('top'), 0, 'the most urgent is never the victim');
    } else {
      assert.ok(preemptions('mid') > 0);
      assert.equal(preemptions('lazy'), 0, 'the first admitted is never the victim');
    }
    for (const id of ['lazy', 'top', 'mid']) assert.equal(d.finished.get(id)!.metrics!.numGenerationTokens, 10, `${policy}: ${id} completed`);
  }
});

test('schedule(): a step that preempted admits no waiting request; _preempt_request puts the victim back by key under priority, at the front under fcfs', () => {
  for (const policy of ['priority', 'fcfs'] as const) {
    const e = engine(policy, { numGpuBlocks: 5, maxNumSeqs: 2 });
    e.addRequest(req('a', range(1, 7), { priority: 0, maxTokens: 8 }));
    e.addRequest(req('b', range(100, 7), { priority: 5, maxTokens: 8 }));
    let s = stepAt(e, 0);
    // Waiting behind the full seats: one more urgent than b (the victim to be), one arrived later and less urgent.
    e.addRequest(req('w-urgent', range(300, 3), { priority: 1, arrivalTime: s.t, maxTokens: 1 }));
    e.addRequest(req('w-lazy', range(400, 3), { priority: 9, arrivalTime: s.t, maxTokens: 1 }));
    let preemptingStep: Stepped | null = null;
    for (let i = 0; i < 20 && preemptingStep === null; i++) {
      const before = e.stats().preemptions;
      s = stepAt(e, s.t);
      if (e.stats().preemptions > before) preemptingStep = s;
    }
    assert.ok(preemptingStep !== null, `${policy}: the pool ran out`);
    // The victim freed a seat and blocks, yet nothing waiting was admitted in that step.
    assert.equal(e.stats().running, 1, policy);
    assert.equal(e.stats().waiting, 3, policy);
    assert.ok(!preemptingStep.ids.some((id) => id.startsWith('w-')), `${policy}: ${preemptingStep.ids.join(',')}`);
    // The next step preempts nothing. Under priority it admits the more urgent waiting request to the free seat;
    // under fcfs the victim is back at the queue's front, does not fit yet, and those behind it wait too.
    s = stepAt(e, s.t);
    assert.deepEqual(s.ids, policy === 'priority' ? ['a', 'w-urgent'] : ['a'], policy);
    const d = drain(e, s.t);
    assert.equal(d.finished.get('b')!.metrics!.numGenerationTokens, 8, `${policy}: b recomputed and completed`);
    assert.ok(d.finished.get('b')!.metrics!.numPreemptions > 0);
  }
});

test('bad scheduler options and priorities get clear errors', () => {
  assert.throws(() => new SimEngine({ profile: tinyProfile(), schedulingPolicy: 'sjf' as SchedulingPolicy }), /schedulingPolicy must be one of fcfs, priority/);
  assert.throws(() => new SimEngine({ profile: tinyProfile(), longPrefillTokenThreshold: -1 }), /longPrefillTokenThreshold must be an integer >= 0/);
  assert.throws(() => new SimEngine({ profile: tinyProfile(), longPrefillTokenThreshold: 1.5 }), /longPrefillTokenThreshold/);
  const e = engine('priority');
  assert.throws(() => e.addRequest(req('x', range(1, 4), { priority: 0.5 })), /priority must be an integer/);
  assert.throws(() => e.addRequest(req('y', range(1, 4), { priority: 2 ** 64 })), /priority must be an integer in int64's range/);
  assert.equal(e.stats().waiting, 0);
  e.addRequest(req('z', range(1, 4), { priority: -(2 ** 53) }));
  assert.equal(e.stats().waiting, 1);
});
