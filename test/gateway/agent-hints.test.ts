// Agents' hints through `ear serve` (issue 31 part 2): Anthropic cache_control marks sent by the Anthropic SDK and
// raw bodies with vllm_xargs.agentic_context, in front of `ear sim` engines; what EAR took of them is read off
// each request's `done` message (the routing core's input for retention), logged by whichever of the process's
// threads served it (fixtures/done-log.ts: the gateway runs as its own process, with data-plane threads when
// EAR_TEST_HTTP_THREADS says). A capturing engine shows the field never reaches an engine unless its backend
// forwards it; a tool-calling engine (the simulator has no tool parser) shows a turn that ended in a tool call
// marked as such, in each API, streamed and not.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request, getGlobalDispatcher } from 'undici';
import { fleet, type Fleet } from '../fixtures/fleet.js';
import { fakeEngine } from '../fixtures/fake-engine.js';
import { earInFront } from '../fixtures/ear-in-front.js';
import { toolCallEngine } from '../fixtures/tool-call-engine.js';
import { metric, SERVE_LISTENING, start, stop } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';
import type { DoneRecord } from '../fixtures/done-log.js';
import { startSim } from '../../src/sim/server.js';

after(() => getGlobalDispatcher().close());

/** The done messages of a gateway's requests, in the order they were logged. */
interface Dones { file: string }

function read (dones: Dones): DoneRecord[] {
  let text = '';
  try {
    text = readFileSync(dones.file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  return text.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as DoneRecord);
}

async function nth (dones: Dones, n: number): Promise<DoneRecord> {
  const seen = await until(() => { const d = read(dones); return d.length >= n && d; }, { what: `request ${n} done` });
  return seen[n - 1];
}

/**
 * `ear serve` (its own process, `config` YAML lines) in front of one engine at `engineUrl`, named e0, every done
 * message of its requests logged; ready when returned, stopped after the file.
 */
async function loggedGateway (engineUrl: string, config: string[]): Promise<{ url: string; dones: Dones }> {
  const dir = mkdtempSync(join(tmpdir(), 'ear-agent-hints-'));
  const cfg = join(dir, 'ear.yaml');
  writeFileSync(cfg, ['routeThreads: 1', 'healthIntervalMs: 60000', 'metricsIntervalMs: 0', ...config, ''].join('\n'));
  const plant = new URL('../fixtures/done-log.js', import.meta.url).href;
  const dones = { file: join(dir, 'dones.jsonl') };
  const gw = await start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--backend', `${engineUrl},id=e0`], SERVE_LISTENING, [],
    { NODE_OPTIONS: `--import ${plant}`, EAR_TEST_DONE_LOG: dones.file });
  after(async () => {
    await stop(gw);
    rmSync(dir, { recursive: true, force: true });
  });
  await until(async () => (await request(`${gw.url}/ready`)).statusCode === 200, { what: 'the gateway ready' });
  return { url: gw.url, dones };
}

/** A simulated engine (this process) behind a logged `ear serve` with the sticky policy. */
async function simGateway (config: string[] = []): Promise<{ base: string; dones: Dones }> {
  const sim = await startSim({ host: '127.0.0.1', port: 0, profile: 'h100-llama-3.1-8b', servedModelName: ['m'], seed: 0, logger: pino({ level: 'silent' }), timeScale: 0.02 });
  after(() => sim.close());
  const { url, dones } = await loggedGateway(sim.url, ['policy: sticky', ...config]);
  return { base: url, dones };
}

async function simFleet (over: Record<string, unknown> = {}): Promise<Fleet> {
  const f = await fleet(1, { timeScale: 0.02 }, { policy: 'sticky', ...over });
  after(() => f.close());
  return f;
}

async function post (url: string, path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await request(`${url}${path}`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } });
  const text = await r.body.text();
  return { status: r.statusCode, json: text === '' ? {} : JSON.parse(text) as Record<string, unknown> };
}

const system = 'You are a careful coding agent. '.repeat(20);

