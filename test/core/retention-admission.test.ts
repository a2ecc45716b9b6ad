// Admission and retention (issue 31 part 3): new work is not placed on a pod whose KV would have to evict retained
// prefixes while another pod has room. The policy places it so when it decides (ear, program-ttl: kv-room.ts);
// admission keeps it so at release: a new session's request parked on a pod (no seat there yet) whose KV room a
// retained prefix took while it waited is routed again, for every policy that keeps retained prefixes.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { routingHost, type TestHost } from '../fixtures/host.js';
import type { Placement } from '../../src/core/routing-host.js';
import type { AdmissionWaiter } from '../../src/core/admission-control.js';
import { createPolicy } from '../../src/core/policies/index.js';
import type { Policy } from '../../src/core/policy.js';

const CAPACITY = 1000;

/** shortCost off for ear: these pods are short of KV (16,000 tokens < 3 × x's context), where ear would place by cost. */
function admitted (policy: string | Policy, knobs: Record<string, unknown> = {}): TestHost {
  const t = routingHost({
    policy, knobs: policy === 'ear' ? { shortCost: false, ...knobs } : knobs, sessionTtlMs: 3_600_000, scheduler: 'atlas', retention: { maxShare: 0.95 },
    pods: [{ id: 'p0', kvCapacityBlocks: CAPACITY }, { id: 'p1', kvCapacityBlocks: CAPACITY }]
  });
  // One seat per pod: a request waits in admission while its pod runs another.
  for (const row of t.rows) t.host.admission.setMaxConcurrent(row, 1);
  return t;
}

/** A waiter that keeps what it was told. */
function waiter (): AdmissionWaiter & { placement: Placement | null } {
  const w = {
    placement: null as Placement | null,
    released (p: Placement) { w.placement = p; },
    dropped (reason: string) { throw new Error(`dropped: ${reason}`); }
  };
  return w;
}

/** Where the waiter's request was released (a function: a test's narrowing of the field does not outlive a call). */
function podOf (w: { placement: Placement | null }): number | undefined {
  return w.placement?.pod;
}

function submit (t: TestHost, session: string, prompt: number, now: number): { placed: Placement | null; w: ReturnType<typeof waiter> } {
  const w = waiter();
  const r = t.host.admission.submit(t.request({ sessionId: session, promptTokens: prompt, maxTokens: 16 }), w, now);
  return { placed: 'queued' in r ? null : r, w };
}

/**
 * Session x (900 blocks) runs on one pod, y (100 blocks of prompt, not computed yet) on the other; z, a new
 * session of 501 blocks, is placed on x's pod (both have room, x's has no pending prefill) and waits for its seat.
 * Then (if `yEndsFirst`) y ends, and x's turn ends in a tool call: its 901 blocks are retained there, and its seat
 * is free.
 */
function scenario (t: TestHost, yEndsFirst: boolean): { a: number; b: number; z: ReturnType<typeof waiter>; y: Placement } {
  const x = submit(t, 'x', 14_400, 0).placed!;
  t.host.firstToken(x, 1);
  const y = submit(t, 'y', 1600, 2).placed!;
  const a = x.pod;
  const b = y.pod;
  assert.notEqual(a, b);
  const z = submit(t, 'z', 8000, 3);
  assert.equal(z.placed, null, 'z waits for a seat on x\'s pod');
  if (yEndsFirst) {
    t.host.firstToken(y, 4);
    t.host.finished(y, { promptTokens: 1600, completionTokens: 16 }, 5);
    assert.equal(podOf(z.w), undefined, 'still waiting for its seat on x\'s pod');
  }
  t.host.finished(x, { promptTokens: 14_400, completionTokens: 16, toolCall: true }, 10);
  assert.equal(t.host.retention.blocks(a), 901);
  return { a, b, z: z.w, y };
}

for (const policy of ['ear', 'program-ttl']) {
  test(`${policy}: a new session parked on a pod whose room a retained prefix took goes, when its seat frees, to a pod with room and a seat`, () => {
    const t = admitted(policy);
    const { a, b, z } = scenario(t, true);
    assert.equal(podOf(z), b, 'not released onto the retained prefix');
    assert.equal(t.host.admission.retentionReroutes, 1);
    assert.equal(t.host.sessions.get(t.host.sessionKey('z'))!.host, b, 'bound where it went');
    assert.equal(t.host.retention.of(t.host.sessionKey('x'))?.pod, a, 'x\'s prefix still retained on its pod');
  });
}

test('a policy that does not keep retained prefixes (ear without kvAware, a baseline) is released where it was placed', () => {
  for (const [policy, knobs] of [['ear', { kvAware: false }], ['least-request', {}]] as const) {
    const t = admitted(policy, knobs);
    const { a, z } = scenario(t, true);
    assert.equal(podOf(z), a, `${policy}: released on x's pod when its seat freed`);
    assert.equal(t.host.admission.retentionReroutes, 0);
  }
});

test('a decision that does not keep retained prefixes (ear placing by cost short of KV) is released where it was placed', () => {
  // ear's own placements, each marked as ear marks its decisions short of KV
  const inner = createPolicy('ear', { shortCost: false });
  const marked: Policy = { name: 'ear-marked', keepsRetained: true, route: (r, c, now) => ({ ...inner.route(r, c, now), keepsRetained: false }) };
  const t = admitted(marked);
  const { a, z } = scenario(t, true);
  assert.equal(podOf(z), a);
  assert.equal(t.host.admission.retentionReroutes, 0);
});

test('the pod with KV room has no seat: the request is released where it was placed (keeping a prefix adds no wait)', () => {
  const t = admitted('ear');
  const { a, z } = scenario(t, false);
  assert.equal(podOf(z), a);
  assert.equal(t.host.admission.retentionReroutes, 0);
});

test('no pod with KV room: the parked request is released where it was placed (nothing is gained by moving it)', () => {
  const t = admitted('ear');
  // The other pod's KV is nearly full (engine report): it has no room either.
  t.host.engineLoad(1, { running: 1, waiting: 0, kvUsage: 0.9, numGpuBlocks: CAPACITY }, 0);
  t.host.engineLoad(0, { running: 0, waiting: 0, kvUsage: 0, numGpuBlocks: CAPACITY }, 0);
  const x = submit(t, 'x', 14_400, 0).placed!;
  t.host.firstToken(x, 1);
  assert.equal(x.pod, 0);
  const z = submit(t, 'z', 8000, 3);
  assert.equal(z.placed, null);
  t.host.finished(x, { promptTokens: 14_400, completionTokens: 16, toolCall: true }, 10);
  assert.equal(podOf(z.w), 0);
  assert.equal(t.host.admission.retentionReroutes, 0);
});
