import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import { CircuitBreaker, RemoteTokenizer, remoteTokenizerUrl } from '../../src/tokenize/remote.js';
import type { ChatMessage } from '../../src/tokenize/types.js';

const character = createTokenizerSync('character');
const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent.' }, { role: 'user', content: 'fix the bug in src/index.ts' }];
const charIds = () => character.encode(character.chatTemplate.render(messages, { addGenerationPrompt: true }), { addSpecialTokens: false });

let sim: SimServer;
before(async () => {
  sim = await startSim({ host: '127.0.0.1', port: 0, tokenizer: 'hf:qwen3', servedModelName: ['m'], logger: pino({ level: 'silent' }) });
});
after(() => sim.close());

/** A scripted /tokenize: `mode` decides each answer; `hits` counts requests. */
function fakeEngine (): Promise<{ url: string; hits: number; mode: 'ok' | '500' | '400' | 'hang' | 'junk'; close: () => Promise<void> }> {
  const held: ServerResponse[] = [];
  const state = {
    url: '', hits: 0, mode: 'ok' as 'ok' | '500' | '400' | 'hang' | 'junk',
    close: () => new Promise<void>((resolve) => { for (const r of held) r.destroy(); server.closeAllConnections(); server.close(() => resolve()); })
  };
  const server: Server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      state.hits++;
      if (state.mode === 'hang') { held.push(res); return; }
      const [status, body] = state.mode === 'ok' ? [200, '{"count":3,"tokens":[7,8,9]}'] : state.mode === '400' ? [400, '{"error":{"message":"bad"}}'] : state.mode === 'junk' ? [200, '{"tokens":"x"}'] : [500, 'boom'];
      res.writeHead(status, { 'content-type': 'application/json' }).end(body);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => {
    state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    resolve(state);
  }));
}

test('against a real engine (ear sim, hf:qwen3) the tokens equal the engine tokenizer\'s, for both body forms', async () => {
  const remote = new RemoteTokenizer(`remote:${sim.url}/`, character);
  const qwen = createTokenizerSync('hf:qwen3');
  const chat = await remote.encodeChat('m', messages, { addGenerationPrompt: true });
  assert.equal(chat.fallback, false);
  assert.deepEqual(chat.ids, qwen.encode(qwen.chatTemplate.render(messages, { addGenerationPrompt: true }), { addSpecialTokens: false }));
  const prompt = await remote.encodePrompt('m', 'def f(x):\n    return x');
  assert.deepEqual(prompt.ids, qwen.encode('def f(x):\n    return x'));
  // An unknown model is the engine's 404: answered by the fallback, not counted against the engine's health.
  const unknown = await remote.encodeChat('nope', messages, { addGenerationPrompt: true });
  assert.equal(unknown.fallback, true);
  assert.deepEqual(unknown.ids, charIds());
  const s = remote.stats();
  assert.deepEqual([s.calls, s.fallbacks, s.fallbacksRejected, s.failedAttempts, s.breaker], [3, 1, 1, 0, 'closed']);
});

