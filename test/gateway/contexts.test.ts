// Explicit contexts end to end: `ear sim` engines publishing KV events, a gateway following them (precise
// mode) and one that does not (approximate mode, with client API keys and a small context bound).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { getGlobalDispatcher, request } from 'undici';
import pino from 'pino';
import { buildConfig } from '../../src/config/index.js';
import { withTestThreads } from '../fixtures/http-threads-env.js';
import { startEar, type Ear } from '../../src/gateway/ear.js';
import { parseKvEventsConfig } from '../../src/sim/kv-events-config.js';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { MAX_CONTEXT_TTL_SECONDS } from '../../src/store/session-store.js';
import { until } from '../fixtures/wait.js';

const silent = pino({ level: 'silent' });
let sims: SimServer[] = [];
/** Precise mode (follows the engines' KV events), sticky. */
let precise: Ear;
let pbase: string;
/** Approximate mode, API key `k`, at most 2 contexts, 4 KiB bodies. */
let approx: Ear;
let abase: string;
const KEY = { authorization: 'Bearer k' };

before(async () => {
  sims = await Promise.all([0, 1].map((i) => startSim({
    host: '127.0.0.1', port: 0, profile: 'h100-llama-3.1-8b', timeScale: 0.02, tokenizer: 'hf:qwen3', servedModelName: ['m'],
    enablePromptTokensDetails: true, seed: i, logger: silent, maxModelLen: 2048,
    kvEventsConfig: parseKvEventsConfig({ enable_kv_cache_events: true, endpoint: 'tcp://127.0.0.1:*', replay_endpoint: 'tcp://127.0.0.1:*' })
  })));
  precise = await startEar(buildConfig(
    withTestThreads({ host: '127.0.0.1', port: 0, policy: 'sticky', tokenizer: 'hf:qwen3', routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 0, adminToken: 't' }),
    { backend: sims.map((s, i) => `${s.url},id=sim-${i},kv-events=${s.kvEventsEndpoint},replay=${s.kvReplayEndpoint}`) }
  ));
  await precise.kvSynced();
  pbase = `http://127.0.0.1:${precise.gateway.port}`;
  approx = await startEar(buildConfig(
    withTestThreads({ host: '127.0.0.1', port: 0, policy: 'sticky', tokenizer: 'hf:qwen3', routeThreads: 1, healthIntervalMs: 60_000, metricsIntervalMs: 0, apiKeys: ['k'], maxContexts: 2, maxBodyBytes: 4096 }),
    { backend: sims.map((s, i) => `${s.url},id=sim-${i}`) }
  ));
  abase = `http://127.0.0.1:${approx.gateway.port}`;
});
after(async () => {
  await precise.close();
  await approx.close();
  await Promise.all(sims.map((s) => s.close()));
  await getGlobalDispatcher().close();
});

const system = 'You are a careful coding agent working in a large repository. Read before you write. '.repeat(12);
const messages = [{ role: 'system', content: system }, { role: 'user', content: 'list the files under src/ and explain the layout' }];

interface Created { id: string; object: string; model: string; backend: string; prompt_tokens: number; cached_tokens: number; created_at: number; expires_at: number }
interface Shown extends Created { ttl_seconds_remaining: number; kv: { tier: string; blocks_gpu: number; blocks_offloaded: number; blocks_total: number } }

async function call (method: 'GET' | 'POST' | 'DELETE' | 'PUT', url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; doc: any }> {
  const r = await request(url, {
    method, headers: { 'content-type': 'application/json', ...headers },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body)
  });
  const text = await r.body.text();
  let doc: unknown = text;
  try { doc = JSON.parse(text); } catch {}
  return { status: r.statusCode, headers: r.headers, doc };
}

