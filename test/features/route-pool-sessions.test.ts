import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import pino from 'pino';
import { createRegion, Region } from '../../src/core/region.js';
import { BlockHasher } from '../../src/core/block-keys.js';
import { createTokenizerSync } from '../../src/tokenize/index.js';
import type { ChatMessage } from '../../src/tokenize/types.js';
import { computeFeatures } from '../../src/features/features.js';
import { createRoutePool, sessionShard } from '../../src/features/route-pool.js';
import { EarError } from '../../src/errors/errors.js';
import { startSim, type SimServer } from '../../src/sim/server.js';

const shared = createRegion({ prefixIndexKeys: 1 << 12, sessions: 64, heapJobs: 64, recordRingOps: 64, scratchSlots: 8 });
const hasher = new BlockHasher(new Region(shared));
const body = (m: ChatMessage[], model = 'm') => Buffer.from(JSON.stringify({ model, messages: m }));
let sim: SimServer;
before(async () => {
  sim = await startSim({ host: '127.0.0.1', port: 0, tokenizer: 'hf:qwen3', servedModelName: ['m'], logger: pino({ level: 'silent' }) });
});
after(() => sim.close());

test('a session always maps to the same thread, and sessions spread over the threads', () => {
  const seen = new Set<number>();
  for (let i = 0; i < 64; i++) {
    const s = sessionShard(`session-${i}`, 4);
    assert.equal(sessionShard(`session-${i}`, 4), s);
    seen.add(s);
  }
  assert.equal(seen.size, 4);
});

test('session turns through a session-affine pool equal cold features, interleaved over sessions and threads', async () => {
  const pool = createRoutePool(shared, { threads: 2, tokenizer: 'tiktoken:o200k_base', blockSize: 16 });
  try {
    const tok = createTokenizerSync('tiktoken:o200k_base');
    const convs: ChatMessage[][] = Array.from({ length: 4 }, (_, i) => [{ role: 'system', content: `agent ${i} `.repeat(200) }]);
    for (let turn = 0; turn < 4; turn++) {
      await Promise.all(convs.map(async (c, i) => {
        c.push({ role: 'user', content: `step ${turn}: ${'read the file and fix it '.repeat(20 + i)}` });
        const f = await pool.features('chat', body(c), `s${i}`);
        const cold = computeFeatures({ tokenizer: tok, hasher, blockSize: 16 }, 'chat', body(c));
        assert.equal(f.promptTokens, cold.promptTokens);
        assert.deepEqual(f.blockKeys, cold.blockKeys);
        c.push({ role: 'assistant', content: `done ${turn}` });
      }));
    }
    // Without a session the request goes to the least busy thread and is computed cold.
    const f = await pool.features('chat', body(convs[0]));
    assert.deepEqual(f.blockKeys, computeFeatures({ tokenizer: tok, hasher, blockSize: 16 }, 'chat', body(convs[0])).blockKeys);
  } finally {
    await pool.close();
  }
});

test('past maxQueue waiting tasks a request gets 429 (EAR_ERR_QUEUE_FULL), counted', async () => {
  const pool = createRoutePool(shared, { threads: 1, tokenizer: 'character', blockSize: 16, maxQueue: 1 });
  try {
    const big = body([{ role: 'user', content: 'x'.repeat(200_000) }]);
    const results = await Promise.allSettled(Array.from({ length: 6 }, () => pool.features('chat', big, 's')));
    const refused = results.filter((r) => r.status === 'rejected');
    assert.ok(refused.length >= 4, `${refused.length} refused`);
    for (const r of refused) assert.ok((r as PromiseRejectedResult).reason instanceof EarError && (r as PromiseRejectedResult).reason.code === 'EAR_ERR_QUEUE_FULL');
    assert.equal(pool.stats().queueFull, refused.length);
    // Bound released: the pool serves again.
    await pool.features('chat', big, 's');
  } finally {
    await pool.close();
  }
});

test('a remote tokenizer pool: keys follow the engine\'s tokens; an unreachable engine falls back to character, counted', async () => {
  const messages: ChatMessage[] = [{ role: 'system', content: 'You are a coding agent. '.repeat(30) }, { role: 'user', content: 'fix it' }];
  const good = createRoutePool(shared, { threads: 1, tokenizer: `remote:${sim.url}`, blockSize: 16 });
  const bad = createRoutePool(shared, { threads: 1, tokenizer: 'remote:http://127.0.0.1:9', blockSize: 16, remote: { retries: 0, timeoutMs: 200 } });
  try {
    const f = await good.features('chat', body(messages), 's');
    const qwen = computeFeatures({ tokenizer: createTokenizerSync('hf:qwen3'), hasher, blockSize: 16 }, 'chat', body(messages));
    assert.deepEqual([f.promptTokens, f.blockKeys], [qwen.promptTokens, qwen.blockKeys]);
    assert.equal(good.stats().tokenizerFallbacks, 0);
    const g = await bad.features('chat', body(messages), 's');
    const chars = computeFeatures({ tokenizer: createTokenizerSync('character'), hasher, blockSize: 16 }, 'chat', body(messages));
    assert.deepEqual([g.promptTokens, g.blockKeys], [chars.promptTokens, chars.blockKeys]);
    // Token-id prompts need no tokenizer: no fallback.
    await bad.features('completions', Buffer.from(JSON.stringify({ model: 'm', prompt: [1, 2, 3] })));
    assert.equal(bad.stats().tokenizerFallbacks, 1);
    await assert.rejects(bad.features('chat', Buffer.from('{')), (e: unknown) => e instanceof EarError && e.code === 'EAR_ERR_BAD_JSON');
  } finally {
    await good.close();
    await bad.close();
  }
});