test('5xx and malformed answers are retried, then fall back to character; the breaker opens after N failed calls', async () => {
  const engine = await fakeEngine();
  try {
    let now = 0;
    const remote = new RemoteTokenizer(`remote:${engine.url}`, character, { retries: 2, breakerFailures: 2, breakerCooldownMs: 1000 }, () => now);
    engine.mode = '500';
    let r = await remote.encodeChat('m', messages, { addGenerationPrompt: true });
    assert.equal(r.fallback, true);
    assert.deepEqual(r.ids, charIds());
    assert.equal(engine.hits, 3); // first attempt + 2 retries
    engine.mode = 'junk';
    r = await remote.encodeChat('m', messages, { addGenerationPrompt: true });
    assert.equal(r.fallback, true);
    assert.equal(engine.hits, 6);
    assert.equal(remote.stats().breaker, 'open');
    // Open: no call goes out.
    engine.mode = 'ok';
    r = await remote.encodeChat('m', messages, { addGenerationPrompt: true });
    assert.equal(r.fallback, true);
    assert.equal(engine.hits, 6);
    let s = remote.stats();
    assert.deepEqual([s.fallbacks, s.fallbacksFailed, s.fallbacksBreakerOpen, s.failedAttempts, s.breakerOpened], [3, 2, 1, 6, 1]);
    // After the cool-down one probe goes out; its success closes the breaker.
    now = 1000;
    assert.equal(remote.stats().breaker, 'half-open');
    r = await remote.encodeChat('m', messages, { addGenerationPrompt: true });
    assert.deepEqual([r.fallback, r.ids, engine.hits], [false, [7, 8, 9], 7]);
    assert.equal(remote.stats().breaker, 'closed');
    // A failed probe opens it again at once (one failure is enough in half-open).
    engine.mode = '500';
    await remote.encodeChat('m', messages, { addGenerationPrompt: true });
    await remote.encodeChat('m', messages, { addGenerationPrompt: true });
    assert.equal(remote.stats().breaker, 'open');
    now = 2500;
    const hits = engine.hits;
    await remote.encodeChat('m', messages, { addGenerationPrompt: true });
    assert.equal(engine.hits, hits + 3);
    s = remote.stats();
    assert.deepEqual([s.breaker, s.breakerOpened], ['open', 3]);
  } finally {
    await engine.close();
  }
});

test('a slow engine times out per attempt; a 4xx is not retried and leaves the breaker closed', async () => {
  const engine = await fakeEngine();
  try {
    // 250 ms, not less: each attempt must reach the engine (counted in hits) before it times out, on a loaded machine too.
    const remote = new RemoteTokenizer(`remote:${engine.url}`, character, { timeoutMs: 250, retries: 1, breakerFailures: 1 });
    engine.mode = 'hang';
    const r = await remote.encodePrompt('m', 'hello');
    assert.deepEqual([r.fallback, r.ids], [true, character.encode('hello')]);
    assert.equal(engine.hits, 2);
    assert.deepEqual([remote.stats().failedAttempts, remote.stats().breaker], [2, 'open']);

    const other = new RemoteTokenizer(`remote:${engine.url}`, character, { breakerFailures: 1 });
    engine.mode = '400';
    const before = engine.hits;
    const x = await other.encodePrompt('m', 'hello');
    assert.equal(x.fallback, true);
    assert.equal(engine.hits, before + 1);
    assert.deepEqual([other.stats().fallbacksRejected, other.stats().breaker], [1, 'closed']);
  } finally {
    await engine.close();
  }
});

test('a refused connection falls back; names are checked', async () => {
  const engine = await fakeEngine();
  const url = engine.url;
  await engine.close();
  const remote = new RemoteTokenizer(`remote:${url}`, character, { retries: 0 });
  const r = await remote.encodePrompt('m', 'hi');
  assert.deepEqual([r.fallback, remote.stats().fallbacksFailed], [true, 1]);
  assert.equal(remoteTokenizerUrl('character'), null);
  assert.equal(remoteTokenizerUrl('remote:http://h:8000/'), 'http://h:8000');
  assert.throws(() => remoteTokenizerUrl('remote:h:8000'), /http or https/);
  assert.throws(() => remoteTokenizerUrl('remote:nonsense'), /not a URL/);
  assert.throws(() => createTokenizerSync('remote:http://h:1'), /RemoteTokenizer/);
});

test('the breaker lets one probe at a time through in half-open', () => {
  let now = 0;
  const b = new CircuitBreaker(1, 10, () => now);
  assert.equal(b.allow(), true);
  b.failure();
  assert.equal(b.allow(), false);
  now = 10;
  assert.equal(b.allow(), true);
  assert.equal(b.allow(), false);
  b.success();
  assert.deepEqual([b.state, b.allow()], ['closed', true]);
});
