// `ear epp`'s admission through the ext_proc stream: a shed request gets 429, a client that goes away while its
// response streams or while it waits for admission holds nothing afterwards, no backend gives 503, the gRPC
// health services say what Kubernetes and the proxy need, and SIGTERM drains.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { stop, type Proc } from '../fixtures/processes.js';
import { chat, epp, health, metric, metricSum, sims, watchFirst, type Epp } from './epp-process.js';
import { until } from '../fixtures/wait.js';

let engines: Proc[] = [];
let e: Epp;

// One engine that admission lets hold one request at a time, a queue of one, and streams long enough to act on.
before(async () => {
  engines = await sims(1, ['--stop-probability', '0', '--time-scale', '0.5']);
  e = await epp([`${engines[0].url},id=sim-0,max-concurrent=1`], ['--max-queued', '1', '--queue-timeout-ms', '8000']);
});

after(async () => {
  await e?.close();
  await Promise.all(engines.map((s) => stop(s)));
});

const long = (tag: string): Buffer => chat(tag, { stream: true, max_tokens: 60 });

test('shed: with the engine full and the queue full, the next request is answered 429 by ImmediateResponse', async () => {
  let queued: Promise<unknown> | null = null;
  let shed: Awaited<ReturnType<typeof e.envoy.exchange>> | null = null;
  const a = await e.envoy.exchange({
    body: long('holder'),
    beforeUpstream: async () => {
      // A is admitted and holds the engine's one slot: B waits in the queue, C finds it full.
      queued = e.envoy.exchange({ body: chat('waiter') });
      await until(async () => await metricSum(e.http, 'ear_admission_queue_depth') === 1, 'ear_admission_queue_depth = 1');
      shed = await e.envoy.exchange({ body: chat('shed') });
    }
  });
  assert.equal(a.status, 200);
  assert.equal(shed!.immediate?.status, 429);
  assert.equal(JSON.parse(shed!.immediate!.body).error.code, 'EAR_ERR_QUEUE_FULL');
  assert.ok(Number(shed!.immediate!.headers['retry-after']) >= 1);
  const b = await queued! as { status: number };
  assert.equal(b.status, 200, 'the queued one is admitted once the first ends');
  assert.equal(await metric(e.http, 'ear_epp_requests_total', '{outcome="shed"}'), 1);
  assert.equal(await metric(e.http, 'ear_admission_rejected_total'), 1);
});

test('a client abort mid-stream (the gRPC call cancelled) releases the admission slot', async () => {
  // Long enough that two chunks cannot be the whole stream, even on a loaded machine.
  const x = await e.envoy.exchange({ body: chat('aborted', { stream: true, max_tokens: 400 }), abortAfterChunks: 2 });
  assert.ok(x.responseBody.includes('data:'), 'it was streaming when cancelled');
  await until(async () => await metric(e.http, 'ear_epp_stream_aborts_total', '{phase="response"}') === 1, 'ear_epp_stream_aborts_total{phase="response"} = 1');
  await until(async () => await metric(e.http, 'ear_backend_in_flight', '{backend="sim-0"}') === 0, 'ear_backend_in_flight{backend="sim-0"} = 0');
  assert.equal(await metric(e.http, 'ear_epp_streams_active'), 0);
  // With the slot leaked this one would wait for the queue timeout and get a 504; it is admitted without a wait.
  const waited = await metricSum(e.http, 'ear_admission_wait_seconds_count');
  const next = await e.envoy.exchange({ body: chat('after the abort') });
  assert.equal(next.status, 200);
  assert.equal(await metricSum(e.http, 'ear_admission_wait_seconds_count'), waited, 'it did not queue');
});

test('a client that goes away while queued leaves the queue', async () => {
  let cancel!: () => void;
  const cancelled = new Promise<void>((resolve) => { cancel = resolve; });
  let waiting: Promise<unknown> | null = null;
  const a = await e.envoy.exchange({
    body: long('holder 2'),
    beforeUpstream: async () => {
      waiting = e.envoy.exchange({ body: chat('gives up'), cancelWhen: cancelled }).catch((err: Error) => err);
      await until(async () => await metricSum(e.http, 'ear_admission_queue_depth') === 1, 'ear_admission_queue_depth = 1');
      cancel();
      await until(async () => await metricSum(e.http, 'ear_admission_queue_depth') === 0, 'ear_admission_queue_depth = 0');
    }
  });
  assert.equal(a.status, 200);
  assert.ok(await waiting! instanceof Error, 'the cancelled exchange ended');
  assert.equal(await metric(e.http, 'ear_epp_stream_aborts_total', '{phase="queued"}'), 1);
  await until(async () => await metric(e.http, 'ear_backend_in_flight', '{backend="sim-0"}') === 0, 'ear_backend_in_flight{backend="sim-0"} = 0');
});

