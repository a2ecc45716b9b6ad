import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { request, getGlobalDispatcher } from 'undici';
import { buildConfig } from '../../src/config/index.js';
import { startGateway } from '../../src/gateway/server.js';
import { fakeEngine, type FakeEngine } from '../fixtures/fake-engine.js';
import { FirstServingRouting } from '../fixtures/simple-routing.js';
import { bodyFeatures } from '../fixtures/body-features.js';

after(() => getGlobalDispatcher().close());

const features = bodyFeatures;
const chat = (stream = false) => JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream });

async function gw (engines: FakeEngine[], over: Record<string, unknown> = {}) {
  const g = await startGateway({
    config: buildConfig({ host: '127.0.0.1', port: 0, healthIntervalMs: 60_000, metricsIntervalMs: 0, unhealthyAfter: 2, ...over }, { backend: engines.map((e, i) => `${e.url},id=e${i}`) }),
    state: (bs) => new FirstServingRouting(bs),
    features
  });
  after(() => g.close());
  return { g, url: `http://127.0.0.1:${g.port}` };
}

test('client API keys: none, wrong and right', async () => {
  const e = await fakeEngine();
  after(() => e.close());
  const { url } = await gw([e], { apiKeys: ['k1', 'k2'] });
  for (const [auth, status] of [[undefined, 401], ['Bearer nope', 401], ['Bearer k2', 200]] as const) {
    const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat(), headers: auth ? { authorization: auth } : {} });
    assert.equal(r.statusCode, status, String(auth));
    await r.body.dump();
  }
});

test('the routing user: the body\'s OpenAI user, else a digest of the API key (never the key), else none', async () => {
  const e = await fakeEngine();
  after(() => e.close());
  const users: Array<string | null> = [];
  const start = async (over: Record<string, unknown>) => {
    const g = await startGateway({
      config: buildConfig({ host: '127.0.0.1', port: 0, healthIntervalMs: 60_000, metricsIntervalMs: 0, ...over }, { backend: [`${e.url},id=e0`] }),
      state: (bs) => new (class extends FirstServingRouting {
        override route (input: Parameters<FirstServingRouting['route']>[0], exclude: ReadonlySet<number>, now: number) {
          users.push(input.user);
          return super.route(input, exclude, now);
        }
      })(bs),
      features
    });
    after(() => g.close());
    return `http://127.0.0.1:${g.port}`;
  };
  const send = async (url: string, auth: string | null, user?: unknown) => {
    const body = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], ...(user === undefined ? {} : { user }) });
    const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body, headers: auth !== null ? { authorization: auth } : {} });
    await r.body.dump();
    return r.statusCode;
  };
  const keyed = await start({ apiKeys: ['k1', 'k2'] });
  assert.equal(await send(keyed, 'Bearer k1', 'alice'), 200);
  assert.equal(await send(keyed, 'Bearer k1'), 200);
  assert.equal(await send(keyed, 'Bearer k1'), 200);
  assert.equal(await send(keyed, 'Bearer k2'), 200);
  assert.equal(await send(keyed, 'Bearer k2', 7), 400);
  assert.equal(users[0], 'alice');
  assert.match(users[1]!, /^key:[A-Za-z0-9_-]{43}$/, 'an HMAC-SHA-256 of the key, base64url');
  assert.equal(users[1], users[2], 'one key, one user');
  assert.notEqual(users[1], users[3], 'two keys, two users');
  const open = await start({});
  assert.equal(await send(open, 'Bearer whatever'), 200);
  assert.equal(await send(open, null, 'carol'), 200);
  assert.deepEqual(users.slice(4), [null, 'carol']);
});

test('health checks eject a failing backend after unhealthyAfter failures and re-admit it on success', async () => {
  const a = await fakeEngine();
  const b = await fakeEngine();
  after(() => Promise.all([a.close(), b.close()]));
  const { g, url } = await gw([a, b]);
  const served = async () => {
    const r = await request(`${url}/v1/chat/completions`, { method: 'POST', body: chat() });
    await r.body.dump();
    return r.headers['x-ear-backend'];
  };
  assert.equal(await served(), 'e0');
  const port = Number(new URL(a.url).port);
  await a.close();
  await g.checkHealth();
  assert.equal(g.backends[0].health, 'healthy', 'one failure is not enough');
  await g.checkHealth();
  assert.equal(g.backends[0].health, 'unhealthy');
  assert.equal(await served(), 'e1');
  a.server.listen(port, '127.0.0.1');
  await once(a.server, 'listening');
  await g.checkHealth();
  assert.equal(g.backends[0].health, 'healthy');
  assert.equal(await served(), 'e0');
});
