import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createRegion, Region } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import { computeFeatures } from '../../src/features/features.js';
import { createRoutePool } from '../../src/features/route-pool.js';
import { EarError } from '../../src/errors/errors.js';
import { until } from '../fixtures/wait.js';
import { createServer } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';

const shared = createRegion({ prefixIndexKeys: 1 << 12, sessions: 64, heapJobs: 64, recordRingOps: 64, scratchSlots: 4 });
const pool = createRoutePool(shared, { threads: 1, tokenizer: 'hf:qwen3', blockSize: 16 });
after(() => pool.close());

const system = 'You are a coding agent. '.repeat(40);
const body = (extra: Record<string, unknown> = {}) => Buffer.from(JSON.stringify({
  model: 'q', messages: [{ role: 'system', content: system }, { role: 'user', content: 'fix the bug' }], ...extra
}));

test('features from the pool equal those computed inline, and chat keys follow the rendered tokens', async () => {
  const f = await pool.features('chat', body());
  const region = new Region(shared);
  const ctx = { tokenizer: createTokenizerSync('hf:qwen3'), hasher: new BlockHasher(region), blockSize: 16 };
  const inline = computeFeatures(ctx, 'chat', body());
  assert.deepEqual(f.blockKeys, inline.blockKeys);
  assert.equal(f.promptTokens, inline.promptTokens);
  assert.equal(f.blockKeys.length, Math.floor(f.promptTokens / 16));
  // Same tokens through the completions API (token ids) give the same keys: the engine would cache them alike.
  const rendered = ctx.tokenizer.chatTemplate.render([{ role: 'system', content: system }, { role: 'user', content: 'fix the bug' }], { addGenerationPrompt: true });
  const ids = ctx.tokenizer.encode(rendered, { addSpecialTokens: false });
  const c = await pool.features('completions', Buffer.from(JSON.stringify({ model: 'q', prompt: ids })));
  assert.deepEqual(c.blockKeys, f.blockKeys);
});

test('a shared system prompt shares its leading keys; cache_salt and model change every key', async () => {
  const a = await pool.features('chat', body());
  const b = await pool.features('chat', Buffer.from(JSON.stringify({ model: 'q', messages: [{ role: 'system', content: system }, { role: 'user', content: 'another task entirely' }] })));
  let common = 0;
  while (common < a.blockKeys.length && a.blockKeys[common] === b.blockKeys[common]) common++;
  assert.ok(common >= 10 && common < a.blockKeys.length, `shared ${common} of ${a.blockKeys.length}`);
  const salted = await pool.features('chat', body({ cache_salt: 'tenant-a' }));
  const other = await pool.features('chat', body({ model: 'q2' }));
  for (let i = 0; i < a.blockKeys.length; i++) {
    assert.notEqual(salted.blockKeys[i], a.blockKeys[i]);
    assert.notEqual(other.blockKeys[i], a.blockKeys[i]);
  }
});

test('errors in the worker come back as the right EarError', async () => {
  await assert.rejects(pool.features('chat', Buffer.from('{')), (e: unknown) => e instanceof EarError && e.code === 'EAR_ERR_BAD_JSON');
  await assert.rejects(pool.features('chat', body({ cache_salt: '' })), (e: unknown) => e instanceof EarError && /cache_salt/.test(e.message));
  await assert.rejects(pool.features('completions', Buffer.from(JSON.stringify({ model: 'q', prompt: [1, -2] }))), (e: unknown) => e instanceof EarError && e.status === 400);
});

test('ready() resolves once every thread has loaded, asks no remote tokenizer, and rejects for a thread that cannot load', async () => {
  await pool.ready();
  const region = createRegion({ prefixIndexKeys: 1 << 12, sessions: 64, heapJobs: 64, recordRingOps: 64, scratchSlots: 8 });
  // An engine that counts what it is asked: a probe that tokenized would ask its /tokenize.
  let asked = 0;
  const engine = createServer((req, res) => { asked++; res.writeHead(500).end(); });
  engine.listen(0, '127.0.0.1');
  await once(engine, 'listening');
  const url = `http://127.0.0.1:${(engine.address() as AddressInfo).port}`;
  const remote = createRoutePool(region, { threads: 2, tokenizer: `remote:${url}`, blockSize: 16, remote: { retries: 0, timeoutMs: 200 } });
  // A tokenizer file that is not there, given to the threads themselves (nothing frozen): each fails as it loads.
  const failures: unknown[] = [];
  const broken = createRoutePool(region, { threads: 1, tokenizer: 'hf:/nonexistent/tokenizer.json', blockSize: 16, frozenTokenizer: null,
    onThreadError: (err) => failures.push(err) });
  try {
    await remote.ready();
    assert.equal(asked, 0);
    // The counting engine does count: a real request asks it (and falls back to character on its 500).
    await remote.features('chat', body(), 's');
    assert.ok(asked > 0);
    await assert.rejects(broken.ready(), /tokenizer file not found/);
    // Piscina starts it again, and it fails again with no task to fail: heard, not thrown at the process.
    await until(() => failures.length > 0, 'the thread\'s next failure reported');
    assert.match(String(failures[0]), /tokenizer file not found/);
  } finally {
    await remote.close();
    await broken.close();
    engine.close();
  }
});
