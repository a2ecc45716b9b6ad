import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type RoutingHost, type HostRequest, type Placement } from '../../src/core/routing-host.js';
import { QueueFullError, type AdmissionWaiter, type ReleaseInfo, type DropReason, type Queued } from '../../src/core/admission-control.js';
import type { SchedulerKind } from '../../src/core/admission.js';
import { MODEL, routingHost } from '../fixtures/host.js';

const NO_KEYS = new BigUint64Array(0);

function setup (scheduler: SchedulerKind, pods = 1, policy = 'sticky', o: { beta?: number; queueTimeoutMs?: number; maxQueued?: number; prefillBudgetTokens?: number; learnLimit?: boolean } = {}) {
  return routingHost({
    policy, pods, sessionTtlMs: 600_000, scheduler, tables: { heapJobs: 64 },
    admission: { quantumMs: 1000, levels: 4, beta: o.beta ?? 100, queueTimeoutMs: o.queueTimeoutMs ?? 60_000, maxQueued: o.maxQueued ?? 64 },
    capacity: { prefillBudgetTokens: o.prefillBudgetTokens ?? 0, learnLimit: o.learnLimit ?? false }
  });
}

const req = (sessionId: string | null, parentSessionId: string | null = null, promptTokens = 100): HostRequest =>
  ({ model: MODEL, sessionId, parentSessionId, promptTokens, blockKeys: NO_KEYS, maxTokens: null, user: null });

class Recorder implements AdmissionWaiter {
  placement: Placement | null = null;
  info: ReleaseInfo | null = null;
  dropReason: DropReason | null = null;
  constructor (readonly name: string, readonly log: string[]) {}
  released (p: Placement, info: ReleaseInfo): void { this.placement = p; this.info = info; this.log.push(this.name); }
  dropped (reason: DropReason): void { this.dropReason = reason; this.log.push(`${this.name}:${reason}`); }
}

/** Runs one call of `session` to completion on an idle host: `serviceMs` of service. */
function serve (host: RoutingHost, session: string, at: number, serviceMs: number, parent: string | null = null): void {
  const p = host.admission.submit(req(session, parent), new Recorder(session, []), at) as Placement;
  assert.ok('pod' in p, 'an idle host places at once');
  host.firstToken(p, at + 1);
  host.finished(p, { promptTokens: 100, completionTokens: 10 }, at + serviceMs);
}

test('off: every request is placed at once, whatever the pods hold', () => {
  const { host } = setup('off');
  host.admission.setMaxConcurrent(0, 1);
  for (let i = 0; i < 5; i++) assert.ok('pod' in host.admission.submit(req(`s${i}`), new Recorder('x', []), i));
  assert.equal(host.load.inFlight(0), 5);
});

test('no capacity signal: the scheduler passes through', () => {
  // fcfs: the gateway's order is the engine's, so an engine queue holds nothing here (atlas: engine-queue-hold.test.ts).
  const { host } = setup('fcfs');
  for (let i = 0; i < 5; i++) assert.ok('pod' in host.admission.submit(req(`s${i}`), new Recorder('x', []), i));
  host.engineLoad(0, { running: 2, waiting: 3, kvUsage: 0.5 }, 10);
  assert.ok('pod' in host.admission.submit(req('after-report'), new Recorder('x', []), 11), 'under fcfs an engine queue alone limits nothing unless learnLimit');
  assert.equal(host.admission.admissionStats(10).waiting, 0);
});

