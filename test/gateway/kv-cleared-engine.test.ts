// Issue 28 #9, the sequence as written: a cleared engine must not stay preferred. A real `ear serve` (policy
// prefix-cache) in front of three `ear sim` engines whose KV events come from test publishers speaking vLLM's wire
// (msgspec array and map layouts, int and bytes hashes, replay), so the test says which event each engine sends
// and when: a 4,096-token prefix T stored on b, a session with T routed to b (assumed on b), c losing one PUB
// message and recovering by replay, then past the assumed TTL b's AllBlocksCleared and a's BlockStored for T, and
// a new session with T must go to a 0.5 s later. Before the fix b's clear was a sweep of the whole index (2^21
// slots, longer than 0.5 s on two loaded cores) that a's BlockStored queued behind, so b still held T then.
// The 5 s TTL is set by config (--assumed-ttl-ms) and kept: the pauses are the (6 s, then 0.5 s), 100
// times what the fixed path needs to apply the two events (a few ms). Everything else is waited for on /metrics.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import pino from 'pino';
import { encodeBatch } from '../../src/kvevents/encode.js';
import type { KvEvent, KvWireFormat } from '../../src/kvevents/types.js';
import { startSim, type SimServer } from '../../src/sim/server.js';
import { TestPublisher } from '../kvevents/test-publisher.js';
import { metric, start, stop, text, SERVE_LISTENING, type Proc } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

const TTL_MS = 5000;
const PAST_TTL_MS = 1.2 * TTL_MS; // the 6 s for its 5 s TTL
const THEN_MS = 0.1 * TTL_MS; // the 0.5 s
const BLOCK = 16;
const T = text('the repository layout and the build rules of the storage engine', 4096); // 256 blocks (one token a byte)
const FIRST_TURN = ' -- session one: list the failing tests and explain the first failure.';

const ARRAY: KvWireFormat = { batchLayout: 'array', eventLayout: 'array', hashFormat: 'int' };
const MAP: KvWireFormat = { batchLayout: 'map', eventLayout: 'map', hashFormat: 'bytes' };

/** BlockStored for `prompt`'s whole blocks from block 0, engine hashes from `hashBase` (distinct per engine). */
function stored (prompt: string, hashBase: bigint): KvEvent<bigint> {
  const blocks = Math.floor(prompt.length / BLOCK);
  const tokens = Array.from(Buffer.from(prompt.slice(0, blocks * BLOCK)));
  return {
    type: 'BlockStored', blockHashes: Array.from({ length: blocks }, (_, i) => hashBase + BigInt(i)), parentBlockHash: null,
    tokenIds: tokens, blockSize: BLOCK, loraId: null, medium: 'GPU', loraName: null, extraKeys: null, groupIdx: 0
  };
}

const batch = (format: KvWireFormat, ...events: KvEvent<bigint>[]): Uint8Array =>
  encodeBatch({ ts: Date.now() / 1000, events, dataParallelRank: 0 }, format);

async function completion (gw: string, session: string, prompt: string): Promise<string> {
  const res = await fetch(`${gw}/v1/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': session },
    body: JSON.stringify({ model: 'm', prompt, max_tokens: 1 })
  });
  const body = await res.text();
  assert.equal(res.status, 200, body);
  return res.headers.get('x-ear-backend') ?? '';
}

test('past the assumed TTL, b\'s AllBlocksCleared and a\'s BlockStored for T send a new session with T to a, not b', async () => {
  const silent = pino({ level: 'silent' });
  const names = ['a', 'b', 'c'] as const;
  const formats = { a: ARRAY, b: MAP, c: ARRAY };
  const sims: SimServer[] = [];
  const pubs: TestPublisher[] = [];
  let gw: Proc | undefined;
  try {
    for (let i = 0; i < 3; i++) {
      sims.push(await startSim({ host: '127.0.0.1', port: 0, timeScale: 0, tokenizer: 'character', servedModelName: ['m'], logger: silent, seed: i }));
      pubs.push(await TestPublisher.start());
    }
    const [a, b, c] = pubs;
    const joined = pubs.map((p) => p.waitForSubscriber());
    gw = await start(['serve', '--host', '127.0.0.1', '--port', '0', '--route-threads', '1', '--policy', 'prefix-cache',
      '--tokenizer', 'character', '--assumed-ttl-ms', String(TTL_MS),
      ...names.flatMap((n, i) => ['--backend', `${sims[i].url},id=${n},kv-events=${pubs[i].endpoint},replay=${pubs[i].replayEndpoint}`])], SERVE_LISTENING);
    const url = gw.url;
    await Promise.all(joined);
    const applied = async (n: string, what: string): Promise<number> => await metric(url, `ear_kv_${what}_total`, `{backend="${n}"}`);

    // T stored on b; a session with T routed to b (the gateway assumes b holds all of its prompt).
    await b.publish(batch(formats.b, stored(T, 1n << 40n)));
    await until(async () => await applied('b', 'blocks_stored') >= 256, { what: 'b\'s BlockStored for T applied' });
    assert.equal(await completion(url, 'session-1', T + FIRST_TURN), 'b');

    // c loses one PUB message and recovers it by replay.
    await c.publish(batch(formats.c, stored(text('an unrelated prompt on c', 64), 3n << 40n)), { drop: true });
    await c.publish(batch(formats.c, stored(text('another unrelated prompt on c', 64), 4n << 40n)));
    await until(async () => await applied('c', 'replayed_batches') >= 1 && await applied('c', 'blocks_stored') >= 8,
      { what: 'c\'s lost batch replayed and both applied' });

    // Past the assumed TTL: b clears its cache, a stores T; 0.5 s later a new session with T (the first session's
    // opening turn again: b was assumed to hold all of it) goes to a, the only engine that holds T.
    await sleep(PAST_TTL_MS);
    await b.publish(batch(formats.b, { type: 'AllBlocksCleared' }));
    await a.publish(batch(formats.a, stored(T, 2n << 40n)));
    await sleep(THEN_MS);
    assert.equal(await completion(url, 'session-2', T + FIRST_TURN), 'a', '0.5 s after the events');
    // Once /metrics says both were applied, more new sessions: the policy breaks ties at random, none may go to b.
    await until(async () => await applied('b', 'all_blocks_cleared') >= 1 && await applied('a', 'blocks_stored') >= 256,
      { what: 'b\'s AllBlocksCleared and a\'s BlockStored applied' });
    for (const s of ['session-3', 'session-4', 'session-5']) assert.equal(await completion(url, s, T + FIRST_TURN), 'a', s);
  } finally {
    await stop(gw);
    await Promise.all(pubs.map((p) => p.close()));
    await Promise.all(sims.map((s) => s.close()));
  }
});
