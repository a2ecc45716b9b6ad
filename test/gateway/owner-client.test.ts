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
import { ANSWER_RELEASED, FINISHED_FIELDS, RELEASED_FIELDS, SUBMIT_FIELDS, SUBMIT_RECORD, RELEASED_MIGRATING, RELEASED_QUEUED, RELEASED_RANK, REPORT_FINISHED, type BackendWire, type ToOwner, type ToOwnerItem, type ToThread, type ToThreadItem } from '../../src/gateway/owner-protocol.js';
import type { GatewayWaiter, Placement, RoutingInput } from '../../src/fleet/routing-port.js';
import { smallRegion } from '../core/fixtures/small-region.js';
import { LoadTable } from '../../src/core/load-table.js';
import { QueueFullError } from '../../src/core/admission-control.js';

function setup (t: TestContext) {
  const config = buildConfig({ backends: [{ url: 'http://127.0.0.1:1' }] });
  const { region } = smallRegion();
  const area = region.claimScratch();
  const { port1, port2 } = new MessageChannel();
  const gone: string[] = [];
  const client = new OwnerClient(port1, config, region, new KeyRingWriter(region, area.ptr, area.bytes), (id) => gone.push(id));
  port1.on('message', (batch: ToThreadItem[]) => client.receiveBatch(batch, (m) => assert.fail(`not the client's: ${m.t}`)));
  const batches: ToOwnerItem[][] = [];
  port2.on('message', (b: ToOwnerItem[]) => batches.push(b));
  const keys = new KeyRingReader(region, area.ptr);
  const backend: BackendWire = { index: 0, config: config.backends[0], health: 'healthy', draining: false, models: ['m'], maxModelLen: [] };
  const send = (...ms: Array<ToThread | ToThreadItem[]>): void => port2.postMessage(ms.flatMap((m) => Array.isArray(m) ? m : [m]));
  // Closed however the test ends: an open port would keep the test's process alive.
  t.after(async () => {
    port1.close();
    port2.close();
    await Promise.all(client.backends.map((b) => b.pool.close()));
  });
  return { client, batches, keys, backend, send, region, gone };
}

const input = (i: number): RoutingInput => ({
  model: 'm', sessionId: `s${i}`, parentSessionId: null, promptTokens: 16 * (i % 4), maxTokens: null, user: null,
  blockKeys: BigUint64Array.from({ length: i % 4 }, (_, k) => BigInt(i) * 1000n + BigInt(k))
});

/** The owner's release of submit `id` as the record it sends (owner-protocol.ts): placement `pid` on row 0. */
const releaseRecord = (id: number, pid: number, fields: { queued?: boolean; dispatchedAt?: number; from?: number; migrating?: boolean; rank?: [number, number] } = {}): ToThreadItem[] => {
  const flags = (fields.queued === true ? RELEASED_QUEUED : 0) | (fields.migrating === true ? RELEASED_MIGRATING : 0) | (fields.rank !== undefined ? RELEASED_RANK : 0);
  const r: ToThreadItem[] = [id * 4 + ANSWER_RELEASED, pid, 0, 32, 2, 5, fields.dispatchedAt ?? -1, fields.from ?? -1, flags, 1, 0, fields.rank?.[0] ?? 0, fields.rank?.[1] ?? 0, 'test'];
  assert.equal(r.length, 1 + RELEASED_FIELDS);
  return r;
};

async function until (f: () => boolean): Promise<void> {
  while (!f()) await turn();
}

/** A submit that came as a record (owner-protocol.ts), its fields by name. */
interface SubmitRecord { t: 'submitRecord'; id: number; sessionId: string | null; keysAt: number; keysN: number; expected: number | null; priorityClass: number }

/** A thread's batches as messages: records read into objects as the owner reads them; a finished report stays numbers. */
function messages (batches: ToOwnerItem[][]): Array<ToOwner | SubmitRecord | number> {
  const out: Array<ToOwner | SubmitRecord | number> = [];
  for (const b of batches) {
    for (let i = 0; i < b.length; i++) {
      const m = b[i];
      if (typeof m === 'number' && m % 4 === SUBMIT_RECORD) {
        out.push({ t: 'submitRecord', id: m / 4, sessionId: b[i + 2] as string | null, keysAt: b[i + 7] as number, keysN: b[i + 8] as number, expected: b[i + 9] as number | null, priorityClass: b[i + 11] as number });
        i += SUBMIT_FIELDS;
      } else if (typeof m === 'number' && m % 4 === REPORT_FINISHED) {
        for (let k = 0; k <= FINISHED_FIELDS; k++) out.push(b[i + k] as number);
        i += FINISHED_FIELDS;
      } else out.push(m as ToOwner | number);
    }
  }
  return out;
}