test('plas and atlas: the least served session goes first (fcfs: arrival order), with the session state written by the host', () => {
  for (const [kind, expected] of [['plas', ['fresh', 'light', 'heavy']], ['atlas', ['fresh', 'light', 'heavy']], ['fcfs', ['heavy', 'light', 'fresh']]] as const) {
    const { host } = setup(kind);
    serve(host, 'heavy', 0, 30_000);
    serve(host, 'light', 40_000, 1500);
    host.admission.setMaxConcurrent(0, 1);
    const log: string[] = [];
    const waiters = new Map<string, Recorder>();
    const blocker = host.admission.submit(req('blocker'), new Recorder('blocker', log), 50_000) as Placement;
    for (const s of ['heavy', 'light', 'fresh']) {
      const w = new Recorder(s, log);
      waiters.set(s, w);
      host.admission.submit(req(s), w, 50_001);
    }
    let running = blocker;
    let t = 50_010;
    for (let i = 0; i < 3; i++) {
      host.finished(running, null, t);
      const next = waiters.get(log[log.length - 1])!;
      running = next.placement!;
      t += 10;
    }
    assert.deepEqual(log, expected, kind);
    if (kind === 'fcfs') continue;
    const s = host.session('heavy')!;
    assert.equal(s.attainedServiceMs, 30_000);
    assert.ok(s.waitMs >= 29, 'the wait was recorded');
    assert.equal(s.criticalPathMs, 30_000);
    assert.ok(waiters.get('heavy')!.info!.level >= 3);
  }
});

test('atlas: a sub-agent inherits its parent\'s critical path; parallel calls of a session add only the longest', () => {
  const { host } = setup('atlas', 2, 'least-request');
  serve(host, 'parent', 0, 4000);
  // Two parallel calls, one priority (4000): the critical path becomes 4000 + the longer, not the sum.
  const a = host.admission.submit(req('parent'), new Recorder('a', []), 10_000) as Placement;
  const b = host.admission.submit(req('parent'), new Recorder('b', []), 10_000) as Placement;
  host.finished(a, null, 13_000);
  host.finished(b, null, 12_000);
  assert.equal(host.session('parent')!.criticalPathMs, 7000);
  assert.equal(host.session('parent')!.attainedServiceMs, 4000 + 3000 + 2000, 'attained service is the sum');
  serve(host, 'child', 20_000, 500, 'parent');
  assert.equal(host.session('child')!.criticalPathMs, 7500, 'the child starts from the parent\'s 7000');
});

test('classes rank above session priority', () => {
  const { host } = setup('plas');
  serve(host, 'vip', 0, 100_000);
  host.admission.setMaxConcurrent(0, 1);
  const log: string[] = [];
  const blocker = host.admission.submit(req('blocker'), new Recorder('blocker', log), 200_000) as Placement;
  host.admission.submit(req('fresh'), new Recorder('fresh', log), 200_001);
  host.admission.submit(req('vip'), new Recorder('vip', log), 200_002, 0);
  host.finished(blocker, null, 200_010);
  assert.deepEqual(log, ['vip'], 'the blocker was placed at once (no waiter call)');
});

test('affinity to a full pod parks the job there while other sessions go to pods with room', () => {
  const { host } = setup('fcfs', 2, 'sticky');
  host.admission.setMaxConcurrent(0, 1);
  host.admission.setMaxConcurrent(1, 1);
  const log: string[] = [];
  const first = host.admission.submit(req('s'), new Recorder('s1', log), 0) as Placement;
  const w = new Recorder('s2', log);
  const q = host.admission.submit(req('s'), w, 1);
  assert.ok('queued' in q, 'its host is full');
  const wt = new Recorder('t', log);
  host.admission.submit(req('t'), wt, 2);
  const other = wt.placement!;
  assert.ok(other !== null, 'another session goes at once to the pod with room (released inside submit)');
  assert.notEqual(other.pod, first.pod);
  assert.equal(host.admission.admissionStats(3).parked, 1);
  host.finished(other, null, 5);
  assert.equal(w.placement, null, 'room on the other pod does not release it: it waits for its host');
  host.finished(first, null, 6);
  assert.equal(w.placement!.pod, first.pod);
});

