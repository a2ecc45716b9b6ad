import { test } from 'node:test';
import assert from 'node:assert/strict';
import { post, sim, sseData } from './http-helpers.js';

test('--enable-force-include-usage: every stream ends with a usage chunk; X-Request-Id names the response', async () => {
  const s = await sim({ enableForceIncludeUsage: true, stopProbability: 0 });
  try {
    const r = await post(`${s.url}/v1/completions`, { prompt: 'abc', max_tokens: 2, stream: true }, { 'x-request-id': 'req-42' });
    const data = sseData(r.text);
    const usage = JSON.parse(data[data.length - 2]);
    assert.deepEqual(usage.choices, []);
    assert.equal(usage.usage.completion_tokens, 2);
    assert.equal(usage.id, 'cmpl-req-42');
    // stream_options.include_usage=false cannot switch it off (vLLM ORs the two).
    const off = sseData((await post(`${s.url}/v1/completions`, { prompt: 'abc', max_tokens: 2, stream: true, stream_options: { include_usage: false } })).text);
    assert.ok('usage' in JSON.parse(off[off.length - 2]));
  } finally {
    await s.close();
  }
});

test('a real clock with a time scale: steps are delivered after duration × scale, transfers wait on a timer', async () => {
  const [a, b] = await Promise.all([sim({ timeScale: 0.01, stopProbability: 0 }), sim({ timeScale: 0.01, stopProbability: 0 })]);
  try {
    const prompt = 'x'.repeat(300);
    const p = await post(`${a.url}/v1/completions`, { prompt, max_tokens: 1, kv_transfer_params: { do_remote_decode: true } });
    const d = await post(`${b.url}/v1/completions`, { prompt, max_tokens: 3, stream: true, stream_options: { include_usage: true }, kv_transfer_params: p.json.kv_transfer_params });
    const data = sseData(d.text);
    assert.equal(JSON.parse(data[data.length - 2]).usage.completion_tokens, 3);
    assert.ok(b.engine.importedTokens >= 288);
    const m = await (await fetch(`${b.url}/metrics`)).text();
    // Modelled time passed: the first token came after the transfer and a prefill step.
    const ttftSum = Number(/^vllm:time_to_first_token_seconds_sum\{[^}]*\} (\S+)/m.exec(m)![1]);
    assert.ok(ttftSum > 0);
  } finally {
    await Promise.all([a.close(), b.close()]);
  }
});

test('an engine failure: requests in flight end with an error, /health answers 503, the process lives', async () => {
  const s = await sim({ stopProbability: 0 });
  try {
    assert.equal((await fetch(`${s.url}/health`)).status, 200);
    s.engine.step = () => { throw new Error('simulated GPU fault'); };
    const whole = await post(`${s.url}/v1/completions`, { prompt: 'abc', max_tokens: 2 });
    assert.equal(whole.status, 500);
    assert.equal(whole.json.error.type, 'InternalServerError');
    assert.equal((await fetch(`${s.url}/health`)).status, 503);
    const later = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 2, stream: true });
    assert.equal(later.status, 500);
  } finally {
    await s.close();
  }
});