test('Anthropic SDK cache_control: the longest TTL marked (system, messages, tools) is the turn\'s retention, clamped to maxRetentionTtlMs', async () => {
  const f = await simGateway(['maxRetentionTtlMs: 600000']);
  const seen = f.dones;
  const client = new Anthropic({ baseURL: f.base, apiKey: 'x', maxRetries: 0, defaultHeaders: { 'x-claude-code-session-id': 'cc-1' } });

  // 1h on the system prompt: past the gateway's 10 min, clamped.
  const a = await client.messages.create({
    model: 'm', max_tokens: 8,
    system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral', ttl: '1h' } }],
    messages: [{ role: 'user', content: 'list the files' }]
  });
  assert.equal(a.type, 'message');
  const d1 = await nth(seen, 1);
  assert.equal(d1.ctx.outcome.status, 200);
  assert.deepEqual(d1.retention, { ttlMs: 600_000, source: 'cache_control' });
  assert.equal(d1.ctx.sessionId, 'cc-1');

  // No ttl on a message block: Anthropic's default, 5 minutes; streamed.
  const stream = client.messages.stream({
    model: 'm', max_tokens: 8, system,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'list the files', cache_control: { type: 'ephemeral' } }] }]
  });
  const m = await stream.finalMessage();
  assert.ok(m.usage.output_tokens > 0);
  assert.deepEqual((await nth(seen, 2)).retention, { ttlMs: 300_000, source: 'cache_control' });

  // On a tool, "5m" said outright.
  await client.messages.create({
    model: 'm', max_tokens: 8, system,
    tools: [{ name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } }, cache_control: { type: 'ephemeral', ttl: '5m' } }],
    messages: [{ role: 'user', content: 'read README.md' }]
  });
  assert.deepEqual((await nth(seen, 3)).retention, { ttlMs: 300_000, source: 'cache_control' });

  // No mark: nothing retained (the simulated model never ends in a tool call).
  await client.messages.create({ model: 'm', max_tokens: 8, system, messages: [{ role: 'user', content: 'hi' }] });
  const d4 = await nth(seen, 4);
  assert.equal(d4.retention, null);
  assert.equal(d4.toolCall, false);
  assert.equal(d4.ctx.hints, null);

  // count_tokens leaves no KV: its marks are checked, nothing is retained.
  const counted = await client.messages.countTokens({ model: 'm', system: [{ type: 'text', text: system, cache_control: { type: 'ephemeral', ttl: '1h' } }], messages: [{ role: 'user', content: 'hi' }] });
  assert.ok(counted.input_tokens > 0);
  assert.equal((await nth(seen, 5)).retention, null);
});

test('a bad cache_control is a 400 in Anthropic\'s shape, through the SDK', async () => {
  const f = await simFleet();
  const client = new Anthropic({ baseURL: f.base, apiKey: 'x', maxRetries: 0 });
  for (const cc of [{ type: 'ephemeral', ttl: '2h' }, { type: 'persistent' }, 'ephemeral']) {
    await assert.rejects(client.messages.create({
      model: 'm', max_tokens: 8,
      system: [{ type: 'text', text: system, cache_control: cc as unknown as Anthropic.CacheControlEphemeral }],
      messages: [{ role: 'user', content: 'hi' }]
    }), (err: unknown) => {
      assert.ok(err instanceof Anthropic.BadRequestError, String(err));
      const body = err.error as { type: string; error: { type: string; message: string } };
      assert.equal(body.type, 'error');
      assert.equal(body.error.type, 'invalid_request_error');
      assert.match(body.error.message, /system\[0\]\.cache_control/);
      return true;
    });
  }
});

const CONTEXT = {
  program_id: 'task-7:researcher', task_id: 'task-7', parent_program_id: 'task-7:lead', root_program_id: 'task-7:lead', blocks_parent: true,
  priority: 5, deadline_seconds: 30, expected_output_length: 200, kv_retention_ttl_seconds: 7200
};