test('a burst of submits in one tick: one batch, keys through the ring, releases out of order reach their own requests', async (t) => {
  const s = setup(t);
  const released = new Map<number, Placement>();
  const waiter = (i: number): GatewayWaiter => ({ released: (p) => released.set(i, p), dropped: () => assert.fail('dropped') });
  const N = 200;
  for (let i = 0; i < N; i++) s.client.submit(input(i), waiter(i), 0, 0);
  await until(() => s.batches.length > 0);
  assert.equal(s.batches.length, 1, 'one tick, one message');
  const subs = messages(s.batches) as SubmitRecord[];
  assert.equal(subs.length, N);
  subs.forEach((m, i) => {
    assert.equal(m.t, 'submitRecord', 'keys in the ring, no exclusions: a record');
    assert.equal(m.sessionId, `s${i}`);
    assert.deepEqual(s.keys.take({ at: m.keysAt, n: m.keysN }), input(i).blockKeys, 'the keys are in the ring');
  });
  const ids = subs.map((m) => m.id);
  // The backend list first (a placement never names an unknown backend), then releases in reverse order.
  s.send({ t: 'backends', list: [{ ...s.backend, config: { ...s.backend.config, id: 'backend-0' } }] },
    ...[...subs].reverse().map((m) => releaseRecord(m.id, 1000 + m.id, { queued: true })));
  await until(() => released.size === N);
  for (let i = 0; i < N; i++) assert.equal((released.get(i) as Placement & { pid: number }).pid, 1000 + ids[i], `request ${i} got its own placement`);
});

