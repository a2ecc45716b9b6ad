// Issue 23 item 4: under atlas, plas and vtc the gateway holds what the engine would queue, so that who waits is
// decided by EAR's order: a pod is full once this gateway's in flight (kept current by its own starts and ends)
// plus what else the engine had at the scrape reaches the seats the engine showed when it queued. And what
// admission tells the engine (the rank each placement carries: class, then level or VTC's order).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type HostRequest, type Placement } from '../../src/core/routing-host.js';
import type { AdmissionWaiter, ReleaseInfo } from '../../src/core/admission-control.js';
import type { SchedulerKind } from '../../src/core/admission.js';
import { CapacityEstimator } from '../../src/core/capacity.js';
import { MODEL, routingHost } from '../fixtures/host.js';

const NO_KEYS = new BigUint64Array(0);

function setup (scheduler: SchedulerKind, capacity: Record<string, unknown> = {}) {
  return routingHost({
    policy: 'sticky', pods: 1, sessionTtlMs: 600_000, scheduler, tables: { heapJobs: 64 },
    admission: { quantumMs: 1000, levels: 4, beta: 100, queueTimeoutMs: 60_000, maxQueued: 64 }, capacity
  });
}

const req = (sessionId: string | null, user: string | null = null): HostRequest =>
  ({ model: MODEL, sessionId, parentSessionId: null, promptTokens: 100, blockKeys: NO_KEYS, maxTokens: null, user });

class Recorder implements AdmissionWaiter {
  placement: Placement | null = null;
  constructor (readonly name: string, readonly log: string[]) {}
  released (p: Placement, _info: ReleaseInfo): void { this.placement = p; this.log.push(this.name); }
  dropped (): void { this.log.push(`${this.name}:dropped`); }
}

for (const scheduler of ['atlas', 'plas', 'vtc'] as const) {
  test(`${scheduler}: nothing held before the engine is seen queuing; then released as its seats free, between scrapes`, () => {
    const { host } = setup(scheduler);
    const placed: Placement[] = [];
    for (let i = 0; i < 5; i++) {
      const p = host.admission.submit(req(`s${i}`), new Recorder('x', []), i);
      assert.ok('pod' in p, 'no signal yet: pass-through');
      placed.push(p);
    }
    host.engineLoad(0, { running: 2, waiting: 3, kvUsage: 0.5 }, 10);
    assert.equal(host.admission.capacity.seats(0), 2);
    const log: string[] = [];
    const w = new Recorder('late', log);
    assert.ok('queued' in host.admission.submit(req('late'), w, 11), 'the engine queues: held here');
    for (let i = 0; i < 3; i++) host.finished(placed[i], null, 20 + i);
    assert.equal(w.placement, null, 'two of its own still in flight: both seats taken');
    host.finished(placed[3], null, 30);
    assert.ok(w.placement !== null, 'a seat freed (no scrape since): released');
  });
}

test('fcfs and off hold nothing on an engine queue', () => {
  for (const scheduler of ['fcfs', 'off'] as const) {
    const { host } = setup(scheduler);
    for (let i = 0; i < 4; i++) host.admission.submit(req(`s${i}`), new Recorder('x', []), i);
    host.engineLoad(0, { running: 1, waiting: 3, kvUsage: 0.5 }, 10);
    assert.ok('pod' in host.admission.submit(req('more'), new Recorder('x', []), 11), scheduler);
  }
});

test('holdEngineQueue false turns it off under atlas', () => {
  const { host } = setup('atlas', { holdEngineQueue: false });
  for (let i = 0; i < 4; i++) host.admission.submit(req(`s${i}`), new Recorder('x', []), i);
  host.engineLoad(0, { running: 1, waiting: 3, kvUsage: 0.5 }, 10);
  assert.ok('pod' in host.admission.submit(req('more'), new Recorder('x', []), 11));
});

test('the seats: set when the engine queues, raised by one when it runs that many without queuing; others count', () => {
  const c = new CapacityEstimator({ holdEngineQueue: true });
  assert.equal(c.limit(0), Infinity);
  c.report(0, 4, 0, 0.5, 4);
  assert.equal(c.seats(0), 0, 'never queued: unknown');
  c.report(0, 4, 2, 0.5, 6);
  assert.equal(c.seats(0), 4);
  assert.equal(c.limit(0), 4);
  c.report(0, 4, 0, 0.5, 4);
  assert.equal(c.seats(0), 5, 'ran its seats with nothing waiting: it may have one more');
  c.report(0, 3, 0, 0.5, 3);
  assert.equal(c.seats(0), 5, 'below its seats: kept');
  c.report(0, 5, 1, 0.5, 2);
  assert.equal(c.seats(0), 5);
  assert.equal(c.limit(0), 1, '4 of the engine\'s 6 are another client\'s: this gateway may hold 1');
  assert.equal(c.hasRoom(0, 1, 500, 0), false, 'a prompt of ours still computing there: the seats bind');
  assert.equal(c.hasRoom(0, 0, 500, 0), true, 'nothing in flight: always room for one');
  assert.equal(c.hasRoom(0, 3, 0, 500), true, 'every request of ours past its prefill: the engine\'s budget is free');
  const fixed = new CapacityEstimator({ holdEngineQueue: true });
  fixed.configure(0, 2);
  fixed.report(0, 1, 1, 0.5, 2);
  assert.equal(fixed.hasRoom(0, 2, 0, 500), false, 'a configured max-concurrent binds whatever the prefill');
});