test('gRPC health: liveness, readiness and the ext_proc service; an unknown service is NOT_FOUND', async () => {
  assert.equal(await health(e.health, 'liveness'), 'SERVING');
  assert.equal(await health(e.health, 'readiness'), 'SERVING');
  assert.equal(await health(e.health, 'envoy.service.ext_proc.v3.ExternalProcessor'), 'SERVING');
  assert.equal(await health(e.health, 'nope'), 'code 5');
  assert.deepEqual(await watchFirst(e.health, 'readiness'), 'SERVING');
  assert.equal((await fetch(`${e.http}/ready`)).status, 200);
});

test('no backend: readiness is NOT_SERVING and a request is answered 503', async () => {
  // Nothing listens on port 1: the only backend never passes its probe.
  const dead = await epp(['http://127.0.0.1:1,id=dead']);
  try {
    assert.equal(await health(dead.health, 'liveness'), 'SERVING');
    assert.equal(await health(dead.health, 'readiness'), 'NOT_SERVING');
    assert.equal(await health(dead.health, 'envoy.service.ext_proc.v3.ExternalProcessor'), 'NOT_SERVING');
    const x = await dead.envoy.exchange({ body: chat('nobody home') });
    assert.equal(x.immediate?.status, 503);
    assert.equal(JSON.parse(x.immediate!.body).error.code, 'EAR_ERR_NO_BACKEND');
    assert.equal(await metric(dead.http, 'ear_epp_requests_total', '{outcome="no_endpoint"}'), 1);
    const passthrough = await dead.envoy.exchange({ path: '/v1/models', body: null });
    assert.equal(passthrough.immediate?.status, 503);
  } finally {
    await dead.close();
  }
});

test('API keys as ear serve checks them (401 without one), and x-ear-priority is read (400 when invalid)', async () => {
  const keyed = await epp([`${engines[0].url},id=sim-0`], ['--api-key', 'client-key']);
  try {
    const none = await keyed.envoy.exchange({ body: chat('no key') });
    assert.equal(none.immediate?.status, 401);
    const wrong = await keyed.envoy.exchange({ body: chat('bad priority'), headers: { authorization: 'Bearer client-key', 'x-ear-priority': 'urgent!' } });
    assert.equal(wrong.immediate?.status, 400);
    const ok = await keyed.envoy.exchange({ body: chat('with key'), headers: { authorization: 'Bearer client-key', 'x-ear-priority': 'high' } });
    assert.equal(ok.status, 200);
    assert.equal(await metric(keyed.http, 'ear_epp_requests_total', '{outcome="rejected"}'), 2);
  } finally {
    await keyed.close();
  }
});

test('--ext-proc-mode buffered: a proxy that sends no protocol_config is answered message by message; a body over maxBodyBytes is 413', async () => {
  const small = await epp([`${engines[0].url},id=sim-0`], ['--max-body-bytes', '2000', '--ext-proc-mode', 'buffered']);
  try {
    const ok = await small.envoy.exchange({ mode: 'BUFFERED', noProtocolConfig: true, body: chat('buffered by default') });
    assert.equal(ok.status, 200);
    const x = await small.envoy.exchange({ mode: 'BUFFERED', body: chat('x'.repeat(5000)) });
    assert.equal(x.immediate?.status, 413);
  } finally {
    await small.close();
  }
});

test('SIGTERM: readiness turns NOT_SERVING, the open stream finishes, the process exits 0', async () => {
  const d = await epp([`${engines[0].url},id=sim-0`]);
  const exited = once(d.proc.child, 'exit');
  try {
    const x = await d.envoy.exchange({
      body: long('draining'),
      beforeUpstream: async () => {
        d.proc.child.kill('SIGTERM');
        await until(async () => await health(d.health, 'readiness') === 'NOT_SERVING', 'readiness NOT_SERVING');
      }
    });
    assert.equal(x.status, 200);
    assert.match(x.responseBody, /\[DONE\]/);
    const [code] = await exited as [number];
    assert.equal(code, 0);
  } finally {
    await d.close();
  }
});
