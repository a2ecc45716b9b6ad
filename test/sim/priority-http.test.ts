// `ear sim --scheduling-policy priority` over HTTP: the body's `priority` reaches the engine and orders its waiting
// queue (lower first), under fcfs it is accepted and ignored (vLLM V1), and bad values get vLLM's 400.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { post, sim, text } from './http-helpers.js';
import { until } from '../fixtures/wait.js';
import type { SimServer } from '../../src/sim/server.js';

/** Sends a blocker that holds the only seat, then the others one by one while it runs; the order they finish in. */
async function finishOrder (s: SimServer, bodies: Array<{ name: string; priority?: number }>): Promise<string[]> {
  const order: string[] = [];
  const send = (name: string, prompt: string, maxTokens: number, priority?: number): Promise<void> =>
    post(`${s.url}/v1/completions`, { prompt, max_tokens: maxTokens, ignore_eos: true, ...(priority === undefined ? {} : { priority }) }).then((r) => {
      assert.equal(r.status, 200, r.text);
      order.push(name);
    });
  const sent = [send('blocker', text(64, 1), 300)];
  await until(() => s.engine.stats().running === 1, 'the blocker runs');
  for (const [i, b] of bodies.entries()) {
    sent.push(send(b.name, text(16, 10 + i), 2, b.priority));
    await until(() => s.engine.stats().waiting === i + 1, `${b.name} waits`);
  }
  assert.equal(s.engine.stats().running, 1, 'the blocker still runs: every other request queued behind it');
  await Promise.all(sent);
  return order;
}

const queue = [{ name: 'lazy', priority: 10 }, { name: 'default' }, { name: 'urgent', priority: -10 }];

test('--scheduling-policy priority: waiting requests run by the body\'s priority, lower first', async () => {
  const s = await sim({ schedulingPolicy: 'priority', maxNumSeqs: 1, timeScale: 0.2, stopProbability: 0 });
  try {
    assert.deepEqual(await finishOrder(s, queue), ['blocker', 'urgent', 'default', 'lazy']);
  } finally {
    await s.close();
  }
});

test('--scheduling-policy fcfs (vLLM\'s default): a priority is accepted and ignored, requests run in arrival order', async () => {
  const s = await sim({ maxNumSeqs: 1, timeScale: 0.2, stopProbability: 0 });
  try {
    assert.deepEqual(await finishOrder(s, queue), ['blocker', 'lazy', 'default', 'urgent']);
  } finally {
    await s.close();
  }
});

test('a priority that is not an int64 integer is vLLM\'s 400, naming the field', async () => {
  const s = await sim({ schedulingPolicy: 'priority' });
  try {
    for (const [priority, message] of [[1.5, /priority: Input should be a valid integer, got 1\.5/], ['3', /priority: Input should be a valid integer, got "3"/],
      [true, /valid integer/], [2 ** 64, /priority: Input should be less than or equal to 9223372036854775807/],
      [-(2 ** 64), /priority: Input should be greater than or equal to -9223372036854775808/]] as const) {
      const r = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 1, priority });
      assert.equal(r.status, 400, `${String(priority)}: ${r.text}`);
      assert.match(r.json.error.message, message);
      assert.equal(r.json.error.param, 'priority');
    }
    const ok = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 1, priority: -7 });
    assert.equal(ok.status, 200, ok.text);
    const nul = await post(`${s.url}/v1/completions`, { prompt: 'x', max_tokens: 1, priority: null });
    assert.equal(nul.status, 200, nul.text);
  } finally {
    await s.close();
  }
});
