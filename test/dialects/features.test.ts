// Routing reads the same features from an agent's API as from chat completions: the block keys of an Anthropic
// or Responses body equal those of the chat body vLLM renders from it, cold and turn by turn through the
// per-session incremental path; count_tokens leaves no keys.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRegion, Region } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { computeFeatures, type FeatureContext } from '../../src/features/features.js';
import { SessionFeatures } from '../../src/features/session-features.js';
import { createTokenizer } from '../../src/tokenize/index.js';
import type { Endpoint } from '../../src/dialects/dialect.js';

const region = new Region(createRegion({ prefixIndexKeys: 1 << 10, sessions: 64, heapJobs: 64, recordRingOps: 64, scratchSlots: 4 }));
const system = 'You are a coding agent. Follow the repository\'s conventions. '.repeat(20);
const tool = { name: 'read_file', description: 'Read a file', input_schema: { type: 'object', properties: { path: { type: 'string' } } } };
// vLLM's converted tool carries defer_loading (null when the Anthropic tool has none), and the template shows it.
const chatTool = { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: tool.input_schema, defer_loading: null } };

const body = (doc: unknown): Buffer => Buffer.from(JSON.stringify(doc));

async function contexts (): Promise<{ cold: FeatureContext; warm: FeatureContext }> {
  const tokenizer = await createTokenizer('hf:qwen3');
  const hasher = new BlockHasher(region);
  return { cold: { tokenizer, hasher, blockSize: 16 }, warm: { tokenizer, hasher, blockSize: 16, sessions: new SessionFeatures(tokenizer, { maxSessions: 8, idleMs: 60_000 }) } };
}

test('an Anthropic conversation has the block keys of its chat rendering, cold and incrementally', async () => {
  const { cold, warm } = await contexts();
  const anthropic: Array<Record<string, unknown>> = [{ role: 'user', content: 'Open the router.' }];
  // vLLM's conversion: system first, tool_use → tool_calls, tool_result → a tool message, tools as functions.
  const chat: Array<Record<string, unknown>> = [{ role: 'system', content: system }, { role: 'user', content: 'Open the router.' }];
  for (let turn = 0; turn < 3; turn++) {
    const a = computeFeatures(warm, 'messages', body({ model: 'm', max_tokens: 64, system, tools: [tool], messages: anthropic }), 's1');
    const aCold = computeFeatures(cold, 'messages', body({ model: 'm', max_tokens: 64, system, tools: [tool], messages: anthropic }));
    const c = computeFeatures(cold, 'chat', body({ model: 'm', max_tokens: 64, tools: [chatTool], tool_choice: 'auto', messages: chat }));
    assert.equal(a.promptTokens, c.promptTokens, `turn ${turn}`);
    assert.deepEqual(a.blockKeys, c.blockKeys, `turn ${turn}: incremental`);
    assert.deepEqual(aCold.blockKeys, c.blockKeys, `turn ${turn}: cold`);
    assert.equal(a.maxTokens, 64);
    const id = `toolu_${turn}`;
    anthropic.push({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'read_file', input: { path: `f${turn}.ts` } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: `contents of f${turn}` }] });
    chat.push({ role: 'assistant', tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: `f${turn}.ts` }).replace(':', ': ') } }] },
      { role: 'tool', tool_call_id: id, content: `contents of f${turn}` });
  }
});

test('a Responses body has the block keys of its chat rendering; previous_response_id and store are read', async () => {
  const { cold } = await contexts();
  const r = computeFeatures(cold, 'responses', body({ model: 'm', instructions: system, input: 'Plan it.', max_output_tokens: 32, store: false, previous_response_id: 'resp_1' }));
  const c = computeFeatures(cold, 'chat', body({ model: 'm', messages: [{ role: 'system', content: system }, { role: 'user', content: 'Plan it.' }] }));
  assert.deepEqual(r.blockKeys, c.blockKeys);
  assert.equal(r.maxTokens, 32);
  assert.equal(r.previousResponseId, 'resp_1');
  assert.equal(r.store, false);
  assert.equal(computeFeatures(cold, 'responses', body({ model: 'm', input: 'x' })).store, true, "vLLM's default");
});

test('count_tokens is tokenized but leaves no block keys; a client\'s kv_transfer_params never go upstream', async () => {
  const { cold } = await contexts();
  const doc = { model: 'm', system, messages: [{ role: 'user', content: 'count me' }] };
  const counted = computeFeatures(cold, 'count_tokens', body(doc));
  const sent = computeFeatures(cold, 'messages', body({ ...doc, max_tokens: 1 }));
  assert.equal(counted.promptTokens, sent.promptTokens);
  assert.equal(counted.blockKeys.length, 0);
  assert.ok(sent.blockKeys.length > 10);
  for (const endpoint of ['messages', 'responses'] as Endpoint[]) {
    const withParams = endpoint === 'messages' ? { ...doc, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } } : { model: 'm', input: 'x', kv_transfer_params: { do_remote_decode: true } };
    const f = computeFeatures(cold, endpoint, body(withParams));
    assert.ok(f.forward !== null && !Buffer.from(f.forward).toString().includes('kv_transfer_params'), endpoint);
  }
});