test('learned capacity (learnLimit): an engine that reports waiting requests limits the pod to what it was running', () => {
  const { host } = setup('atlas', 1, 'sticky', { learnLimit: true });
  const placed: Placement[] = [];
  for (let i = 0; i < 3; i++) placed.push(host.admission.submit(req(`s${i}`), new Recorder('x', []), i) as Placement);
  host.engineLoad(0, { running: 2, waiting: 1, kvUsage: 0.5 }, 10);
  assert.equal(host.admission.admissionStats(10).limits[0].limit, 2);
  const w = new Recorder('late', []);
  assert.ok('queued' in host.admission.submit(req('late'), w, 11));
  host.finished(placed[0], null, 20);
  assert.equal(w.placement, null, '2 still in flight: at the limit');
  host.finished(placed[1], null, 21);
  assert.ok(w.placement !== null);
  host.engineLoad(0, { running: 2, waiting: 0, kvUsage: 0.5 }, 1000);
  assert.equal(host.admission.admissionStats(1000).limits[0].limit, 3, 'no queue at the limit: the limit creeps up');
});

test('prefill budget: a pod holding pending prefill takes no prompt that would pass the budget', () => {
  const { host } = setup('fcfs', 1, 'sticky', { prefillBudgetTokens: 1000 });
  const a = host.admission.submit(req('a', null, 800), new Recorder('a', []), 0) as Placement;
  const w = new Recorder('b', []);
  assert.ok('queued' in host.admission.submit(req('b', null, 800), w, 1));
  host.firstToken(a, 50);
  assert.ok(w.placement !== null, 'the first prompt computed: room again');
});

test('timeouts, cancel, the bound and shutdown', () => {
  const { host } = setup('fcfs', 1, 'sticky', { queueTimeoutMs: 1000, maxQueued: 3 });
  host.admission.setMaxConcurrent(0, 1);
  host.admission.submit(req('a'), new Recorder('a', []), 0);
  const log: string[] = [];
  const t1 = host.admission.submit(req('b'), new Recorder('b', log), 10) as Queued;
  const t2 = host.admission.submit(req('c'), new Recorder('c', log), 20) as Queued;
  host.admission.submit(req('d'), new Recorder('d', log), 600);
  assert.throws(() => host.admission.submit(req('e'), new Recorder('e', log), 700), (e: unknown) => e instanceof QueueFullError && e.retryAfterSeconds >= 1);
  assert.equal(host.admission.cancel(t2), true);
  assert.equal(host.admission.cancel(t2), false);
  host.admission.tick(1015);
  assert.deepEqual(log, ['b:timeout']);
  assert.equal(host.admission.cancel(t1), false);
  host.admission.dropAll('shutdown', 1100);
  assert.deepEqual(log, ['b:timeout', 'd:shutdown']);
  const s = host.admission.admissionStats(1100);
  assert.equal(s.waiting, 0);
  assert.equal(s.rejected, 1);
  assert.equal(s.timedOut, 1);
});

test('anti-starvation on the ticker: a heavy session waiting beta times its service goes to the top', () => {
  const { host } = setup('plas', 1, 'sticky', { beta: 1 });
  serve(host, 'heavy', 0, 2000);
  host.admission.setMaxConcurrent(0, 1);
  const log: string[] = [];
  const blocker = host.admission.submit(req('blocker'), new Recorder('blocker', log), 10_000) as Placement;
  host.admission.submit(req('heavy'), new Recorder('heavy', log), 10_001);
  host.admission.submit(req('fresh'), new Recorder('fresh', log), 12_500);
  host.admission.tick(12_100);
  assert.equal(host.admission.admissionStats(12_100).promotions, 1);
  host.finished(blocker, null, 12_600);
  assert.deepEqual(log, ['heavy'], 'promoted to level 0, and older than the fresh one');
});

