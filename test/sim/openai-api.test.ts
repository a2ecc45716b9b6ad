import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import type { SimServer } from '../../src/sim/server.js';
import { post, sim, sseData, text } from './http-helpers.js';
import { until } from '../fixtures/wait.js';

let s: SimServer;
let client: OpenAI;
before(async () => {
  s = await sim({ enablePromptTokensDetails: true, servedModelName: ['sim-model', 'alias'], maxModelLen: 4096, stopProbability: 0,
    loraModules: [{ name: 'adapter-a', path: '/loras/a', baseModelName: null }] });
  client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0 });
});
after(() => s.close());

test('chat, non-stream: vLLM field order and presence, usage, length finish', async () => {
  const r = await post(`${s.url}/v1/chat/completions`, { model: 'sim-model', messages: [{ role: 'user', content: 'hello' }], max_tokens: 5 });
  assert.equal(r.status, 200);
  const j = r.json;
  assert.deepEqual(Object.keys(j), ['id', 'object', 'created', 'model', 'choices', 'service_tier', 'system_fingerprint', 'usage', 'prompt_logprobs', 'prompt_token_ids', 'kv_transfer_params']);
  assert.match(j.id, /^chatcmpl-[0-9a-f]{32}$/);
  assert.equal(j.object, 'chat.completion');
  assert.equal(j.model, 'sim-model');
  assert.deepEqual(Object.keys(j.choices[0]), ['index', 'message', 'logprobs', 'finish_reason', 'stop_reason', 'token_ids']);
  assert.equal(j.choices[0].message.role, 'assistant');
  assert.equal(typeof j.choices[0].message.content, 'string');
  assert.equal(j.choices[0].finish_reason, 'length');
  assert.deepEqual(Object.keys(j.usage), ['prompt_tokens', 'total_tokens', 'completion_tokens', 'prompt_tokens_details']);
  assert.equal(j.usage.completion_tokens, 5);
  assert.equal(j.usage.total_tokens, j.usage.prompt_tokens + 5);
  assert.equal(j.kv_transfer_params, null);
});

test('openai client: chat and completions, stream and not, include_usage', async () => {
  const chat = await client.chat.completions.create({ model: 'alias', messages: [{ role: 'user', content: 'tell me' }], max_tokens: 4 });
  assert.equal(chat.model, 'alias');
  assert.equal(chat.usage?.completion_tokens, 4);

  const stream = await client.chat.completions.create({ model: 'sim-model', messages: [{ role: 'user', content: 'stream it' }], max_tokens: 6, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const withFinish = chunks.filter((c) => c.choices[0]?.finish_reason != null);
  assert.equal(withFinish.length, 1);
  assert.equal(withFinish[0].choices[0].finish_reason, 'length');
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage?.completion_tokens, 6);
  const streamed = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');

  // Same seed and prompt → same text whether streamed or not.
  const whole = await client.chat.completions.create({ model: 'sim-model', messages: [{ role: 'user', content: 'stream it' }], max_tokens: 6 });
  assert.equal(whole.choices[0].message.content, streamed);

  const comp = await client.completions.create({ model: 'sim-model', prompt: 'once upon a time', max_tokens: 3 });
  assert.equal(comp.object, 'text_completion');
  assert.equal(comp.usage?.prompt_tokens, 'once upon a time'.length);
  assert.equal(comp.usage?.completion_tokens, 3);

  const cstream = await client.completions.create({ model: 'sim-model', prompt: [1, 2, 3, 4], max_tokens: 3, stream: true });
  let n = 0;
  let finish: string | null = null;
  for await (const c of cstream) { n++; finish = c.choices[0]?.finish_reason ?? finish; assert.ok(c.usage == null); }
  assert.ok(n >= 1);
  assert.equal(finish, 'length');
});

test('SSE bytes: role chunk, content chunks, finish with stop_reason, usage chunk, [DONE]', async () => {
  const r = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'x' }], max_tokens: 3, stream: true, stream_options: { include_usage: true } });
  assert.equal(r.status, 200);
  const data = sseData(r.text);
  assert.equal(data[data.length - 1], '[DONE]');
  const events = data.slice(0, -1).map((d) => JSON.parse(d));
  assert.deepEqual(Object.keys(events[0]), ['id', 'object', 'created', 'model', 'choices']);
  assert.deepEqual(events[0].choices[0], { index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null });
  const fin = events[events.length - 2].choices[0];
  assert.deepEqual(Object.keys(fin), ['index', 'delta', 'logprobs', 'finish_reason', 'stop_reason']);
  assert.equal(fin.finish_reason, 'length');
  const usage = events[events.length - 1];
  assert.deepEqual(usage.choices, []);
  // exclude_none: no prompt_tokens_details when nothing was cached.
  assert.deepEqual(Object.keys(usage.usage), ['prompt_tokens', 'total_tokens', 'completion_tokens']);
  for (const e of events) assert.equal(e.id, events[0].id);

  // Without stream_options (and no --enable-force-include-usage) there is no usage chunk.
  const plain = sseData((await post(`${s.url}/v1/completions`, { prompt: 'abc', max_tokens: 2, stream: true })).text);
  assert.ok(plain.slice(0, -1).every((d) => !('usage' in JSON.parse(d))));
});

