// An agent's deadline in admission (issue 31 part 2): under plas and atlas a request ranks no lower than the time
// it has left before its deadline (both ms, the levels' unit), so a heavy program near its deadline is released
// before a fresh session, and a far deadline changes nothing. fcfs keeps arrival order.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { type RoutingHost, type HostRequest, type Placement } from '../../src/core/routing-host.js';
import type { AdmissionWaiter } from '../../src/core/admission-control.js';
import type { SchedulerKind } from '../../src/core/admission.js';
import { MODEL, routingHost } from '../fixtures/host.js';

const NO_KEYS = new BigUint64Array(0);

const req = (sessionId: string, deadlineAt: number | null = null): HostRequest =>
  ({ model: MODEL, sessionId, parentSessionId: null, promptTokens: 100, blockKeys: NO_KEYS, maxTokens: null, user: null, deadlineAt });

function waiter (name: string, log: string[]): AdmissionWaiter & { placement: Placement | null } {
  return {
    placement: null,
    released (p) { this.placement = p; log.push(name); },
    dropped (reason) { log.push(`${name}:${reason}`); }
  };
}

function serve (host: RoutingHost, session: string, at: number, serviceMs: number): void {
  const p = host.admission.submit(req(session), waiter(session, []), at) as Placement;
  host.firstToken(p, at + 1);
  host.finished(p, { promptTokens: 100, completionTokens: 10 }, at + serviceMs);
}

/** The order `heavy` (30 s served, deadline `heavyDeadline` ms after it queues) and `fresh` are released in. */
function order (kind: SchedulerKind, heavyDeadline: number | null): string[] {
  const { host } = routingHost({
    policy: 'sticky', pods: 1, sessionTtlMs: 600_000, scheduler: kind, tables: { heapJobs: 64 },
    admission: { quantumMs: 1000, levels: 4, beta: 100, queueTimeoutMs: 60_000, maxQueued: 64 },
    capacity: { prefillBudgetTokens: 0, learnLimit: false }
  });
  serve(host, 'heavy', 0, 30_000);
  host.admission.setMaxConcurrent(0, 1);
  const log: string[] = [];
  let running = host.admission.submit(req('blocker'), waiter('blocker', log), 50_000) as Placement;
  const ws = { heavy: waiter('heavy', log), fresh: waiter('fresh', log) };
  host.admission.submit(req('heavy', heavyDeadline === null ? null : 50_001 + heavyDeadline), ws.heavy, 50_001);
  host.admission.submit(req('fresh'), ws.fresh, 50_002);
  let t = 50_010;
  for (let i = 0; i < 2; i++) {
    host.finished(running, null, t);
    running = ws[log[log.length - 1] as 'heavy' | 'fresh'].placement!;
    t += 10;
  }
  return log;
}

test('plas and atlas: a program near its deadline is served before a fresh session; a far deadline changes nothing', () => {
  for (const kind of ['plas', 'atlas'] as const) {
    assert.deepEqual(order(kind, null), ['fresh', 'heavy'], `${kind}: least served first without a deadline`);
    assert.deepEqual(order(kind, 500), ['heavy', 'fresh'], `${kind}: half a quantum left: level 0, and it came first`);
    assert.deepEqual(order(kind, 0), ['heavy', 'fresh'], `${kind}: a deadline of 0 (already due)`);
    assert.deepEqual(order(kind, 600_000), ['fresh', 'heavy'], `${kind}: ten minutes left is no hurry`);
  }
  assert.deepEqual(order('fcfs', null), ['heavy', 'fresh']);
  assert.deepEqual(order('fcfs', 500), ['heavy', 'fresh'], 'fcfs: arrival order either way');
});
