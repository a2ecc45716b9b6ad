// The agents' own APIs through `ear serve` in front of real `ear sim` engines, driven by the clients agents use:
// @anthropic-ai/sdk (Claude Code's API: /v1/messages, count_tokens) and openai's responses (Codex's /v1/responses).
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { request, getGlobalDispatcher } from 'undici';
import { fleet, type Fleet } from '../fixtures/fleet.js';
import { buildConfig } from '../../src/config/index.js';

let f: Fleet;
let base: string;

before(async () => {
  // round-robin spreads sessionless requests: a previous_response_id continuation must still find its engine.
  f = await fleet(3, { timeScale: 0.02, tokenizer: 'hf:qwen3', enablePromptTokensDetails: true },
    { policy: 'sticky', tokenizer: 'hf:qwen3', apiKeys: ['sk-agent'], adminToken: 't' });
  ({ base } = f);
});
after(async () => {
  await f.close();
  await getGlobalDispatcher().close();
});

const system = 'You are Claude Code, an agent that edits a large repository carefully. '.repeat(40);
const tools: Anthropic.Tool[] = [{ name: 'read_file', description: 'Read a file of the repository', input_schema: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } }];

function anthropic (session: string): Anthropic {
  // Claude Code sends its key as x-api-key (ANTHROPIC_API_KEY) and names its session in a header of its own.
  return new Anthropic({ baseURL: base, apiKey: 'sk-agent', defaultHeaders: { 'x-claude-code-session-id': session }, maxRetries: 0 });
}

test('HEAD / answers at once, as Claude Code checks its base URL first', async () => {
  const r = await request(`${base}/`, { method: 'HEAD' });
  assert.equal(r.statusCode, 200);
  await r.body.dump();
});

test('Anthropic SDK: messages, streamed and not, with tool use; a session\'s turns stay on one engine and hit its cache', async () => {
  const client = anthropic('cc-session-1');
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'Which file defines the router?' }];
  const hosts = new Set<string>();
  let cached = 0;
  const { data: first, response } = await client.messages.create({ model: 'm', system, tools, messages, max_tokens: 16 }).withResponse();
  hosts.add(response.headers.get('x-ear-backend') ?? '');
  assert.equal(first.type, 'message');
  assert.equal(first.role, 'assistant');
  assert.ok(first.usage.input_tokens > 400, `input tokens ${first.usage.input_tokens}`);
  assert.ok(first.content.length > 0);
  // The agent ran a tool: its call and result go back in the next turn, as Claude Code sends them.
  messages.push({ role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool_use', id: 'toolu_01', name: 'read_file', input: { path: 'src/core/router.ts' } }] });
  messages.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'export class Router {}' }] });
  for (let turn = 0; turn < 2; turn++) {
    const stream = client.messages.stream({ model: 'm', system, tools, messages, max_tokens: 16 });
    const events: string[] = [];
    stream.on('streamEvent', (e) => events.push(e.type));
    const final = await stream.finalMessage();
    const { response: r } = await stream.withResponse();
    hosts.add(r.headers.get('x-ear-backend') ?? '');
    assert.equal(events[0], 'message_start');
    assert.equal(events.at(-1), 'message_stop');
    assert.ok(events.includes('content_block_delta'));
    assert.ok(final.usage.output_tokens > 0);
    cached = final.usage.cache_read_input_tokens ?? 0;
    messages.push({ role: 'assistant', content: final.content.filter((b) => b.type === 'text').map((b) => ({ type: 'text' as const, text: (b as Anthropic.TextBlock).text })) });
    messages.push({ role: 'user', content: `continue ${turn}` });
  }
  assert.equal(hosts.size, 1, `turns went to ${[...hosts]}`);
  // vLLM reports input_tokens as the whole prompt; the cached part is read from the engine's own figures.
  const admin = await request(`${base}/admin/sessions/cc-session-1`, { headers: { authorization: 'Bearer t' } });
  const s = (await admin.body.json()) as { host: string; contextTokens: number };
  assert.equal(s.host, [...hosts][0]);
  assert.ok(s.contextTokens > 400);
  assert.ok(cached >= 0);
});

test('Anthropic SDK: count_tokens equals the prompt the messages endpoint bills, and leaves no session behind', async () => {
  const client = anthropic('cc-count');
  const messages: Anthropic.MessageParam[] = [{ role: 'user', content: 'How many tokens is this?' }];
  const counted = await client.messages.countTokens({ model: 'm', system, tools, messages });
  const sent = await client.messages.create({ model: 'm', system, tools, messages, max_tokens: 4 });
  assert.equal(counted.input_tokens, sent.usage.input_tokens);
  const metrics = await (await request(`${base}/metrics`)).body.text();
  assert.match(metrics, /ear_requests_total\{[^}]*route="\/v1\/messages\/count_tokens"[^}]*\} 1/);
});