test('a repeated prompt reports cached_tokens in whole blocks (--enable-prompt-tokens-details)', async () => {
  const prompt = text(200, 1);
  const first = await client.completions.create({ model: 'sim-model', prompt, max_tokens: 2 });
  assert.equal(first.usage?.prompt_tokens_details ?? null, null);
  const second = await client.completions.create({ model: 'sim-model', prompt, max_tokens: 2 });
  const cached = second.usage?.prompt_tokens_details?.cached_tokens ?? 0;
  assert.ok(cached > 0, 'second request hits the prefix cache');
  assert.equal(cached % 16, 0);
  assert.ok(cached < 200);
  // Streamed, with the usage chunk: same count.
  const stream = await client.completions.create({ model: 'sim-model', prompt, max_tokens: 2, stream: true, stream_options: { include_usage: true } });
  let usage;
  for await (const c of stream) if (c.usage) usage = c.usage;
  assert.equal(usage?.prompt_tokens_details?.cached_tokens, cached);
});

test('completions: list prompts and n give one choice each, indexed prompt × n', async () => {
  const r = await post(`${s.url}/v1/completions`, { prompt: ['ab', 'cd'], n: 2, max_tokens: 2, seed: 7 });
  assert.equal(r.status, 200);
  assert.deepEqual(r.json.choices.map((c: { index: number }) => c.index), [0, 1, 2, 3]);
  assert.equal(r.json.usage.prompt_tokens, 4);
  assert.equal(r.json.usage.completion_tokens, 8);
  const ids = await post(`${s.url}/v1/completions`, { prompt: [[97, 98], [99]], max_tokens: 1 });
  assert.equal(ids.json.choices.length, 2);
  const echo = await post(`${s.url}/v1/completions`, { prompt: 'hello', max_tokens: 2, echo: true });
  assert.ok(echo.json.choices[0].text.startsWith('hello'));
});

test('stop strings end the text before them and are the stop_reason; stop_token_ids report the id', async () => {
  const base = await post(`${s.url}/v1/completions`, { prompt: 'zz', max_tokens: 12, seed: 3 });
  const full: string = base.json.choices[0].text;
  const stop = full.slice(4, 6);
  const cut = await post(`${s.url}/v1/completions`, { prompt: 'zz', max_tokens: 12, seed: 3, stop: [stop] });
  assert.equal(cut.json.choices[0].finish_reason, 'stop');
  assert.equal(cut.json.choices[0].stop_reason, stop);
  assert.equal(cut.json.choices[0].text, full.slice(0, full.indexOf(stop)));
  const tokens: number[] = (await post(`${s.url}/tokenize`, { prompt: full, add_special_tokens: false })).json.tokens;
  const byId = await post(`${s.url}/v1/completions`, { prompt: 'zz', max_tokens: 12, seed: 3, stop_token_ids: [tokens[3]] });
  assert.equal(byId.json.choices[0].finish_reason, 'stop');
  assert.equal(byId.json.choices[0].stop_reason, tokens[3]);
});