test('work conservation: an engine whose requests from here all decode takes the next at once, seats or not', () => {
  const { host } = setup('atlas');
  const a = host.admission.submit(req('a'), new Recorder('x', []), 0) as Placement;
  const b = host.admission.submit(req('b'), new Recorder('x', []), 1) as Placement;
  // b waits behind a's prefill for token budget: the scrape shows one seat.
  host.engineLoad(0, { running: 1, waiting: 1, kvUsage: 0.1 }, 2);
  assert.equal(host.admission.capacity.seats(0), 1);
  const log: string[] = [];
  const c = new Recorder('c', log);
  assert.ok('queued' in host.admission.submit(req('c'), c, 3), 'prompts of ours still computing: held');
  host.firstToken(a, 4);
  assert.equal(c.placement, null, 'b still in its prefill');
  host.firstToken(b, 5);
  assert.ok(c.placement !== null, 'both decode: released at their first tokens, not at the next scrape');
  const d = new Recorder('d', log);
  assert.ok('queued' in host.admission.submit(req('d'), d, 6), 'c computes its prompt: the next one waits here');
});

test('held jobs leave in EAR\'s order when a seat frees: the better class, then the lower level', () => {
  const { host } = setup('atlas');
  // A long session: its critical path puts its next call at a worse level.
  const first = host.admission.submit(req('long'), new Recorder('x', []), 0) as Placement;
  host.firstToken(first, 1);
  host.finished(first, { promptTokens: 100, completionTokens: 10 }, 5000);
  const a = host.admission.submit(req('a'), new Recorder('x', []), 5001) as Placement;
  const b = host.admission.submit(req('b'), new Recorder('x', []), 5002) as Placement;
  host.engineLoad(0, { running: 2, waiting: 1, kvUsage: 0.5 }, 5003);
  const log: string[] = [];
  const long = new Recorder('long', log);
  const fresh = new Recorder('fresh', log);
  const low = new Recorder('low-class', log);
  assert.ok('queued' in host.admission.submit(req('long'), long, 5004));
  assert.ok('queued' in host.admission.submit(req('fresh'), fresh, 5005, 1));
  assert.ok('queued' in host.admission.submit(req('low'), low, 5003, 2));
  host.finished(a, null, 6000);
  host.finished(b, null, 6001);
  assert.deepEqual(log, ['fresh']);
  assert.deepEqual(fresh.placement!.rank, { classRank: 1, order: 0 });
  host.finished(fresh.placement!, null, 6002);
  assert.deepEqual(log, ['fresh', 'long']);
  assert.equal(long.placement!.rank.classRank, 1);
  assert.ok(long.placement!.rank.order >= 2, `a 5 s critical path at a 1 s quantum: level ${long.placement!.rank.order}`);
  host.finished(long.placement!, null, 6003);
  assert.deepEqual(low.placement!.rank, { classRank: 2, order: 0 });
});

test('a placement at once carries its rank too; fcfs and off rank by class alone; VTC by its user\'s distance from the least', () => {
  const atlas = setup('atlas').host;
  const p0 = atlas.admission.submit(req('s'), new Recorder('x', []), 0) as Placement;
  atlas.finished(p0, { promptTokens: 100, completionTokens: 1 }, 3000);
  const p1 = atlas.admission.submit(req('s'), new Recorder('x', []), 3001, 0) as Placement;
  assert.deepEqual(p1.rank, { classRank: 0, order: 2 });
  for (const s of ['fcfs', 'off'] as const) {
    const { host } = setup(s);
    const q = host.admission.submit(req('s'), new Recorder('x', []), 0, 2) as Placement;
    assert.deepEqual(q.rank, { classRank: 2, order: 0 });
  }
  // Both users active throughout (VTC lifts a user that arrives to the least counter: no credit for idling).
  const vtc = setup('vtc').host;
  const light = vtc.admission.submit(req('l', 'light'), new Recorder('x', []), 0) as Placement;
  const heavy = vtc.admission.submit({ ...req('h', 'heavy'), promptTokens: 50_000 }, new Recorder('x', []), 1) as Placement;
  assert.equal(light.rank.order, 0);
  assert.ok('pod' in heavy);
  const again = vtc.admission.submit(req('h2', 'heavy'), new Recorder('x', []), 2) as Placement;
  assert.equal(again.rank.order, 3, 'the heavy user is 50k tokens past the least served: the last level');
  const light2 = vtc.admission.submit(req('l2', 'light'), new Recorder('x', []), 3) as Placement;
  assert.equal(light2.rank.order, 0, 'the least served user');
});
