// Issue 23 item 7's end-to-end check: `ear serve` in front of an `ear sim --scheduling-policy priority` engine
// (max_num_seqs 1, so every request after a long blocker queues in the engine) serves in the gateway's order:
// the class first, then the ATLAS level. Without `priority=vllm` on the backend the same engine serves by arrival.
// The gateway holds nothing here (no scrape: metricsIntervalMs 0), so the order measured is the engine's.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { request, getGlobalDispatcher } from 'undici';
import type { Ear } from '../../src/gateway/ear.js';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { quiet, text } from '../sim/http-helpers.js';
import { earInFront } from '../fixtures/ear-in-front.js';
import { until } from '../fixtures/wait.js';

after(() => getGlobalDispatcher().close());

async function fleet (spec: string, over: Record<string, unknown> = {}): Promise<{ sim: SimServer; ear: Ear; url: string }> {
  const sim = await startSim({
    host: '127.0.0.1', port: 0, timeScale: 0.2, stopProbability: 0, servedModelName: ['m'], logger: quiet,
    schedulingPolicy: 'priority', maxNumSeqs: 1
  });
  const { ear, url } = await earInFront(sim.url, spec, over);
  // After the gateway's own close (after hooks run in the order they were added).
  after(() => sim.close());
  return { sim, ear, url };
}

interface Call { name: string; session: string; headers?: Record<string, string> }

/**
 * A blocker holds the engine's one seat; the calls are sent one by one, each queued in the engine before the next.
 * The order is the engine's own (the steps that finish each request), not the order the answers reach the client,
 * which a loaded machine can swap for two requests that finish a step apart.
 */
async function serviceOrder (sim: SimServer, url: string, calls: Call[]): Promise<string[]> {
  const names = ['blocker', ...calls.map((c) => c.name)];
  const arrivals: string[] = [];
  const finished: string[] = [];
  const engine = sim.engine;
  const add = engine.addRequest.bind(engine);
  const step = engine.step.bind(engine);
  engine.addRequest = (r) => { arrivals.push(r.id); add(r); };
  engine.step = (now) => {
    const res = step(now);
    for (const o of res.outputs) if (o.finished !== null) finished.push(o.id);
    return res;
  };
  const send = (c: Call, maxTokens: number, seed: number): Promise<void> =>
    request(`${url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-session-id': c.session, ...c.headers },
      body: JSON.stringify({ model: 'm', prompt: text(16, seed), max_tokens: maxTokens, ignore_eos: true })
    }).then(async (r) => {
      assert.equal(r.statusCode, 200, `${c.name}: ${await r.body.text()}`);
      await r.body.dump();
    });
  const sent = [send({ name: 'blocker', session: 'blocker' }, 300, 1)];
  await until(() => sim.engine.stats().running === 1, 'the blocker runs');
  for (const [i, c] of calls.entries()) {
    sent.push(send(c, 2, 10 + i));
    await until(() => sim.engine.stats().waiting === i + 1, `${c.name} waits in the engine`);
  }
  assert.equal(sim.engine.stats().running, 1, 'the blocker still runs: every call queued behind it');
  await Promise.all(sent);
  assert.equal(arrivals.length, names.length, 'each call reached the engine once');
  return finished.map((id) => names[arrivals.indexOf(id)]);
}

const byClass: Call[] = [
  { name: 'low', session: 's-low', headers: { 'x-ear-priority': 'low' } },
  { name: 'normal', session: 's-normal' },
  { name: 'high', session: 's-high', headers: { 'x-ear-priority': 'high' } }
];

test('priority=vllm: the engine serves its queue in the gateway\'s class order', async () => {
  const { sim, url } = await fleet(',priority=vllm');
  assert.deepEqual(await serviceOrder(sim, url, byClass), ['blocker', 'high', 'normal', 'low']);
});

test('without priority=vllm the same engine serves by arrival (every request at its default 0)', async () => {
  const { sim, url } = await fleet('');
  assert.deepEqual(await serviceOrder(sim, url, byClass), ['blocker', 'low', 'normal', 'high']);
});

test('priority=vllm under atlas: a new session\'s call runs before a long session\'s, though sent after it', async () => {
  // A 1 ms quantum: the veteran's first call (tens of ms of service) puts its next call levels below a new session's.
  const { sim, ear, url } = await fleet(',priority=vllm', { scheduler: 'atlas', schedulerQuantumMs: 1 });
  const first = await request(`${url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 'veteran' },
    body: JSON.stringify({ model: 'm', prompt: text(16, 2), max_tokens: 20, ignore_eos: true })
  });
  assert.equal(first.statusCode, 200);
  await first.body.dump();
  await until(() => ear.routing.host.load.inFlight(0) === 0, 'the veteran\'s first call ended');
  const order = await serviceOrder(sim, url, [{ name: 'veteran', session: 'veteran' }, { name: 'newcomer', session: 'newcomer' }]);
  assert.deepEqual(order, ['blocker', 'newcomer', 'veteran']);
});