test('/tokenize (prompt and messages forms), /detokenize, /v1/models, /health', async () => {
  const t = await post(`${s.url}/tokenize`, { prompt: 'héllo', return_token_strs: true });
  assert.deepEqual(Object.keys(t.json), ['count', 'max_model_len', 'tokens', 'token_strs']);
  assert.equal(t.json.count, 6);
  assert.equal(t.json.max_model_len, 4096);
  const d = await post(`${s.url}/detokenize`, { tokens: t.json.tokens });
  assert.deepEqual(d.json, { prompt: 'héllo' });
  const chat = await post(`${s.url}/tokenize`, { model: 'sim-model', messages: [{ role: 'user', content: 'hi' }] });
  assert.equal(chat.status, 200);
  const rendered = await post(`${s.url}/detokenize`, { tokens: chat.json.tokens });
  assert.match(rendered.json.prompt, /<\|im_start\|>user\nhi<\|im_end\|>\n<\|im_start\|>assistant\n$/);
  // The chat request's prompt_tokens equal the rendered prompt's count.
  const c = await post(`${s.url}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hi' }], max_tokens: 1 });
  assert.equal(c.json.usage.prompt_tokens, chat.json.count);

  const models = await (await fetch(`${s.url}/v1/models`)).json() as any;
  assert.equal(models.object, 'list');
  assert.deepEqual(models.data.map((m: { id: string }) => m.id), ['sim-model', 'alias', 'adapter-a']);
  assert.deepEqual([models.data[2].root, models.data[2].parent, models.data[2].max_model_len], ['/loras/a', 'sim-model', null]);
  assert.deepEqual(Object.keys(models.data[0]), ['id', 'object', 'created', 'owned_by', 'root', 'parent', 'max_model_len', 'permission']);
  assert.equal(models.data[0].owned_by, 'vllm');
  assert.equal(models.data[0].max_model_len, 4096);

  const h = await fetch(`${s.url}/health`);
  assert.equal(h.status, 200);
  assert.equal(await h.text(), '');
});

test('bad input gets vLLM answers and never hurts the server', async () => {
  const chat = `${s.url}/v1/chat/completions`;
  const expect400 = async (body: unknown, match: RegExp): Promise<void> => {
    const r = await post(chat, body);
    assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.text}`);
    assert.deepEqual(Object.keys(r.json.error), ['message', 'type', 'param', 'code']);
    assert.equal(r.json.error.type, 'BadRequestError');
    assert.equal(r.json.error.code, 400);
    assert.match(r.json.error.message, match);
  };
  await expect400('{"messages": [', /JSON decode error/);
  await expect400({ messages: [{ role: 'user', content: 'x' }], cache_salt: '' }, /cache_salt' must be a non-empty string/);
  await expect400({ messages: [{ role: 'user', content: 'x' }], stream_options: { include_usage: true } }, /Stream options can only be defined when `stream=True`/);
  await expect400({ messages: [{ role: 'user', content: 'x' }], max_tokens: 'many' }, /max_tokens/);
  await expect400({ messages: [{ role: 'user', content: 'x' }], max_tokens: 0 }, /max_tokens/);
  await expect400({ messages: 'hi' }, /messages/);
  await expect400({}, /messages: Field required/);
  await expect400({ messages: [{ role: 'user', content: text(5000) }] }, /maximum context length is 4096 tokens\. However, your request has \d+ input tokens/);
  await expect400({ messages: [{ role: 'user', content: 'x' }], max_tokens: 4095 }, /'max_tokens' or 'max_completion_tokens' is too large: 4095/);
  await expect400([1, 2, 3], /dictionary/);
  await expect400({ messages: [{ role: 'user', content: 'x' }], add_generation_prompt: true, continue_final_message: true }, /continue_final_message/);
  const badPrompt = await post(`${s.url}/v1/completions`, { prompt: [] });
  assert.equal(badPrompt.status, 400);
  const oov = await post(`${s.url}/v1/completions`, { prompt: [1, 999999] });
  assert.equal(oov.status, 400);
  assert.match(oov.json.error.message, /out of vocabulary/);

  const unknownModel = await post(chat, { model: 'gpt-5', messages: [{ role: 'user', content: 'x' }] });
  assert.equal(unknownModel.status, 404);
  assert.deepEqual(unknownModel.json.error, { message: 'The model `gpt-5` does not exist.', type: 'NotFoundError', param: 'model', code: 404 });

  const nf = await fetch(`${s.url}/v2/nothing`);
  assert.equal(nf.status, 404);
  assert.deepEqual(await nf.json(), { detail: 'Not Found' });
  const wrongMethod = await fetch(chat);
  assert.equal(wrongMethod.status, 405);

  // Garbage of every shape: only 4xx answers, and the server still serves afterwards.
  const garbage: unknown[] = ['', 'null', '"str"', '12', '\u0000\u0001', '{"messages":[null]}', '{"messages":[{"role":1}]}',
    '{"messages":[{"role":"user","content":[{"type":"text","text":5}]}]}', '{"messages":[{"role":"user","content":{}}]}',
    '{"prompt":{"a":1}}', '{"messages":[],"n":-1}', '{"messages":[],"stop":[1]}', '{"messages":[],"kv_transfer_params":"x"}',
    '{"messages":[],"min_tokens":5,"max_tokens":2}', '{"messages":[],"seed":1.5}', '{"messages":[],"stream":"yes"}', '{"messages":[],"temperature":"hot"}'];
  for (const g of garbage) {
    for (const path of ['/v1/chat/completions', '/v1/completions', '/tokenize', '/detokenize']) {
      const r = await post(`${s.url}${path}`, g as string);
      assert.ok(r.status >= 400 && r.status < 500, `${path} ${JSON.stringify(g)} → ${r.status} ${r.text}`);
    }
  }
  const ok = await post(chat, { messages: [{ role: 'user', content: 'still alive?' }], max_tokens: 1 });
  assert.equal(ok.status, 200);
});

