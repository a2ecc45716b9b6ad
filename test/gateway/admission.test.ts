// Admission at the gateway (issue 11): requests wait in the host's queue while their backend is at capacity
// (here a backend's max-concurrent=1 in front of a real `ear sim`), and every way out of the queue answers the
// client as a production gateway should: released in priority order, 429 with Retry-After at the bound, a
// timeout error past queueTimeoutMs, removed when the client goes away, served during a drain (503 at its deadline).
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { request, getGlobalDispatcher } from 'undici';
import { buildConfig } from '../../src/config/index.js';
import { withTestThreads } from '../fixtures/http-threads-env.js';
import { startEar, type Ear } from '../../src/gateway/ear.js';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { until } from '../fixtures/wait.js';

after(() => getGlobalDispatcher().close());


let sim: SimServer;
async function engine (): Promise<SimServer> {
  // Real time, no early stop: a request of N tokens holds the engine for N decode steps.
  sim ??= await startSim({ host: '127.0.0.1', port: 0, timeScale: 1, stopProbability: 0, servedModelName: ['m'], logger: pino({ level: 'silent' }) });
  return sim;
}
after(() => sim?.close());

async function gateway (over: Record<string, unknown> = {}): Promise<{ ear: Ear; url: string }> {
  const s = await engine();
  const ear = await startEar(buildConfig(
    withTestThreads({ host: '127.0.0.1', port: 0, routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 0, adminToken: 'admin', ...over }),
    { backend: [`${s.url},id=e0,max-concurrent=1`] }
  ));
  return { ear, url: `http://127.0.0.1:${ear.gateway.port}` };
}

function send (url: string, session: string, maxTokens: number, headers: Record<string, string> = {}, signal?: AbortSignal) {
  return request(`${url}/v1/completions`, {
    method: 'POST', signal,
    headers: { 'content-type': 'application/json', 'x-session-id': session, ...headers },
    body: JSON.stringify({ model: 'm', prompt: `a prompt for ${session}`, max_tokens: maxTokens })
  });
}

test('at capacity requests wait and are released one at a time, the higher class first', async () => {
  const { ear, url } = await gateway({ scheduler: 'plas' });
  try {
    const order: string[] = [];
    const done = (name: string) => async (r: Awaited<ReturnType<typeof send>>) => {
      assert.equal(r.statusCode, 200, `${name}: ${await r.body.text()}`);
      await r.body.dump();
      order.push(name);
    };
    const first = send(url, 'first', 30).then(done('first'));
    await until(() => ear.routing.host.load.inFlight(0) === 1, 'the first request runs');
    const low = send(url, 'low', 5, { 'x-ear-priority': 'low' }).then(done('low'));
    await until(() => ear.routing.admissionStats(0).waiting === 1, 'the low one waits');
    const high = send(url, 'high', 5, { 'x-ear-priority': 'high' }).then(done('high'));
    await until(() => ear.routing.admissionStats(0).waiting === 2, 'both wait');
    await Promise.all([first, low, high]);
    assert.deepEqual(order, ['first', 'high', 'low']);
    const s = ear.routing.admissionStats(performance.timeOrigin + performance.now());
    assert.equal(s.released, 3);
    assert.ok(s.longestWaitMs > 0);
    const metrics = await (await request(`${url}/metrics`)).body.text();
    assert.match(metrics, /^ear_admission_released_total 3$/m);
    assert.match(metrics, /^ear_admission_capacity\{backend="e0"\} 1$/m);
    assert.match(metrics, /^ear_admission_wait_seconds_count\{level="0"\} 2$/m);
    const admin = await request(`${url}/admin/sessions/low`, { headers: { authorization: 'Bearer admin' } });
    const doc = await admin.body.json() as Record<string, number>;
    assert.ok(doc.waitMs > 0 && doc.attainedServiceMs > 0 && doc.criticalPathMs > 0, JSON.stringify(doc));
  } finally {
    await ear.close();
  }
});