const BODIES: Record<string, { path: string; body: (ctx: unknown) => Record<string, unknown> }> = {
  chat: { path: '/v1/chat/completions', body: (c) => ({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], vllm_xargs: { agentic_context: c } }) },
  messages: { path: '/v1/messages', body: (c) => ({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'hi' }], vllm_xargs: { agentic_context: c } }) },
  responses: { path: '/v1/responses', body: (c) => ({ model: 'm', max_output_tokens: 4, input: 'hi', vllm_xargs: { agentic_context: c } }) },
  completions: { path: '/v1/completions', body: (c) => ({ model: 'm', max_tokens: 4, prompt: 'hi', vllm_xargs: { agentic_context: c } }) }
};

test('agentic_context in raw bodies maps onto session, parent, class, expected output, deadline and retention (each API)', async () => {
  const f = await simGateway(['maxRetentionTtlMs: 600000']);
  const seen = f.dones;
  let n = 0;
  for (const [api, { path, body }] of Object.entries(BODIES)) {
    const r = await post(f.base, path, body(CONTEXT));
    assert.equal(r.status, 200, `${api}: ${JSON.stringify(r.json)}`);
    const d = await nth(seen, ++n);
    const ctx = d.ctx;
    assert.equal(ctx.sessionId, 'task-7:researcher', api);
    assert.equal(ctx.parentSessionId, 'task-7:lead', api);
    assert.equal(ctx.priorityClass, 0, `${api}: priority 5 is the high class`);
    assert.equal(ctx.input?.expectedOutputTokens, 200, api);
    assert.equal(ctx.hints?.deadlineAt, ctx.startedAt + 30_000, api);
    assert.equal(ctx.hints?.rootProgramId, 'task-7:lead', api);
    assert.equal(ctx.hints?.blocksParent, true, api);
    assert.deepEqual(d.retention, { ttlMs: 600_000, source: 'agentic_context' }, `${api}: 2 h clamped to the gateway's 10 min`);
  }
  // A header's session wins; the context as a JSON string; task + agent name the program; a negative priority is low.
  const r = await post(f.base, '/v1/chat/completions', BODIES.chat.body(JSON.stringify({ task_id: 't9', agent_id: 'w2', priority: -1, kv_retention_ttl_seconds: 1.5 })));
  assert.equal(r.status, 200, JSON.stringify(r.json));
  const d = await nth(seen, ++n);
  assert.equal(d.ctx.sessionId, 't9:w2');
  assert.equal(d.ctx.priorityClass, 2);
  assert.deepEqual(d.retention, { ttlMs: 1500, source: 'agentic_context' });
  assert.equal((await post(f.base, '/v1/chat/completions', BODIES.chat.body(CONTEXT), { 'x-session-id': 'mine', 'x-ear-priority': 'low' })).status, 200);
  const h = await nth(seen, ++n);
  assert.equal(h.ctx.sessionId, 'mine');
  assert.equal(h.ctx.priorityClass, 2, 'x-ear-priority stays');
  // An agentic_context retention wins over a cache_control mark.
  const both = { ...BODIES.messages.body({ program_id: 'p', kv_retention_ttl_seconds: 10 }), system: [{ type: 'text', text: 's', cache_control: { type: 'ephemeral', ttl: '1h' } }] };
  assert.equal((await post(f.base, '/v1/messages', both)).status, 200);
  assert.deepEqual((await nth(seen, ++n)).retention, { ttlMs: 10_000, source: 'agentic_context' });
});