test('a client that disconnects mid-stream aborts its engine request', async () => {
  const ac = new AbortController();
  const res = await fetch(`${s.url}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: ac.signal,
    body: JSON.stringify({ prompt: 'long', max_tokens: 3000, stream: true })
  });
  const reader = res.body!.getReader();
  await reader.read();
  ac.abort();
  await reader.closed.catch(() => {});
  await until(() => s.engine.stats().running + s.engine.stats().waiting === 0, 'the engine to drop the aborted request');
  const metrics = await (await fetch(`${s.url}/metrics`)).text();
  assert.match(metrics, /vllm:request_success_total\{model_name="sim-model",engine="0",finished_reason="abort"\} [1-9]/);
});

test('/metrics: vllm: names with model_name and engine labels, cache_config_info, histograms', async () => {
  const res = await fetch(`${s.url}/metrics`);
  assert.equal(res.status, 200);
  const m = await res.text();
  for (const name of ['vllm:num_requests_running', 'vllm:num_requests_waiting', 'vllm:kv_cache_usage_perc', 'vllm:prefix_cache_queries_total',
    'vllm:prefix_cache_hits_total', 'vllm:prompt_tokens_total', 'vllm:generation_tokens_total', 'vllm:num_preemptions_total']) {
    assert.match(m, new RegExp(`^${name}\\{model_name="sim-model",engine="0"\\} \\d`, 'm'), name);
  }
  for (const h of ['vllm:time_to_first_token_seconds', 'vllm:inter_token_latency_seconds', 'vllm:e2e_request_latency_seconds',
    'vllm:request_queue_time_seconds', 'vllm:request_prefill_time_seconds', 'vllm:request_decode_time_seconds', 'vllm:request_prompt_tokens',
    'vllm:request_generation_tokens', 'vllm:iteration_tokens_total']) {
    assert.match(m, new RegExp(`^# TYPE ${h} histogram$`, 'm'), h);
    assert.match(m, new RegExp(`^${h}_count\\{model_name="sim-model",engine="0"\\} [1-9]`, 'm'), `${h} observed`);
  }
  assert.match(m, /^vllm:cache_config_info\{block_size="16",.*num_gpu_blocks="\d+".*engine="0"\} 1$/m);
  const hits = Number(/^vllm:prefix_cache_hits_total\{[^}]*\} (\d+)/m.exec(m)![1]);
  assert.ok(hits > 0);
});

test('a LoRA adapter is a model of its own: its blocks are salted by its name', async () => {
  const prompt = text(160, 31);
  const base1 = await post(`${s.url}/v1/completions`, { model: 'sim-model', prompt, max_tokens: 1 });
  assert.equal(base1.status, 200);
  const lora1 = await post(`${s.url}/v1/completions`, { model: 'adapter-a', prompt, max_tokens: 1 });
  assert.equal(lora1.json.model, 'adapter-a');
  assert.equal(lora1.json.usage.prompt_tokens_details, null, 'the base model\'s blocks do not serve the adapter');
  const lora2 = await post(`${s.url}/v1/completions`, { model: 'adapter-a', prompt, max_tokens: 1 });
  assert.ok(lora2.json.usage.prompt_tokens_details.cached_tokens > 0);
});