test('a pod that leaves sends the jobs parked on it back to be routed to the others', () => {
  const { host } = setup('fcfs', 2, 'sticky');
  host.admission.setMaxConcurrent(0, 1);
  host.admission.setMaxConcurrent(1, 1);
  const first = host.admission.submit(req('s'), new Recorder('s1', []), 0) as Placement;
  const busy = host.admission.submit(req('t'), new Recorder('t', []), 0) as Placement;
  assert.notEqual(first.pod, busy.pod);
  const w = new Recorder('s2', []);
  host.admission.submit(req('s'), w, 1);
  host.retirePod(first.pod);
  assert.equal(w.placement, null, 'the other pod is full');
  host.finished(busy, null, 5);
  assert.equal(w.placement!.pod, busy.pod);
});

test('vtc: the user with the least weighted service goes first; a new user is lifted to the least active counter', () => {
  const { host } = setup('vtc');
  host.admission.setMaxConcurrent(0, 1);
  const log: string[] = [];
  const as = (user: string, prompt: number): HostRequest => ({ ...req(null, null, prompt), user });
  // alice is served a big prompt and queues a second one; bob then queues, lifted to the least active counter.
  // When alice's first ends, her output is charged too: her queued job now waits behind bob's.
  const first = host.admission.submit(as('alice', 1000), new Recorder('alice-1', log), 0) as Placement;
  host.admission.submit(as('alice', 10), new Recorder('alice-2', log), 1);
  host.admission.submit(as('bob', 10), new Recorder('bob-1', log), 2);
  assert.equal(host.users.counter(host.userKey('alice')), 1000, 'charged its prompt at dispatch');
  assert.equal(host.users.counter(host.userKey('bob')), 1000, 'lifted to the least active counter (alice\'s)');
  host.finished(first, { promptTokens: 1000, completionTokens: 5 }, 10);
  assert.equal(host.users.counter(host.userKey('alice')), 1010, 'output tokens weigh 2');
  assert.deepEqual(log, ['bob-1'], 'alice\'s queued job was re-keyed behind bob\'s');
});

test('a pod that goes down sends its parked jobs back to be routed elsewhere', () => {
  const { host } = setup('fcfs', 2, 'sticky');
  host.admission.setMaxConcurrent(0, 1);
  host.admission.setMaxConcurrent(1, 1);
  const first = host.admission.submit(req('s'), new Recorder('s1', []), 0) as Placement;
  const w = new Recorder('s2', []);
  host.admission.submit(req('s'), w, 1);
  assert.equal(w.placement, null);
  host.setPod(first.pod, { id: `p${first.pod}`, role: 'both', models: new Set([MODEL]), state: 'down' });
  const moved = w.placement as Placement | null;
  assert.ok(moved !== null && moved.pod !== first.pod, 'routed to the pod that is up');
});

test('a request\'s exclusions (an endpoint picker\'s subset hint) hold at once and through the queue', () => {
  const { host } = setup('atlas', 2, 'least-request');
  host.admission.setMaxConcurrent(0, 1);
  host.admission.setMaxConcurrent(1, 1);
  const onlyP1 = { ...req('a'), exclude: new Set([0]) };
  const first = host.admission.submit(onlyP1, new Recorder('a', []), 0) as Placement;
  assert.equal(first.pod, 1, 'placed on the one pod allowed, though p0 is idle too');
  // p1 is full: another request allowed only there waits, while p0 (idle) takes a request with no exclusions.
  const log: string[] = [];
  const waiter = new Recorder('b', log);
  const q = host.admission.submit({ ...req('b'), exclude: new Set([0]) }, waiter, 1);
  assert.ok('queued' in q, 'it waits for p1 rather than going to p0');
  const c = new Recorder('c', log);
  host.admission.submit(req('c'), c, 2);
  assert.equal(c.placement?.pod, 0, 'a request without exclusions goes to the idle pod past the waiting one');
  host.finished(first, null, 3);
  assert.equal(waiter.placement?.pod, 1, 'released onto p1 when it has room');
  // Every allowed pod excluded: no candidate at all.
  assert.throws(() => host.admission.submit({ ...req('d'), exclude: new Set([0, 1]) }, new Recorder('d', []), 4), /no/i);
});