test('a context is prefilled on one engine; a request carrying its id lands there and is served from its cache; GET shows it on the GPU; DELETE ends it', async () => {
  const c = await call('POST', `${pbase}/v1/context`, { model: 'm', messages, ttl_seconds: 600 });
  assert.equal(c.status, 200, JSON.stringify(c.doc));
  const ctx = c.doc as Created;
  assert.match(ctx.id, /^ctx-[0-9a-f]{24}$/);
  assert.equal(c.headers['x-session-id'], ctx.id);
  assert.equal(c.headers['x-ear-backend'], ctx.backend);
  assert.equal(ctx.object, 'context');
  assert.equal(ctx.model, 'm');
  assert.ok(ctx.prompt_tokens > 200, `prompt tokens ${ctx.prompt_tokens}`);
  assert.equal(ctx.cached_tokens, 0, 'nothing of it was cached before');
  assert.ok(ctx.expires_at - ctx.created_at >= 599 && ctx.expires_at - ctx.created_at <= 601);

  // The session is bound to the context's engine.
  const s = await call('GET', `${pbase}/admin/sessions/${ctx.id}`, undefined, { authorization: 'Bearer t' });
  assert.equal(s.doc.host, ctx.backend);

  // A turn that extends the context's messages, with its id as the session: same engine, prefix from cache.
  const turn = { model: 'm', max_tokens: 4, messages: [...messages, { role: 'assistant', content: 'src/ holds the gateway.' }, { role: 'user', content: 'now open server.ts' }] };
  const r = await call('POST', `${pbase}/v1/chat/completions`, turn, { 'x-session-id': ctx.id });
  assert.equal(r.status, 200, JSON.stringify(r.doc));
  assert.equal(r.headers['x-ear-backend'], ctx.backend);
  const blocks = Math.floor(ctx.prompt_tokens / 16);
  assert.ok(r.doc.usage.prompt_tokens_details.cached_tokens >= blocks * 16, `cached ${r.doc.usage.prompt_tokens_details.cached_tokens}, context blocks ${blocks}`);

  // Precise mode: once the engine's events arrive, the index has the context's blocks in GPU memory.
  const shown = await until(async () => {
    const g = await call('GET', `${pbase}/v1/context/${ctx.id}`);
    assert.equal(g.status, 200, JSON.stringify(g.doc));
    return (g.doc as Shown).kv.tier === 'gpu' ? g.doc as Shown : null;
  }, 'tier gpu');
  assert.equal(shown.id, ctx.id);
  assert.equal(shown.backend, ctx.backend);
  assert.equal(shown.prompt_tokens, ctx.prompt_tokens);
  assert.ok(shown.ttl_seconds_remaining > 590 && shown.ttl_seconds_remaining <= 600);
  assert.ok(shown.kv.blocks_total >= blocks - 1 && shown.kv.blocks_total <= blocks, JSON.stringify(shown.kv));
  assert.equal(shown.kv.blocks_gpu, shown.kv.blocks_total);
  assert.equal(shown.kv.blocks_offloaded, 0);

  const d = await call('DELETE', `${pbase}/v1/context/${ctx.id}`);
  assert.equal(d.status, 200);
  assert.deepEqual(d.doc, { id: ctx.id, object: 'context.deleted', deleted: true });
  const gone = await call('GET', `${pbase}/v1/context/${ctx.id}`);
  assert.equal(gone.status, 404);
  assert.equal(gone.doc.error.code, 'EAR_ERR_CONTEXT_NOT_FOUND');
  assert.equal(gone.doc.error.type, 'not_found_error');
  assert.equal((await call('DELETE', `${pbase}/v1/context/${ctx.id}`)).status, 404);
  const metrics = await (await request(`${pbase}/metrics`)).body.text();
  assert.match(metrics, /ear_contexts_created_total [1-9]/);
  assert.match(metrics, /ear_contexts_deleted_total [1-9]/);
  // A prefill goes through the request pipeline: counted once, with the engine that prefilled it.
  assert.match(metrics, new RegExp(`ear_requests_total\\{route="/v1/context",status="200",backend="${ctx.backend}"\\} [1-9]`));
});

test('the context session outlives the idle TTL: its session table TTL is the context\'s', async () => {
  const c = await call('POST', `${pbase}/v1/context`, { model: 'm', messages: [{ role: 'user', content: 'keep me ' + 'warm '.repeat(40) }], ttl_seconds: 7200 });
  assert.equal(c.status, 200, JSON.stringify(c.doc));
  const host = precise.routing.host;
  const rec = host.sessions.get(host.sessionKey(c.doc.id))!;
  assert.ok(rec.ttl > 7_000_000, `session ttl ${rec.ttl}`);
  // A routed request resets it to the idle TTL in the Router; the context puts it back.
  const r = await call('POST', `${pbase}/v1/chat/completions`, { model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'keep me ' + 'warm '.repeat(40) }] }, { 'x-session-id': c.doc.id });
  assert.equal(r.headers['x-ear-backend'], c.doc.backend);
  assert.ok(host.sessions.get(host.sessionKey(c.doc.id))!.ttl > 7_000_000);
  // A session the table lost (evicted at its bound, or unbound when its engine's row was released) is bound to
  // the context's engine again before its next request is routed.
  for (let i = 0; i < 3; i++) {
    if (i % 2 === 0) host.sessions.remove(host.sessionKey(c.doc.id));
    else host.sessions.setCount(host.sessionKey(c.doc.id), 'host', -1);
    const again = await call('POST', `${pbase}/v1/chat/completions`, { model: 'm', max_tokens: 2, messages: [{ role: 'user', content: `turn ${i}` }] }, { 'x-session-id': c.doc.id });
    assert.equal(again.headers['x-ear-backend'], c.doc.backend, `after losing the session (${i})`);
  }
  // Deleted: back to the gateway's idle TTL, and it ends as idle sessions do.
  assert.equal((await call('DELETE', `${pbase}/v1/context/${c.doc.id}`)).status, 200);
  assert.equal(host.sessions.get(host.sessionKey(c.doc.id))!.ttl, 1_800_000);
});

