import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { Decoder } from '@msgpack/msgpack';
import { Dealer, Subscriber } from 'zeromq';
import { decodeBatch } from '../../src/kvevents/codec.js';
import { buildReplayRequest, parseReplayReply, seqFromBytes } from '../../src/kvevents/frames.js';
import type { KvEvent } from '../../src/kvevents/types.js';
import { parseKvEventsConfig } from '../../src/sim/kv-events-config.js';
import type { SimServer } from '../../src/sim/server.js';
import { post, sim, text } from './http-helpers.js';

const TOPIC = 'kv@sim-test:8000@m';

interface Msg { topic: string; seq: bigint; payload: Uint8Array; events: KvEvent[] }

/** Collects every PUB message; `until` waits for one that satisfies a predicate. */
class Collector {
  readonly msgs: Msg[] = [];
  private waiters: Array<() => void> = [];
  constructor (readonly sub: Subscriber) {
    void (async () => {
      for await (const frames of sub) {
        assert.equal(frames.length, 3, 'a PUB message is [topic, seq, payload]');
        assert.equal(frames[1].length, 8);
        const payload = new Uint8Array(frames[2]);
        this.msgs.push({ topic: frames[0].toString('utf8'), seq: seqFromBytes(frames[1]), payload, events: decodeBatch(payload).events });
        for (const w of this.waiters.splice(0)) w();
      }
    })().catch(() => {});
  }

  async until (pred: (m: Msg) => boolean, what: string, from = 0): Promise<Msg> {
    for (let i = 0; i < 600; i++) {
      const hit = this.msgs.slice(from).find(pred);
      if (hit !== undefined) return hit;
      await new Promise<void>((resolve) => { this.waiters.push(resolve); setTimeout(resolve, 25); });
    }
    throw new Error(`no KV event batch with ${what}`);
  }
}

let s: SimServer;
let sub: Subscriber;
let events: Collector;
before(async () => {
  s = await sim({
    // 20 blocks of 16 tokens: a handful of 100-token prompts overflow it.
    numGpuBlocksOverride: 20,
    maxModelLen: 256,
    stopProbability: 0,
    kvEventsConfig: parseKvEventsConfig({ enable_kv_cache_events: true, endpoint: 'tcp://127.0.0.1:*', replay_endpoint: 'tcp://127.0.0.1:*', topic: TOPIC })
  });
  assert.match(s.kvEventsEndpoint ?? '', /^tcp:\/\/127\.0\.0\.1:\d+$/);
  sub = new Subscriber({ linger: 0 });
  sub.connect(s.kvEventsEndpoint!);
  sub.subscribe('kv@');
  events = new Collector(sub);
  // PUB/SUB joins asynchronously: send tiny requests until the first batch arrives.
  for (let i = 0; events.msgs.length === 0; i++) {
    assert.ok(i < 200, 'the subscriber never received a batch');
    await post(`${s.url}/v1/completions`, { prompt: text(20, 100 + i), max_tokens: 1 });
    await new Promise((r) => setTimeout(r, 20));
  }
});
after(async () => {
  sub.close();
  await s.close();
});

test('BlockStored per step: 3 frames, consecutive seqs, chained hashes, the blocks\' tokens', async () => {
  const from = events.msgs.length;
  const prompt = text(100, 1);
  await post(`${s.url}/v1/completions`, { prompt, max_tokens: 1 });
  const tokens = Array.from(Buffer.from(prompt));
  const m = await events.until((x) => x.events.some((e) => e.type === 'BlockStored' && e.tokenIds[0] === tokens[0] && e.tokenIds.length >= 16), 'the prompt\'s blocks', from);
  assert.equal(m.topic, TOPIC);
  const batch = decodeBatch(m.payload);
  assert.equal(batch.dataParallelRank, 0);
  assert.ok(Math.abs(batch.ts - Date.now() / 1000) < 60, 'ts is epoch seconds');
  const stored = m.events.filter((e) => e.type === 'BlockStored');
  const all = stored.flatMap((e) => e.type === 'BlockStored' ? e.tokenIds : []);
  // 100 prompt tokens = 6 full blocks (the 7th is partial and never published).
  assert.deepEqual(all, tokens.slice(0, 96));
  const first = stored[0];
  assert.ok(first.type === 'BlockStored');
  assert.equal(first.parentBlockHash, null);
  assert.equal(first.blockSize, 16);
  assert.equal(first.medium, 'GPU');
  assert.equal(typeof first.blockHashes[0], 'bigint');
  // Current vLLM's shape: one extra_keys entry per block, group 0, full attention.
  assert.deepEqual(first.extraKeys, first.blockHashes.map(() => null));
  assert.equal(first.groupIdx, 0);
  assert.equal(first.kvCacheSpecKind, 'full_attention');
  // The array layout has all 12 elements of the BlockStored struct.
  const raw = new Decoder({ useBigInt64: true }).decode(m.payload) as unknown[][];
  assert.equal((raw[1][0] as unknown[]).length, 12);
  const seqs = events.msgs.map((x) => x.seq);
  for (let i = 1; i < seqs.length; i++) assert.equal(seqs[i], seqs[i - 1] + 1n, 'no gaps in the sequence');
});

test('a small cache evicts: BlockRemoved names hashes stored before', async () => {
  const from = events.msgs.length;
  for (let i = 0; i < 6; i++) await post(`${s.url}/v1/completions`, { prompt: text(100, 10 + i), max_tokens: 1 });
  const m = await events.until((x) => x.events.some((e) => e.type === 'BlockRemoved'), 'BlockRemoved', from);
  const removed = m.events.find((e) => e.type === 'BlockRemoved');
  assert.ok(removed?.type === 'BlockRemoved');
  const storedHashes = new Set(events.msgs.flatMap((x) => x.events.flatMap((e) => e.type === 'BlockStored' ? e.blockHashes : [])));
  for (const h of removed.blockHashes) assert.ok(storedHashes.has(h), 'only stored blocks are removed');
});

