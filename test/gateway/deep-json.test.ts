// Deeply nested JSON (issue 28, finding 3), through `ear serve` in front of an `ear sim`: a tool_use.input 10k or
// 100k levels deep was a 500 api_error (Python's json.dumps conversion in anthropic-request.ts recursed); a
// Responses text.format as deep hung the request (the engine's own answer overflowed). Every API now answers 400
// invalid_request_error in its own shape, and a body nested to the bound is served, by the SDKs clients use.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { simFleet, type SimFleet } from '../fixtures/processes.js';
import { MAX_JSON_DEPTH } from '../../src/core/defaults.js';

let f: SimFleet;
before(async () => { f = await simFleet([], () => [['--time-scale', '0']]); });
after(async () => { await f?.close(); });

const deepText = (n: number): string => '{"a":'.repeat(n) + '1' + '}'.repeat(n);
function deepValue (n: number): Record<string, unknown> {
  let v: Record<string, unknown> = { a: 1 };
  for (let i = 1; i < n; i++) v = { a: v };
  return v;
}

/** The deep places of each API, as raw bodies (no SDK can write them: their JSON.stringify overflows too). */
const CASES: Array<{ name: string; path: string; shape: 'anthropic' | 'openai'; body: (n: number) => string }> = [
  { name: 'Messages tool_use.input', path: '/v1/messages', shape: 'anthropic', body: (n) => `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":${deepText(n)}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}` },
  { name: 'count_tokens tool_use.input', path: '/v1/messages/count_tokens', shape: 'anthropic', body: (n) => `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":${deepText(n)}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}]}` },
  { name: 'Messages tools input_schema', path: '/v1/messages', shape: 'anthropic', body: (n) => `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{"type":"object","properties":${deepText(n)}}}]}` },
  { name: 'Responses tools parameters', path: '/v1/responses', shape: 'openai', body: (n) => `{"model":"m","max_output_tokens":4,"input":"x","tools":[{"type":"function","name":"f","parameters":${deepText(n)}}]}` },
  { name: 'Responses text.format', path: '/v1/responses', shape: 'openai', body: (n) => `{"model":"m","max_output_tokens":4,"input":"x","text":${deepText(n)}}` },
  { name: 'Responses function_call arguments (a string of JSON)', path: '/v1/responses', shape: 'openai', body: (n) => `{"model":"m","max_output_tokens":4,"input":[{"type":"message","role":"user","content":"x"},{"type":"function_call","call_id":"c","name":"f","arguments":${JSON.stringify(deepText(n))}},{"type":"function_call_output","call_id":"c","output":"ok"}]}` },
  { name: 'chat tool_calls arguments (a string of JSON)', path: '/v1/chat/completions', shape: 'openai', body: (n) => `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":${JSON.stringify(deepText(n))}}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]}` },
  { name: 'chat tools parameters', path: '/v1/chat/completions', shape: 'openai', body: (n) => `{"model":"m","max_tokens":4,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":${deepText(n)}}}]}` }
];

for (const depth of [10_000, 100_000]) {
  test(`${depth} levels: 400 invalid_request_error in each API's shape, and the gateway serves on`, async () => {
    for (const c of CASES) {
      const res = await fetch(`${f.url}${c.path}`, { method: 'POST', headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01' }, body: c.body(depth), signal: AbortSignal.timeout(60_000) });
      const text = await res.text();
      assert.equal(res.status, 400, `${c.name}: ${text.slice(0, 300)}`);
      const j = JSON.parse(text) as { type?: string; error: { type: string; message: string; code?: string } };
      if (c.shape === 'anthropic') assert.equal(j.type, 'error', c.name);
      else assert.equal(j.error.code, 'EAR_ERR_BAD_REQUEST', c.name);
      assert.equal(j.error.type, 'invalid_request_error', c.name);
      assert.match(j.error.message, new RegExp(`nests? deeper than ${MAX_JSON_DEPTH} levels`), c.name);
    }
    assert.equal(f.gateway.child.exitCode, null);
    assert.equal((await fetch(`${f.url}/health`)).status, 200);
  });
}

test('nesting within the bound is served: the SDKs\' tool input and tool parameters', async () => {
  // The body's own levels (messages, content, block) come on top of the value's.
  const within = MAX_JSON_DEPTH - 8;
  const anthropic = new Anthropic({ baseURL: f.url, apiKey: 'k', maxRetries: 0 });
  const m = await anthropic.messages.create({
    model: 'm', max_tokens: 4,
    messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: deepValue(within) }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] }]
  });
  assert.equal(m.type, 'message');
  const count = await anthropic.messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: deepValue(within) }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'ok' }] }] });
  assert.ok(count.input_tokens > 0);
  const openai = new OpenAI({ baseURL: `${f.url}/v1`, apiKey: 'k', maxRetries: 0 });
  const r = await openai.responses.create({ model: 'm', max_output_tokens: 4, input: 'x', tools: [{ type: 'function', name: 'f', strict: false, parameters: deepValue(within) }] });
  assert.equal(r.object, 'response');
});