const BAD: Array<[unknown, RegExp]> = [
  [{ program_id: 'p', priority: 1.5 }, /priority" must be an integer/],
  [{ program_id: 'p', priority: 2 ** 40 }, /priority" must be an integer in/],
  [{ program_id: 'p', deadline_seconds: -1 }, /deadline_seconds" must be a number in \[0, 86400\]/],
  [{ program_id: 'p', deadline_seconds: 1e9 }, /deadline_seconds/],
  [{ program_id: 'p', expected_output_length: 'many' }, /expected_output_length/],
  [{ program_id: 'p', expected_output_length: 2 ** 31 }, /expected_output_length/],
  [{ program_id: 'p', kv_retention_ttl_seconds: 86_401 }, /kv_retention_ttl_seconds/],
  [{ program_id: 'p', kv_retention_ttl_seconds: 'forever' }, /kv_retention_ttl_seconds/],
  [{ program_id: '' }, /program_id" must not be empty/],
  [{ program_id: 'x'.repeat(300) }, /at most 256 bytes/],
  [{ program_id: ['p'] }, /program_id" must be a string or an integer id/],
  [{ program_id: 'p', blocks_parent: true }, /requires parent_program_id/],
  [{ program_id: 'p', parent_program_id: 'p' }, /must differ/],
  [{ program_id: 'p', blocks_parent: 'yes', parent_program_id: 'q' }, /blocks_parent" must be a boolean/],
  ['{not json', /must hold a JSON object/],
  [[1, 2], /agentic_context" must be an object/]
];

test('bad agentic_context values are a 400 in each API\'s shape, and nothing reaches the engine', async () => {
  const f = await simGateway();
  const seen = f.dones;
  let n = 0;
  for (const [api, { path, body }] of Object.entries(BODIES)) {
    for (const [c, message] of BAD) {
      const r = await post(f.base, path, body(c));
      assert.equal(r.status, 400, `${api} ${JSON.stringify(c)}`);
      if (api === 'messages') {
        assert.equal(r.json.type, 'error');
        const e = r.json.error as { type: string; message: string };
        assert.equal(e.type, 'invalid_request_error');
        assert.match(e.message, message, `${api} ${JSON.stringify(c)}`);
      } else {
        const e = r.json.error as { type: string; message: string; code: string };
        assert.equal(e.type, 'invalid_request_error');
        assert.equal(e.code, 'EAR_ERR_BAD_REQUEST');
        assert.match(e.message, message, `${api} ${JSON.stringify(c)}`);
      }
      const d = await nth(seen, ++n);
      assert.equal(d.ctx.outcome.backend, '', 'no engine answered it');
    }
  }
  // vllm_xargs itself must be an object.
  const r = await post(f.base, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }], vllm_xargs: 'x' });
  assert.equal(r.status, 400);
});

test('agentic_context is stripped before an engine (vllm_xargs kept otherwise), and forwarded to a backend that asks for it', async () => {
  const e = await fakeEngine('m');
  after(() => e.close());
  const strip = await earInFront(e.url, '');
  const body = { model: 'm', messages: [{ role: 'user', content: 'hi' }], vllm_xargs: { agentic_context: { program_id: 'p1', priority: 1 }, my_plugin: 3 } };
  assert.equal((await post(strip.url, '/v1/chat/completions', body)).status, 200);
  assert.deepEqual(e.received[0].vllm_xargs, { my_plugin: 3 });
  assert.equal((await post(strip.url, '/v1/chat/completions', { ...body, vllm_xargs: { agentic_context: '{"program_id":"p1"}' } })).status, 200);
  assert.equal('vllm_xargs' in e.received[1], false, 'an emptied vllm_xargs goes too');
  assert.ok(!e.raw[1].includes('agentic_context'));
  // Without any hint, the client's bytes go as they are.
  const plain = '{"model":"m", "messages":[{"role":"user","content":"hi"}], "vllm_xargs": {"my_plugin": 3}}';
  const r = await request(`${strip.url}/v1/chat/completions`, { method: 'POST', body: plain, headers: { 'content-type': 'application/json' } });
  await r.body.dump();
  assert.ok(e.raw[2].equals(Buffer.from(plain)));

  const router = await earInFront(e.url, ',agentic-context=forward');
  assert.equal((await post(router.url, '/v1/chat/completions', body)).status, 200);
  assert.deepEqual(e.received[3].vllm_xargs, body.vllm_xargs);
  assert.equal((await post(router.url, '/v1/chat/completions', { ...body, vllm_xargs: { agentic_context: '{"program_id":"p1"}' } })).status, 200);
  assert.deepEqual(e.received[4].vllm_xargs, { agentic_context: '{"program_id":"p1"}' }, 'as the client sent it');
});

test('a turn that ended in a tool call is marked, in each API, streamed and not; the session\'s prefix is kept for its tool gap', async () => {
  const e = await toolCallEngine('m');
  after(() => e.close());
  const { url, dones: seen } = await loggedGateway(e.url, []);
  let n = 0;
  const check = async (what: string, toolCall: boolean): Promise<void> => {
    const d = await nth(seen, ++n);
    assert.equal(d.ctx.outcome.status, 200, what);
    assert.equal(d.toolCall, toolCall, what);
    assert.equal(d.ctx.outcome.toolCall, toolCall, what);
    assert.deepEqual(d.retention, toolCall ? { ttlMs: null, source: 'tool-gap' } : null, what);
  };
  const tools = [{ type: 'function' as const, function: { name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }];
  const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'x', maxRetries: 0, defaultHeaders: { 'x-session-id': 'agent-1' } });
  const anthropic = new Anthropic({ baseURL: url, apiKey: 'x', maxRetries: 0, defaultHeaders: { 'x-session-id': 'agent-1' } });
  const atools: Anthropic.Tool[] = [{ name: 'read_file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } }];

  for (const toolCall of [true, false]) {
    e.toolCall = toolCall;
    const c = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'read it' }], tools });
    assert.equal(c.choices[0].finish_reason, toolCall ? 'tool_calls' : 'stop');
    await check('chat', toolCall);
    const s = await openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'read it' }], tools, stream: true });
    const reasons: unknown[] = [];
    for await (const chunk of s) for (const ch of chunk.choices) if (ch.finish_reason !== null) reasons.push(ch.finish_reason);
    assert.deepEqual(reasons, [toolCall ? 'tool_calls' : 'stop']);
    await check('chat stream', toolCall);

    const m = await anthropic.messages.create({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'read it' }], tools: atools });
    assert.equal(m.stop_reason, toolCall ? 'tool_use' : 'end_turn');
    await check('messages', toolCall);
    const ms = await anthropic.messages.stream({ model: 'm', max_tokens: 16, messages: [{ role: 'user', content: 'read it' }], tools: atools }).finalMessage();
    assert.equal(ms.stop_reason, toolCall ? 'tool_use' : 'end_turn');
    await check('messages stream', toolCall);

    const rt = [{ type: 'function' as const, name: 'read_file', parameters: { type: 'object', properties: { path: { type: 'string' } } }, strict: false }];
    const resp = await openai.responses.create({ model: 'm', input: 'read it', tools: rt });
    assert.equal(resp.output[0].type, toolCall ? 'function_call' : 'message');
    await check('responses', toolCall);
    const rs = await openai.responses.create({ model: 'm', input: 'read it', tools: rt, stream: true });
    const types: string[] = [];
    for await (const ev of rs) types.push(ev.type);
    assert.equal(types.at(-1), 'response.completed');
    await check('responses stream', toolCall);
  }
  // A hint's own TTL stands when the turn ends in a tool call too.
  e.toolCall = true;
  await anthropic.messages.create({
    model: 'm', max_tokens: 16, tools: atools,
    messages: [{ role: 'user', content: [{ type: 'text', text: 'read it', cache_control: { type: 'ephemeral', ttl: '1h' } }] }]
  });
  const d = await nth(seen, ++n);
  assert.equal(d.toolCall, true);
  assert.deepEqual(d.retention, { ttlMs: 3_600_000, source: 'cache_control' });
  // The routing host took it: the session's prefix is retained on its engine (and each earlier tool-call turn's was,
  // until the session's next turn ended it).
  const kept = {
    live: await metric(url, 'ear_retained_prefixes', ''), liveBlocks: await metric(url, 'ear_retained_prefix_blocks', ''),
    retained: await metric(url, 'ear_retained_prefixes_total', ''), resumed: await metric(url, 'ear_retained_prefixes_ended_total', '{reason="resumed"}')
  };
  assert.equal(kept.live, 1, JSON.stringify(kept));
  assert.ok(kept.liveBlocks > 0 && kept.retained >= 7 && kept.resumed >= 6, JSON.stringify(kept));
  // Without a session there is nothing to keep.
  await post(url, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'read it' }] });
  const s = await nth(seen, ++n);
  assert.equal(s.toolCall, true);
  assert.equal(s.retention, null);
});