test('the bound answers 429 with Retry-After; a queue timeout answers 504 timeout_error', async () => {
  // The third request must reach the queue while the second still waits in it (a data-plane thread's hops on a
  // loaded machine took more than a 300 ms timeout once), and the second must time out while the first runs
  // (600 tokens: ~3.7 s of the engine's steps).
  const { ear, url } = await gateway({ scheduler: 'fcfs', maxQueued: 1, queueTimeoutMs: 1500 });
  try {
    const first = send(url, 'a', 600);
    await until(() => ear.routing.host.load.inFlight(0) === 1, 'the first request runs');
    const second = send(url, 'b', 5);
    await until(() => ear.routing.admissionStats(0).waiting === 1, 'the second waits');
    const third = await send(url, 'c', 5);
    assert.equal(third.statusCode, 429);
    assert.ok(Number(third.headers['retry-after']) >= 1, String(third.headers['retry-after']));
    assert.deepEqual((await third.body.json() as { error: { type: string; code: string } }).error.type, 'rate_limit_error');
    const r2 = await second;
    assert.equal(r2.statusCode, 504);
    const err = (await r2.body.json() as { error: { message: string; type: string; code: string } }).error;
    assert.equal(err.type, 'timeout_error');
    assert.equal(err.code, 'EAR_ERR_QUEUE_TIMEOUT');
    assert.equal((await first).statusCode, 200);
    const s = ear.routing.admissionStats(0);
    assert.equal(s.rejected, 1);
    assert.equal(s.timedOut, 1);
  } finally {
    await ear.close();
  }
});

test('a client that goes away while queued leaves the queue; a queued request is served during the drain', async () => {
  const { ear, url } = await gateway({ scheduler: 'atlas' });
  let closed = false;
  try {
    const first = send(url, 'a', 40);
    await until(() => ear.routing.host.load.inFlight(0) === 1, 'the first request runs');
    const ac = new AbortController();
    const gone = send(url, 'gone', 5, {}, ac.signal).catch((e: Error) => e);
    await until(() => ear.routing.admissionStats(0).waiting === 1, 'it waits');
    ac.abort();
    assert.ok((await gone) instanceof Error);
    await until(() => ear.routing.admissionStats(0).waiting === 0, 'the abort took it out of the queue');
    const queued = send(url, 'queued', 5);
    await until(() => ear.routing.admissionStats(0).waiting === 1, 'another waits');
    const closing = ear.close();
    closed = true;
    // It was accepted and the backend is healthy: it is released when the running request ends, as in flight.
    assert.equal((await first).statusCode, 200, 'the running request drains');
    const r = await queued;
    assert.equal(r.statusCode, 200, await r.body.text());
    await closing;
    assert.equal(ear.routing.admissionStats(0).released, 2, 'the gone one was never sent');
  } finally {
    if (!closed) await ear.close();
  }
});

test('what still waits for admission at the drain deadline is answered 503', async () => {
  const { ear, url } = await gateway({ scheduler: 'atlas', drainTimeoutMs: 200 });
  // Past the deadline the running one is cut (a data-plane thread closes its connections as it ends): either way.
  const first = send(url, 'long', 400).catch(() => null);
  await until(() => ear.routing.host.load.inFlight(0) === 1, 'the first request runs');
  const queued = send(url, 'queued', 5);
  await until(() => ear.routing.admissionStats(0).waiting === 1, 'another waits');
  const closing = ear.close();
  const r = await queued;
  assert.equal(r.statusCode, 503);
  const err = (await r.body.json() as { error: { code: string; message: string } }).error;
  assert.equal(err.code, 'EAR_ERR_DRAINING');
  assert.match(err.message, /waiting for admission \(drainTimeoutMs\)/);
  await closing;
  await (await first)?.body.dump().catch(() => {});
});

test('a bad x-ear-priority is a 400; an API key can carry a class', async () => {
  const { ear, url } = await gateway({ apiKeys: ['k1'], apiKeyPriority: { k1: 'high' } });
  try {
    const r = await send(url, 's', 2, { 'x-ear-priority': 'urgent', authorization: 'Bearer k1' });
    assert.equal(r.statusCode, 400);
    assert.match((await r.body.json() as { error: { message: string } }).error.message, /x-ear-priority/);
    const ok = await send(url, 's', 2, { authorization: 'Bearer k1' });
    assert.equal(ok.statusCode, 200);
    await ok.body.dump();
  } finally {
    await ear.close();
  }
  assert.throws(() => buildConfig({ apiKeyPriority: { k1: 'urgent' } }), /apiKeyPriority/);
  assert.throws(() => buildConfig({ scheduler: 'lifo' }), /scheduler/);
});