test('/reset_prefix_cache emits AllBlocksCleared', async () => {
  const from = events.msgs.length;
  const r = await post(`${s.url}/reset_prefix_cache`, '');
  assert.equal(r.status, 200);
  const m = await events.until((x) => x.events.some((e) => e.type === 'AllBlocksCleared'), 'AllBlocksCleared', from);
  assert.deepEqual(m.events, [{ type: 'AllBlocksCleared' }]);
});

test('replay from a sequence number: [seq, payload]… then END_SEQ with an empty payload', async () => {
  const seen = events.msgs;
  assert.ok(seen.length >= 3);
  const start = seen[1].seq;
  const dealer = new Dealer({ linger: 0 });
  dealer.connect(s.kvReplayEndpoint!);
  try {
    await dealer.send(buildReplayRequest(start));
    const replies = [];
    for (;;) {
      const frames = await dealer.receive();
      assert.equal(frames.length, 3, 'DEALER sees ["", seq, payload]: no topic frame');
      assert.equal(frames[0].length, 0);
      const r = parseReplayReply(frames);
      if (r.end) {
        assert.equal(Buffer.from(frames[1]).toString('hex'), 'ffffffffffffffff');
        break;
      }
      replies.push(r);
    }
    assert.ok(replies.length >= seen.length - 1);
    for (const [i, r] of replies.entries()) {
      assert.equal(r.seq, start + BigInt(i));
      const live = seen.find((m) => m.seq === r.seq);
      if (live !== undefined) assert.deepEqual(new Uint8Array(r.payload), live.payload, 'replay returns the very bytes that were published');
    }
    // A malformed request is dropped; the socket keeps serving.
    await dealer.send(['', 'not-a-seq']);
    await dealer.send(buildReplayRequest(1n << 40n));
    const end = parseReplayReply(await dealer.receive());
    assert.ok(end.end, 'nothing buffered from a future seq: only the end marker');
  } finally {
    dealer.close();
  }
});

test('--kv-event-format map --kv-hash-format bytes: outer array, events as maps, 32-byte bin hashes', async () => {
  const m2 = await sim({
    kvEventFormat: 'map',
    kvHashFormat: 'bytes',
    hashSeed: '0',
    stopProbability: 0,
    kvEventsConfig: parseKvEventsConfig({ enable_kv_cache_events: true, endpoint: 'tcp://127.0.0.1:*', replay_endpoint: 'tcp://127.0.0.1:*' })
  });
  const dealer = new Dealer({ linger: 0 });
  try {
    // Tokens 1..33: two full blocks, whose sha256_cbor hashes (PYTHONHASHSEED=0) are the spec's test vectors.
    await post(`${m2.url}/v1/completions`, { prompt: Array.from({ length: 33 }, (_, i) => i + 1), max_tokens: 1 });
    // Read it back through replay (no subscriber join race).
    dealer.connect(m2.kvReplayEndpoint!);
    await dealer.send(buildReplayRequest(0n));
    const first = parseReplayReply(await dealer.receive());
    assert.equal(first.seq, 0n, 'sequence numbers start at 0');
    const raw = new Decoder({ useBigInt64: true }).decode(first.payload) as unknown[];
    assert.ok(Array.isArray(raw) && raw.length === 3);
    const ev = (raw[1] as Array<Record<string, unknown>>)[0];
    assert.equal(ev.type, 'BlockStored');
    assert.ok(ev.block_hashes instanceof Array && (ev.block_hashes as unknown[])[0] instanceof Uint8Array);
    const hashes = (ev.block_hashes as Uint8Array[]).map((h) => Buffer.from(h).toString('hex'));
    assert.equal(hashes.length, 2);
    assert.match(hashes[0], /^202da172[0-9a-f]{50}d332ea$/);
    assert.match(hashes[1], /^4a0a3938[0-9a-f]{50}27f5bf$/);
    const asInt = decodeBatch(first.payload).events[0];
    assert.ok(asInt.type === 'BlockStored');
    assert.deepEqual(asInt.blockHashes, [3236607068019569386n, 2758186210834249151n]);
    assert.ok('parent_block_hash' in ev && ev.parent_block_hash === null);
    assert.deepEqual(Object.keys(ev), ['type', 'block_hashes', 'parent_block_hash', 'token_ids', 'block_size', 'lora_id', 'medium', 'lora_name', 'extra_keys', 'group_idx', 'kv_cache_spec_kind']);
  } finally {
    dealer.close();
    await m2.close();
  }
});

test('an endpoint without a wildcard is connected to (llm-d centralized mode: the subscriber binds)', async () => {
  const central = new Subscriber({ linger: 0 });
  await central.bind('tcp://127.0.0.1:*');
  central.subscribe();
  const c = await sim({ stopProbability: 0, kvEventsConfig: parseKvEventsConfig({ enable_kv_cache_events: true, endpoint: central.lastEndpoint!, topic: 'kv@pod-a@m' }) });
  try {
    assert.equal(c.kvEventsEndpoint, central.lastEndpoint);
    const got = new Collector(central);
    for (let i = 0; got.msgs.length === 0; i++) {
      assert.ok(i < 200, 'the bound subscriber never received a batch');
      await post(`${c.url}/v1/completions`, { prompt: text(20, 500 + i), max_tokens: 1 });
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(got.msgs[0].topic, 'kv@pod-a@m');
  } finally {
    await c.close();
    central.close();
  }
});
