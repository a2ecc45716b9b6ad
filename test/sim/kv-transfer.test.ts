import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { SimServer } from '../../src/sim/server.js';
import { post, sim, text } from './http-helpers.js';

let a: SimServer;
let b: SimServer;
before(async () => {
  [a, b] = await Promise.all([
    sim({ stopProbability: 0, enablePromptTokensDetails: true, servedModelName: ['m'] }),
    sim({ stopProbability: 0, enablePromptTokensDetails: true, servedModelName: ['m'] })
  ]);
});
after(async () => { await Promise.all([a.close(), b.close()]); });

const exportLeg = { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null };

test('export on A, import on B: B pulls the blocks, then serves the prefix from its own cache', async () => {
  const prompt = text(200, 42);
  const p = await post(`${a.url}/v1/completions`, { model: 'm', prompt, max_tokens: 1, stream: false, kv_transfer_params: exportLeg });
  assert.equal(p.status, 200);
  const params = p.json.kv_transfer_params;
  assert.deepEqual(Object.keys(params), ['do_remote_prefill', 'do_remote_decode', 'remote_block_ids', 'remote_engine_id', 'remote_request_id', 'remote_host', 'remote_port', 'tp_size']);
  assert.equal(params.do_remote_prefill, true);
  assert.equal(params.do_remote_decode, false);
  assert.equal(params.remote_engine_id, a.engineId);
  assert.equal(params.remote_host, '127.0.0.1');
  assert.equal(params.remote_port, a.port);
  assert.equal(params.tp_size, 1);
  assert.equal(params.remote_block_ids.length, 1, 'one list per KV-cache group');
  assert.ok(params.remote_block_ids[0].length >= Math.floor(200 / 16));
  assert.equal(p.json.choices[0].finish_reason, 'length');

  // The decode leg goes to B with A's params, verbatim.
  const d = await post(`${b.url}/v1/completions`, { model: 'm', prompt, max_tokens: 4, kv_transfer_params: params });
  assert.equal(d.status, 200);
  assert.equal(d.json.kv_transfer_params, null);
  assert.equal(d.json.usage.completion_tokens, 4);
  assert.ok(b.engine.importedTokens >= 192, `B imported ${b.engine.importedTokens} tokens`);

  // A released its hold when B read it: a second pull finds nothing.
  const again = await post(`${a.url}/ear/v1/kv/pull`, { remote_engine_id: a.engineId, remote_request_id: params.remote_request_id });
  assert.equal(again.status, 404);

  // A later turn sent straight to B hits the imported prefix.
  const next = await post(`${b.url}/v1/completions`, { model: 'm', prompt: prompt + ' and more', max_tokens: 1 });
  assert.ok(next.json.usage.prompt_tokens_details.cached_tokens >= 192, JSON.stringify(next.json.usage));
});

test('chat export carries the params too; streams and non-capped finishes do not', async () => {
  const messages = [{ role: 'user', content: text(120, 7) }];
  const p = await post(`${a.url}/v1/chat/completions`, { model: 'm', messages, max_tokens: 1, kv_transfer_params: exportLeg });
  assert.equal(p.json.kv_transfer_params.remote_engine_id, a.engineId);
  const d = await post(`${b.url}/v1/chat/completions`, { model: 'm', messages, max_tokens: 2, kv_transfer_params: p.json.kv_transfer_params });
  assert.equal(d.status, 200);
  assert.equal(d.json.kv_transfer_params, null);

  const streamed = await post(`${a.url}/v1/chat/completions`, { model: 'm', messages, max_tokens: 1, stream: true, kv_transfer_params: exportLeg });
  assert.equal(streamed.status, 200);
  assert.ok(!streamed.text.includes('kv_transfer_params'));
});

test('invalid or stale params: the request is computed locally, as vLLM does', async () => {
  const prompt = text(64, 9);
  const missing = await post(`${b.url}/v1/completions`, { model: 'm', prompt, max_tokens: 2, kv_transfer_params: { do_remote_prefill: true, remote_engine_id: 'x' } });
  assert.equal(missing.status, 200);
  assert.equal(missing.json.usage.completion_tokens, 2);
  const before = b.engine.importedTokens;
  const stale = await post(`${b.url}/v1/completions`, {
    model: 'm', prompt: text(64, 10), max_tokens: 2,
    kv_transfer_params: { do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [[1, 2, 3]], remote_engine_id: a.engineId, remote_request_id: 'gone', remote_host: '127.0.0.1', remote_port: a.port, tp_size: 1 }
  });
  assert.equal(stale.status, 200);
  assert.equal(b.engine.importedTokens, before);
  // A source that does not answer at all.
  const dead = await post(`${b.url}/v1/completions`, {
    model: 'm', prompt: text(64, 11), max_tokens: 1,
    kv_transfer_params: { do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [[1]], remote_engine_id: 'e', remote_request_id: 'r', remote_host: '127.0.0.1', remote_port: 1, tp_size: 1 }
  });
  assert.equal(dead.status, 200);
});

test('an export nobody pulls expires after --kv-hold-timeout (modelled seconds) and is then gone', async () => {
  const c = await sim({ stopProbability: 0, kvHoldTimeout: 0.5, timeScale: 0.01 });
  try {
    const p = await post(`${c.url}/v1/completions`, { prompt: text(64, 77), max_tokens: 1, kv_transfer_params: exportLeg });
    const params = p.json.kv_transfer_params;
    assert.ok(c.engine.heldBlocks(params.remote_request_id) !== null, 'held right after the export');
    // 0.5 modelled seconds at time-scale 0.01 is 5 ms of wall time.
    await new Promise((r) => setTimeout(r, 50));
    const pull = await post(`${c.url}/ear/v1/kv/pull`, { remote_engine_id: c.engineId, remote_request_id: params.remote_request_id });
    assert.equal(pull.status, 404);
    assert.equal(c.engine.expiredHolds, 1);
  } finally {
    await c.close();
  }
});
