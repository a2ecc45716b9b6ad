// A data-plane thread's side of the owner protocol (owner-client.ts) against a scripted owner on a MessageChannel:
// many requests in one tick go as one batch whose block keys the owner reads from the key ring, and answers that
// come back out of order (released, a gate's) reach the request they name; a release that arrives after its
// client left is undone at once.
import { test, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { MessageChannel } from 'node:worker_threads';
import { setImmediate as turn } from 'node:timers/promises';
import { buildConfig } from '../../src/config/index.js';
import { OwnerClient } from '../../src/gateway/owner-client.js';
import { KeyRingReader, KeyRingWriter } from '../../src/gateway/key-ring.js';
import { REPORT_FINISHED, type BackendWire, type PlacementWire, type ToOwner, type ToOwnerItem, type ToThread } from '../../src/gateway/owner-protocol.js';
import type { GatewayWaiter, Placement, RoutingInput } from '../../src/fleet/routing-port.js';
import { smallRegion } from '../core/fixtures/small-region.js';

function setup (t: TestContext) {
  const config = buildConfig({ backends: [{ url: 'http://127.0.0.1:1' }] });
  const { region } = smallRegion();
  const area = region.claimScratch();
  const { port1, port2 } = new MessageChannel();
  const client = new OwnerClient(port1, config, region, new KeyRingWriter(region, area.ptr, area.bytes));
  port1.on('message', (batch: ToThread[]) => { for (const m of batch) client.receive(m); });
  const batches: ToOwnerItem[][] = [];
  port2.on('message', (b: ToOwnerItem[]) => batches.push(b));
  const keys = new KeyRingReader(region, area.ptr);
  const backend: BackendWire = { index: 0, config: config.backends[0], health: 'healthy', draining: false, models: ['m'], maxModelLen: [], engineLoad: null };
  const send = (...ms: ToThread[]): void => port2.postMessage(ms);
  // Closed however the test ends: an open port would keep the test's process alive.
  t.after(async () => {
    port1.close();
    port2.close();
    await Promise.all(client.backends.map((b) => b.pool.close()));
  });
  return { client, batches, keys, backend, send };
}

const input = (i: number): RoutingInput => ({
  model: 'm', sessionId: `s${i}`, parentSessionId: null, promptTokens: 16 * (i % 4), maxTokens: null, user: null,
  blockKeys: BigUint64Array.from({ length: i % 4 }, (_, k) => BigInt(i) * 1000n + BigInt(k))
});

const placement = (pid: number): PlacementWire => ({ pid, index: 0, backendId: 'backend-0', reason: 'test', expectedPrefill: 0, decidedAt: 0, transferFrom: null });

async function until (f: () => boolean): Promise<void> {
  while (!f()) await turn();
}

test('a burst of submits in one tick: one batch, keys through the ring, releases out of order reach their own requests', async (t) => {
  const s = setup(t);
  const released = new Map<number, Placement>();
  const waiter = (i: number): GatewayWaiter => ({ released: (p) => released.set(i, p), dropped: () => assert.fail('dropped') });
  const N = 200;
  for (let i = 0; i < N; i++) s.client.submit(input(i), waiter(i), 0, 0);
  await until(() => s.batches.length > 0);
  assert.equal(s.batches.length, 1, 'one tick, one message');
  const subs = s.batches[0].filter((m): m is ToOwner => typeof m !== 'number' && m.t === 'submit');
  assert.equal(subs.length, N);
  subs.forEach((m, i) => {
    if (m.t !== 'submit') return;
    assert.equal(m.input.sessionId, `s${i}`);
    assert.equal(m.input.blockKeys, undefined, 'the keys are not in the message');
    const got = m.input.keysN === undefined ? new BigUint64Array(0) : s.keys.take({ at: m.input.keysAt!, n: m.input.keysN });
    assert.deepEqual(got, input(i).blockKeys);
  });
  // The backend list first (a placement never names an unknown backend), then releases in reverse order.
  s.send({ t: 'backends', list: [{ ...s.backend, config: { ...s.backend.config, id: 'backend-0' } }] },
    ...subs.reverse().map((m) => ({ t: 'released' as const, id: (m as { id: number }).id, placement: placement(1000 + (m as { id: number }).id), queued: true, waitMs: 1, level: 0, promoted: false })));
  await until(() => released.size === N);
  const ids = s.batches[0].map((m) => (m as { id: number }).id);
  for (let i = 0; i < N; i++) assert.equal((released.get(i) as Placement & { pid: number }).pid, 1000 + ids[i], `request ${i} got its own placement`);
});

test('answers out of order resolve the calls they name; a release after its client left is undone', async (t) => {
  const s = setup(t);
  const users = [0, 1, 2].map((i) => s.client.admitClient('/v1/chat/completions', `key${i}`, () => '127.0.0.1', () => {}));
  const left = s.client.submit(input(1), { released: () => assert.fail('released after it left'), dropped: () => assert.fail('dropped') }, 0, 0);
  await until(() => s.batches.flat().length === 4);
  const [g0, g1, g2, sub] = s.batches.flat() as Array<ToOwner & { id: number }>;
  assert.ok('queued' in left, 'a thread\'s submit always waits for the owner');
  assert.equal(s.client.cancel(left), true);
  const before = performance.timeOrigin + performance.now();
  s.send({ t: 'backends', list: [{ ...s.backend, config: { ...s.backend.config, id: 'backend-0' } }] },
    { t: 'answer', id: g2.id, ok: true, value: { user: 'u2', limits: null } },
    { t: 'released', id: sub.id, placement: placement(7), queued: false, waitMs: 0, level: 0, promoted: false },
    { t: 'answer', id: g0.id, ok: true, value: { user: 'u0', limits: null } },
    { t: 'answer', id: g1.id, ok: false, error: { code: 'EAR_ERR_UNAUTHORIZED', message: 'no' } });
  assert.deepEqual((await users[0]).user, 'u0');
  await assert.rejects(async () => await users[1], /no/);
  assert.deepEqual((await users[2]).user, 'u2');
  // Undone: a finished report on its placement, unserved (as numbers: pid * 4 + REPORT_FINISHED, the thread's time,
  // not ok, no usage).
  await until(() => s.batches.flat().includes(7 * 4 + REPORT_FINISHED));
  const rest = s.batches.flat().slice(4);
  const at = rest[2] as number;
  assert.ok(at >= before && at <= performance.timeOrigin + performance.now(), `the time it ended: ${at}`);
  assert.deepEqual(rest.map((m) => typeof m === 'number' ? m : m.t), ['cancel', 7 * 4 + REPORT_FINISHED, at, 0, -1, -1, -1]);
});

test('an open gate is not asked; once the owner closes it (a reload with keys), every client is asked again', async (t) => {
  const s = setup(t);
  let addressed = 0;
  let posted = 0;
  const ask = (): unknown => {
    const r = s.client.admitClient('/v1/chat/completions', '', () => { addressed++; return '127.0.0.1'; }, () => {});
    if (r instanceof Promise) posted++;
    return r;
  };
  const received = (): ToOwnerItem[] => s.batches.flat();
  const asked = (): number => received().filter((m) => typeof m !== 'number' && m.t === 'gate').length;
  /** Everything the client posted so far has arrived (messages keep their order: a marker after them says so). */
  let markers = 0;
  const settled = async (): Promise<void> => {
    s.client.post({ t: 'drained' });
    const n = ++markers;
    await until(() => received().filter((m) => typeof m !== 'number' && m.t === 'drained').length === n);
  };
  assert.ok(ask() instanceof Promise, 'closed until the owner says otherwise');
  s.send({ t: 'gateOpen', open: true });
  while (ask() instanceof Promise) await new Promise((resolve) => setTimeout(resolve, 1));
  await settled();
  assert.equal(asked(), posted);
  assert.equal(addressed, posted, 'the address is read only to ask');
  assert.deepEqual(ask(), { user: null, limits: null });
  await settled();
  assert.equal(asked(), posted, 'an open gate: nothing asked');
  assert.equal(addressed, posted, 'an open gate: not even the address read');
  s.send({ t: 'gateOpen', open: false });
  while (!(ask() instanceof Promise)) await new Promise((resolve) => setTimeout(resolve, 1));
  await settled();
  assert.equal(asked(), posted, 'closed again: asked');
});