test('a completions prompt makes a context too; a longer prompt with its id goes to the same engine', async () => {
  const prompt = 'Summarise the following design notes. '.repeat(30);
  const c = await call('POST', `${pbase}/v1/context`, { model: 'm', prompt });
  assert.equal(c.status, 200, JSON.stringify(c.doc));
  assert.ok(c.doc.expires_at - c.doc.created_at >= 3599, 'default TTL 3600 s');
  const r = await call('POST', `${pbase}/v1/completions`, { model: 'm', prompt: prompt + ' And list open questions.', max_tokens: 2 }, { 'x-session-id': c.doc.id });
  assert.equal(r.status, 200);
  assert.equal(r.headers['x-ear-backend'], c.doc.backend);
  assert.ok(r.doc.usage.prompt_tokens_details.cached_tokens >= (Math.floor(c.doc.prompt_tokens / 16) - 1) * 16);
  await call('DELETE', `${pbase}/v1/context/${c.doc.id}`);
});

test('a context ends at its TTL: swept by the timer, counted, then 404', async () => {
  const c = await call('POST', `${pbase}/v1/context`, { model: 'm', messages: [{ role: 'user', content: 'short lived' }], ttl_seconds: 1 });
  assert.equal(c.status, 200, JSON.stringify(c.doc));
  assert.equal((await call('GET', `${pbase}/v1/context/${c.doc.id}`)).status, 200);
  // No read in between: the sweep (every second) ends it and counts it.
  await until(async () => {
    const m = await (await request(`${pbase}/metrics`)).body.text();
    return /ear_contexts_expired_total [1-9]/.test(m) ? true : null;
  }, { what: 'the sweep to expire it', timeoutMs: 5000 });
  assert.equal(precise.gateway.contexts.local(c.doc.id), undefined);
  const g = await call('GET', `${pbase}/v1/context/${c.doc.id}`);
  assert.equal(g.status, 404);
  assert.equal(g.doc.error.code, 'EAR_ERR_CONTEXT_NOT_FOUND');
});

test('approximate mode: the KV location is what routing assumed; at maxContexts a new context is refused with 429', async () => {
  const body = (n: number) => ({ model: 'm', messages: [{ role: 'user', content: `context ${n}: ` + 'lorem ipsum '.repeat(30) }] });
  const a = await call('POST', `${abase}/v1/context`, body(1), KEY);
  assert.equal(a.status, 200, JSON.stringify(a.doc));
  // The routing decision reaches the index through the kv-events thread's ring: a moment later.
  const g = await until(async () => {
    const x = await call('GET', `${abase}/v1/context/${a.doc.id}`, undefined, KEY);
    assert.equal(x.status, 200);
    assert.ok(['assumed', 'unknown'].includes(x.doc.kv.tier), x.doc.kv.tier);
    return x.doc.kv.tier === 'assumed' ? x : null;
  }, 'tier assumed');
  assert.equal(g.doc.kv.blocks_gpu, 0);
  assert.ok(g.doc.kv.blocks_total > 0);
  const b = await call('POST', `${abase}/v1/context`, body(2), KEY);
  assert.equal(b.status, 200);
  const full = await call('POST', `${abase}/v1/context`, body(3), KEY);
  assert.equal(full.status, 429);
  assert.equal(full.doc.error.code, 'EAR_ERR_CONTEXTS_FULL');
  assert.equal(full.doc.error.type, 'rate_limit_error');
  assert.equal((await call('DELETE', `${abase}/v1/context/${a.doc.id}`, undefined, KEY)).status, 200);
  const c = await call('POST', `${abase}/v1/context`, body(3), KEY);
  assert.equal(c.status, 200);
  const m = await (await request(`${abase}/metrics`)).body.text();
  assert.match(m, /ear_contexts_rejected_total\{reason="full"\} 1/);
  assert.match(m, /ear_contexts 2/);
  await call('DELETE', `${abase}/v1/context/${b.doc.id}`, undefined, KEY);
  await call('DELETE', `${abase}/v1/context/${c.doc.id}`, undefined, KEY);
});