test('answers out of order resolve the calls they name; a release after its client left is undone', async (t) => {
  const s = setup(t);
  const users = [0, 1, 2].map((i) => s.client.admitClient('/v1/chat/completions', `key${i}`, () => '127.0.0.1', () => {}));
  const left = s.client.submit(input(1), { released: () => assert.fail('released after it left'), dropped: () => assert.fail('dropped') }, 0, 0);
  await until(() => messages(s.batches).length === 4);
  const [g0, g1, g2, sub] = messages(s.batches) as Array<(ToOwner | SubmitRecord) & { id: number }>;
  assert.ok('queued' in left, 'a thread\'s submit always waits for the owner');
  assert.equal(s.client.cancel(left), true);
  const before = performance.timeOrigin + performance.now();
  s.send({ t: 'backends', list: [{ ...s.backend, config: { ...s.backend.config, id: 'backend-0' } }] },
    { t: 'answer', id: g2.id, ok: true, value: { user: 'u2', limits: null } },
    releaseRecord(sub.id, 7),
    { t: 'answer', id: g0.id, ok: true, value: { user: 'u0', limits: null } },
    { t: 'answer', id: g1.id, ok: false, error: { code: 'EAR_ERR_UNAUTHORIZED', message: 'no' } });
  assert.deepEqual((await users[0]).user, 'u0');
  await assert.rejects(async () => await users[1], /no/);
  assert.deepEqual((await users[2]).user, 'u2');
  // Undone: a finished report on its placement, unserved (as numbers: pid * 4 + REPORT_FINISHED, the thread's time,
  // not ok, no usage).
  await until(() => s.batches.flat().includes(7 * 4 + REPORT_FINISHED));
  const rest = messages(s.batches).slice(4);
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
  const asked = (): number => received().filter((m) => typeof m === 'object' && m?.t === 'gate').length;
  /** Everything the client posted so far has arrived (messages keep their order: a marker after them says so). */
  let markers = 0;
  const settled = async (): Promise<void> => {
    s.client.post({ t: 'drained' });
    const n = ++markers;
    await until(() => received().filter((m) => typeof m === 'object' && m?.t === 'drained').length === n);
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

test('a release\'s record becomes the placement the owner made: its fields, its rank, the backend it transfers from', async (t) => {
  const s = setup(t);
  const got: Array<{ p: Placement; info: Parameters<GatewayWaiter['released']>[1] }> = [];
  const waiter: GatewayWaiter = { released: (p, info) => got.push({ p, info }), dropped: () => assert.fail('dropped') };
  s.client.submit(input(1), waiter, 0, 0);
  s.client.submit(input(2), waiter, 0, 0);
  await until(() => messages(s.batches).length === 2);
  const [a, b] = messages(s.batches) as SubmitRecord[];
  const two: BackendWire = { ...s.backend, index: 1, config: { ...s.backend.config, id: 'backend-1', url: 'http://127.0.0.1:2' } };
  s.send({ t: 'backends', list: [{ ...s.backend, config: { ...s.backend.config, id: 'backend-0' } }, two] },
    releaseRecord(a.id, 3, { queued: true, dispatchedAt: 9, from: 1, migrating: true, rank: [2, -7] }), releaseRecord(b.id, 4));
  await until(() => got.length === 2);
  const [x, y] = got.map((g) => g.p as Placement & { pid: number });
  assert.deepEqual({ pid: x.pid, backend: x.backend.id, from: x.transferFrom?.id, reason: x.reason, prefill: x.expectedPrefill, matched: x.matchedBlocks, decidedAt: x.decidedAt, dispatchedAt: x.dispatchedAt, migrating: x.migrating, rank: x.rank },
    { pid: 3, backend: 'backend-0', from: 'backend-1', reason: 'test', prefill: 32, matched: 2, decidedAt: 5, dispatchedAt: 9, migrating: true, rank: { classRank: 2, order: -7 } });
  assert.deepEqual(got[0].info, { now: 0, waitMs: 1, level: 0, promoted: false, queued: true });
  assert.deepEqual({ pid: y.pid, from: y.transferFrom, dispatchedAt: y.dispatchedAt, migrating: y.migrating, rank: y.rank }, { pid: 4, from: null, dispatchedAt: undefined, migrating: undefined, rank: undefined });
  assert.equal(got[1].info.queued, false);
});

test('a submit goes as the object message when it excludes backends or its keys find no room in the ring', async (t) => {
  const s = setup(t);
  const waiter: GatewayWaiter = { released: () => {}, dropped: () => {} };
  s.client.submit({ ...input(3), exclude: new Set([1]), expectedOutputTokens: 9 }, waiter, 0, 2);
  s.client.submit({ ...input(5), blockKeys: new BigUint64Array(1 << 20).fill(7n) }, waiter, 0, 0);
  s.client.submit({ ...input(2), deadlineAt: 123 }, waiter, 0, 1);
  await until(() => messages(s.batches).length === 3);
  const [x, y, z] = messages(s.batches) as Array<ToOwner | SubmitRecord>;
  assert.ok(x.t === 'submit' && x.input.exclude?.[0] === 1 && x.input.expectedOutputTokens === 9 && x.priorityClass === 2, 'excludes: the object');
  assert.ok(y.t === 'submit' && y.input.blockKeys?.length === 1 << 20, 'more keys than the ring holds: in the message');
  assert.ok(z.t === 'submitRecord' && z.priorityClass === 1 && z.expected === null, 'the rest: a record');
  assert.deepEqual(s.keys.take({ at: z.keysAt, n: z.keysN }), input(2).blockKeys);
});

test('a backend\'s engine queue is read from the load table as the owner last wrote it, not from the backend list', async (t) => {
  const s = setup(t);
  s.send({ t: 'backends', list: [{ ...s.backend, config: { ...s.backend.config, id: 'backend-0' } }] });
  await until(() => s.client.backends.length === 1);
  const [b] = s.client.backends;
  assert.deepEqual(s.client.engineQueue(b), { running: 0, waiting: 0 });
  new LoadTable(s.region).setEngine(0, { running: 3, waiting: 11, kvUsage: 0.5, time: 1 });
  assert.deepEqual(s.client.engineQueue(b), { running: 3, waiting: 11 });
  assert.equal(b.engineLoad, null, 'the list carries no engine load');
});

test('a submit the owner refuses (its queue full) reaches the waiter as the error, once; a cancelled one\'s refusal is dropped', async (t) => {
  const s = setup(t);
  const refused: Error[] = [];
  const waiter: GatewayWaiter = { released: () => assert.fail('released'), dropped: () => assert.fail('dropped'), refused: (e) => { refused.push(e as Error); } };
  s.client.submit(input(1), waiter, 0, 0);
  const gone = s.client.submit(input(2), waiter, 0, 0);
  await until(() => messages(s.batches).length === 2);
  const [a, b] = messages(s.batches) as SubmitRecord[];
  assert.ok('queued' in gone);
  assert.equal(s.client.cancel(gone), true);
  const full = { code: 'EAR_ERR_QUEUE_FULL', message: 'full', retryAfterSeconds: 2, queueFull: true };
  s.send({ t: 'answer', id: a.id, ok: false, error: full }, { t: 'answer', id: b.id, ok: false, error: full }, { t: 'answer', id: a.id, ok: false, error: full });
  await until(() => refused.length > 0);
  await turn();
  assert.equal(refused.length, 1);
  assert.ok(refused[0] instanceof QueueFullError);
  assert.equal((refused[0] as QueueFullError).retryAfterSeconds, 2);
});

test('a backend that leaves the owner\'s list is gone on the thread, its series dropped, unless its id stays under another URL', async (t) => {
  const { client, backend, send, gone } = setup(t);
  const other: BackendWire = { ...backend, index: 1, config: { ...backend.config, id: 'b2', url: 'http://127.0.0.1:2' } };
  send({ t: 'backends', list: [backend, other] });
  await until(() => client.backends.length === 2);
  const [first, second] = client.backends;
  // The same id at a new URL: a new Backend replaces the old one, whose series the new one keeps.
  const moved: BackendWire = { ...backend, config: { ...backend.config, url: 'http://127.0.0.1:3' } };
  send({ t: 'backends', list: [moved, other] });
  await until(() => client.backends[0] !== first);
  assert.equal(first.gone, true);
  assert.deepEqual(gone, [], 'an id still listed keeps its series');
  send({ t: 'backends', list: [moved] });
  await until(() => client.backends.length === 1);
  assert.equal(second.gone, true);
  assert.deepEqual(gone, ['b2']);
});