test('Anthropic errors come back in Anthropic\'s shape: a malformed body, a missing key', async () => {
  const client = anthropic('cc-bad');
  await assert.rejects(client.messages.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] } as unknown as Anthropic.MessageCreateParamsNonStreaming),
    (e: unknown) => e instanceof Anthropic.BadRequestError && (e.error as { type: string; error: { type: string } }).type === 'error' &&
      (e.error as { error: { type: string } }).error.type === 'invalid_request_error');
  const noKey = new Anthropic({ baseURL: base, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(noKey.messages.create({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 4 }),
    (e: unknown) => e instanceof Anthropic.AuthenticationError && (e.error as { error: { type: string } }).error.type === 'authentication_error');
  const raw = await request(`${base}/v1/messages?beta=true`, { method: 'POST', headers: { 'x-api-key': 'sk-agent', 'content-type': 'application/json' }, body: '{"model":' });
  assert.equal(raw.statusCode, 400);
  assert.deepEqual(Object.keys(await raw.body.json() as object), ['type', 'error']);
});

test('a gzip-compressed body with a query string is decoded, routed and served', async () => {
  const body = JSON.stringify({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'compressed hello' }] });
  const r = await request(`${base}/v1/messages?beta=true`, {
    method: 'POST', headers: { 'x-api-key': 'sk-agent', 'content-type': 'application/json', 'content-encoding': 'gzip', 'anthropic-version': '2023-06-01' }, body: gzipSync(body)
  });
  assert.equal(r.statusCode, 200);
  const m = (await r.body.json()) as { type: string; usage: { input_tokens: number } };
  assert.equal(m.type, 'message');
  assert.ok(m.usage.input_tokens > 5);
});

test('OpenAI responses.create, streamed and not; previous_response_id continues on the engine that stored it', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-agent', maxRetries: 0 });
  const first = await client.responses.create({ model: 'm', instructions: system, input: 'Plan the change.', max_output_tokens: 8 }).withResponse();
  assert.equal(first.data.object, 'response');
  // vLLM's status when max_output_tokens ends it is 'incomplete'.
  assert.ok(['completed', 'incomplete'].includes(first.data.status ?? ''), first.data.status);
  assert.ok((first.data.usage?.input_tokens ?? 0) > 400);
  const origin = first.response.headers.get('x-ear-backend');
  // No session header: only the remembered origin keeps the continuation on the engine holding the response.
  for (let i = 0; i < 3; i++) {
    const next = await client.responses.create({ model: 'm', previous_response_id: first.data.id, input: `step ${i}`, max_output_tokens: 8 }).withResponse();
    assert.equal(next.response.headers.get('x-ear-backend'), origin);
  }
  const stream = await client.responses.create({ model: 'm', instructions: system, input: 'Stream it.', max_output_tokens: 8, stream: true });
  const types: string[] = [];
  let completed: OpenAI.Responses.Response | null = null;
  for await (const e of stream) {
    types.push(e.type);
    if (e.type === 'response.completed') completed = e.response;
  }
  assert.equal(types[0], 'response.created');
  assert.ok(types.includes('response.output_text.delta'));
  assert.ok(completed !== null && (completed.usage?.output_tokens ?? 0) > 0);
  // An id no engine holds: the engine answers, as vLLM does.
  await assert.rejects(client.responses.create({ model: 'm', previous_response_id: 'resp_nobody', input: 'x', max_output_tokens: 4 }),
    (e: unknown) => e instanceof OpenAI.NotFoundError);
});

// Last: it takes an engine out of the fleet.
test('a continuation whose engine has left is answered as vLLM answers an unknown response id', async () => {
  const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'sk-agent', maxRetries: 0 });
  const first = await client.responses.create({ model: 'm', input: 'Remember this.', max_output_tokens: 4 }).withResponse();
  const origin = first.response.headers.get('x-ear-backend')!;
  const keep = f.sims.map((s, i) => ({ s, id: `sim-${i}` })).filter((x) => x.id !== origin);
  await f.ear.gateway.reload(buildConfig({ apiKeys: ['sk-agent'] }, { backend: keep.map((x) => `${x.s.url},id=${x.id}`) }));
  await assert.rejects(client.responses.create({ model: 'm', previous_response_id: first.data.id, input: 'and now?', max_output_tokens: 4 }),
    (e: unknown) => e instanceof OpenAI.NotFoundError && (e.error as { code: string; message: string }).code === 'EAR_ERR_RESPONSE_NOT_FOUND' &&
      (e.error as { message: string }).message === `Response with id '${first.data.id}' not found.`);
});