test('bad input gets OpenAI-style errors', async () => {
  const msgs = [{ role: 'user', content: 'hi' }];
  const cases: Array<[string, unknown, number, string]> = [
    ['no model', { messages: msgs }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['model not a string', { model: 5, messages: msgs }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['neither messages nor prompt', { model: 'm' }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['both messages and prompt', { model: 'm', messages: msgs, prompt: 'x' }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['messages not an array', { model: 'm', messages: 'hi' }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['messages empty', { model: 'm', messages: [] }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['a message without a role', { model: 'm', messages: [{ content: 'x' }] }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['prompt a number', { model: 'm', prompt: 5 }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['prompt a batch', { model: 'm', prompt: ['a', 'b'] }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['ttl a string', { model: 'm', messages: msgs, ttl_seconds: '10' }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['ttl fractional', { model: 'm', messages: msgs, ttl_seconds: 1.5 }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['ttl 0', { model: 'm', messages: msgs, ttl_seconds: 0 }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['ttl over 30 days', { model: 'm', messages: msgs, ttl_seconds: MAX_CONTEXT_TTL_SECONDS + 1 }, 400, 'EAR_ERR_BAD_REQUEST'],
    ['body an array', [1], 400, 'EAR_ERR_BAD_REQUEST'],
    ['body not JSON', '{"model":', 400, 'EAR_ERR_BAD_JSON'],
    ['unknown model', { model: 'nope', messages: msgs }, 404, 'EAR_ERR_MODEL_NOT_FOUND'],
    ['body too large', { model: 'm', prompt: 'x'.repeat(5000) }, 413, 'EAR_ERR_BODY_TOO_LARGE']
  ];
  for (const [what, body, status, code] of cases) {
    const r = await call('POST', `${abase}/v1/context`, body, KEY);
    assert.equal(r.status, status, `${what}: ${JSON.stringify(r.doc)}`);
    assert.equal(r.doc.error.code, code, what);
    assert.equal(typeof r.doc.error.message, 'string');
    assert.equal(typeof r.doc.error.type, 'string');
  }
  // The largest TTL is accepted.
  const max = await call('POST', `${abase}/v1/context`, { model: 'm', messages: msgs, ttl_seconds: MAX_CONTEXT_TTL_SECONDS }, KEY);
  assert.equal(max.status, 200, JSON.stringify(max.doc));
  await call('DELETE', `${abase}/v1/context/${max.doc.id}`, undefined, KEY);
  // Client auth as completions.
  assert.equal((await call('POST', `${abase}/v1/context`, { model: 'm', messages: msgs })).status, 401);
  assert.equal((await call('GET', `${abase}/v1/context/ctx-0`)).status, 401);
  assert.equal((await call('DELETE', `${abase}/v1/context/ctx-0`, undefined, { authorization: 'Bearer wrong' })).status, 401);
  // Unknown ids.
  for (const id of ['ctx-000000000000000000000000', 'nope']) {
    const g = await call('GET', `${abase}/v1/context/${id}`, undefined, KEY);
    assert.equal(g.status, 404);
    assert.equal(g.doc.error.code, 'EAR_ERR_CONTEXT_NOT_FOUND');
    assert.equal((await call('DELETE', `${abase}/v1/context/${id}`, undefined, KEY)).status, 404);
  }
  assert.equal((await call('GET', `${abase}/v1/context`, undefined, KEY)).status, 405);
  assert.equal((await call('PUT', `${abase}/v1/context/ctx-0`, {}, KEY)).status, 405);
  // Nothing above made a context.
  assert.equal(approx.gateway.contexts.size, 0);
});

test('an engine that refuses the prompt (too long) answers the client with its own status and error', async () => {
  const before = precise.gateway.contexts.size;
  const r = await call('POST', `${pbase}/v1/context`, { model: 'm', prompt: 'word '.repeat(3000) });
  assert.equal(r.status, 400, JSON.stringify(r.doc));
  assert.match(r.doc.error.message, /maximum context length/);
  assert.ok(String(r.headers['x-ear-backend']).startsWith('sim-'));
  assert.equal(precise.gateway.contexts.size, before);
  assert.match(await (await request(`${pbase}/metrics`)).body.text(), /ear_contexts_rejected_total\{reason="engine"\} 1/);
});
