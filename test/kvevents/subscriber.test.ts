// The subscriber against a real ZMQ publisher and replay ROUTER (test-publisher.ts) on loopback.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { encodeBatch } from '../../src/kvevents/codec.js';
import type { BlockStored } from '../../src/kvevents/types.js';
import { KvEventSubscriber, subscriberBinds, type KvBackendConfig, type KvSubscriberHandlers, type KvSubscriberOptions } from '../../src/kvevents/subscriber.js';
import { TestPublisher, type TestPublisherOptions } from './test-publisher.js';
import { TcpLink } from './tcp-link.js';
import { until } from '../fixtures/wait.js';

type Entry = { kind: 'batch'; seq: number; hash: bigint | null; replayed: boolean; topic: string } | { kind: 'resync'; reason: string; nextSeq: number; lastSeq: number | null };

/** A batch whose one event carries its own number as block hash, so the content can be checked. */
function payload (n: number): Uint8Array {
  const e: BlockStored<bigint> = {
    type: 'BlockStored', blockHashes: [BigInt(n) + 1000n], parentBlockHash: null, tokenIds: [1, 2, 3, 4], blockSize: 4,
    loraId: null, medium: 'GPU', loraName: null, extraKeys: null, groupIdx: 0,
  };
  return encodeBatch({ ts: Date.now() / 1000, events: [e], dataParallelRank: 0 }, { batchLayout: 'array', eventLayout: 'map', hashFormat: 'int' });
}

/** Handlers that log every batch (its first block's hash − 1000) and every resync of backend pod-a into `log`. */
function logInto (log: Entry[]): KvSubscriberHandlers {
  return {
    onBatch: (m) => {
      const e = m.batch.events[0] as BlockStored | undefined;
      log.push({ kind: 'batch', seq: Number(m.seq), hash: e ? e.blockHashes[0] - 1000n : null, replayed: m.replayed, topic: m.topic });
      assert.equal(m.backendId, 'pod-a');
    },
    onResync: (r) => log.push({ kind: 'resync', reason: r.reason, nextSeq: Number(r.nextSeq), lastSeq: r.lastSeq === null ? null : Number(r.lastSeq) })
  };
}

/** A publisher whose live stream reaches the subscriber through a TCP link the test can cut or hold down; not started. */
async function linked (subOpts: KvSubscriberOptions): Promise<{ pub: TestPublisher; link: TcpLink; sub: KvEventSubscriber; log: Entry[]; close: () => Promise<void> }> {
  const pub = await TestPublisher.start({ topic: 'kv@pod-a@m' });
  const link = await TcpLink.to(pub.endpoint);
  const log: Entry[] = [];
  const sub = new KvEventSubscriber({ id: 'pod-a', endpoint: link.endpoint, replayEndpoint: pub.replayEndpoint }, logInto(log), { replayTimeoutMs: 2000, ...subOpts });
  return { pub, link, sub, log, close: async () => { await sub.close(); await link.down(); await pub.close(); } };
}

interface Rig { pub: TestPublisher; sub: KvEventSubscriber; log: Entry[]; seqs: () => number[]; close: () => Promise<void> }

async function rig (pubOpts: TestPublisherOptions = {}, subOpts: KvSubscriberOptions = {}, backend: Partial<KvBackendConfig> = {}): Promise<Rig> {
  const pub = await TestPublisher.start({ topic: 'kv@pod-a@m', ...pubOpts });
  const log: Entry[] = [];
  const sub = new KvEventSubscriber({ id: 'pod-a', endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint, ...backend }, logInto(log), { replayTimeoutMs: 2000, ...subOpts });
  await sub.start();
  await pub.waitForSubscriber();
  // The join check's replay: once the publisher has read it, its answer is set (empty), so what the test publishes
  // from here comes live, and replayed flags and duplicate counts do not depend on which came first.
  if (pub.replayEndpoint !== null && backend.replayEndpoint !== null && (subOpts.catchUpOnStart ?? true)) await until(() => pub.replayRequests >= 1, 'the join check');
  const seqs = (): number[] => log.flatMap((e) => (e.kind === 'batch' ? [e.seq] : []));
  return { pub, sub, log, seqs, close: async () => { await sub.close(); await pub.close(); } };
}

const json = (v: unknown): string => JSON.stringify(v, (_, x) => (typeof x === 'bigint' ? String(x) : x));
const range = (a: number, b: number): number[] => Array.from({ length: b - a + 1 }, (_, i) => a + i);

test('in-order delivery: every batch once, decoded, with its seq, topic and backend', async () => {
  const r = await rig();
  try {
    for (let i = 0; i < 20; i++) await r.pub.publish(payload(i));
    await until(() => r.seqs().length === 20, '20 batches');
    assert.deepEqual(r.seqs(), range(0, 19));
    assert.ok(r.log.every((e) => e.kind === 'batch' && e.hash === BigInt(e.seq) && !e.replayed && e.topic === 'kv@pod-a@m'));
    const s = r.sub.stats();
    assert.equal(s.batches, 20);
    assert.equal(s.events, 20);
    assert.equal(s.gaps + s.replays + s.resyncs + s.decodeErrors, 0);
    assert.equal(s.lastSeq, 19n);
    assert.equal(typeof s.lastApplyLagMs, 'number');
  } finally {
    await r.close();
  }
});

test('batches dropped on the PUB side are recovered from the replay buffer, in order, without a resync', async () => {
  const r = await rig();
  try {
    const dropped = new Set([3, 4, 7, 12]);
    for (let i = 0; i <= 15; i++) await r.pub.publish(payload(i), { drop: dropped.has(i) });
    await until(() => r.sub.stats().lastSeq === 15n, 'seq 15');
    assert.deepEqual(r.seqs(), range(0, 15));
    assert.ok(r.log.every((e) => e.kind === 'batch' && e.hash === BigInt(e.seq)));
    for (const e of r.log) if (e.kind === 'batch' && dropped.has(e.seq)) assert.ok(e.replayed, `seq ${e.seq} came from the replay`);
    const s = r.sub.stats();
    assert.ok(s.gaps >= 1 && s.replays === s.gaps, JSON.stringify(s, (_, v) => (typeof v === 'bigint' ? String(v) : v)));
    assert.equal(s.resyncs, 0);
    assert.equal(s.batches, 16);
  } finally {
    await r.close();
  }
});

test('a sequence that goes backwards (engine restart) resyncs, then follows the new sequence', async () => {
  const r = await rig();
  try {
    for (let i = 0; i < 5; i++) await r.pub.publish(payload(i));
    await until(() => r.seqs().length === 5, '5 batches');
    r.pub.restart();
    for (let i = 0; i < 3; i++) await r.pub.publish(payload(i));
    await until(() => r.seqs().length === 8, '8 batches');
    assert.deepEqual(r.log[5], { kind: 'resync', reason: 'seq-reset', nextSeq: 0, lastSeq: 4 });
    assert.deepEqual(r.seqs(), [0, 1, 2, 3, 4, 0, 1, 2]);
    assert.equal(r.sub.stats().resyncs, 1);
  } finally {
    await r.close();
  }
});

test('an engine process restart on the same address: the SUB reconnects by itself and resyncs on the new sequence', async () => {
  const r = await rig({ replay: false }, { reconnectMinMs: 20, reconnectMaxMs: 200 });
  let second: TestPublisher | null = null;
  try {
    for (let i = 0; i < 4; i++) await r.pub.publish(payload(i));
    await until(() => r.seqs().length === 4, '4 batches');
    await r.pub.close();
    second = await TestPublisher.start({ topic: 'kv@pod-a@m', replay: false, bindTo: r.pub.endpoint });
    await second.waitForSubscriber();
    for (let i = 0; i < 2; i++) await second.publish(payload(i));
    await until(() => r.seqs().length === 6, '6 batches');
    assert.deepEqual(r.log[4], { kind: 'resync', reason: 'seq-reset', nextSeq: 0, lastSeq: 3 });
    assert.deepEqual(r.seqs(), [0, 1, 2, 3, 0, 1]);
  } finally {
    await r.sub.close();
    await second?.close();
  }
});

test('a restart noticed late is caught up from the new engine\'s replay buffer after the resync', async () => {
  const r = await rig();
  try {
    for (let i = 0; i < 6; i++) await r.pub.publish(payload(i));
    await until(() => r.seqs().length === 6, '6 batches');
    r.pub.restart();
    for (let i = 0; i < 3; i++) await r.pub.publish(payload(i), { drop: i < 2 });
    await until(() => r.seqs().length === 9, 'the new seq 2');
    assert.deepEqual(r.log[6], { kind: 'resync', reason: 'seq-reset', nextSeq: 2, lastSeq: 5 });
    assert.deepEqual(r.seqs().slice(6), [0, 1, 2]);
  } finally {
    await r.close();
  }
});

test('a gap older than the replay buffer resyncs and continues from the oldest batch still buffered', async () => {
  const r = await rig({ bufferSteps: 4 });
  try {
    await r.pub.publish(payload(0));
    await r.pub.publish(payload(1));
    await until(() => r.seqs().length === 2, '2 batches');
    for (let i = 2; i <= 9; i++) await r.pub.publish(payload(i), { drop: true });
    await r.pub.publish(payload(10));
    await until(() => r.sub.stats().lastSeq === 10n, 'seq 10');
    assert.deepEqual(r.log[2], { kind: 'resync', reason: 'gap-unrecoverable', nextSeq: 7, lastSeq: 1 });
    assert.deepEqual(r.seqs(), [0, 1, 7, 8, 9, 10]);
    const s = r.sub.stats();
    assert.equal(s.resyncs, 1);
    assert.equal(s.duplicates, 1, 'live seq 10 was already applied from the replay');
  } finally {
    await r.close();
  }
});

test('malformed payloads and frames are counted and skipped without a gap', async () => {
  const r = await rig();
  try {
    await r.pub.publish(payload(0));
    await r.pub.publish(payload(1));
    await r.pub.publish(new Uint8Array([0x93, 0xc1, 0xff]));
    await r.pub.sendRaw([Buffer.from('kv@pod-a@m'), Buffer.from('abc')]);
    await r.pub.sendRaw([Buffer.from('kv@pod-a@m'), Buffer.from('1234567'), payload(9)]);
    await r.pub.publish(payload(3));
    await until(() => r.sub.stats().lastSeq === 3n, 'seq 3');
    assert.deepEqual(r.seqs(), [0, 1, 3]);
    const s = r.sub.stats();
    assert.equal(s.decodeErrors, 3);
    assert.equal(s.gaps + s.resyncs, 0);
  } finally {
    await r.close();
  }
});

test('without a replay endpoint a gap resyncs at once', async () => {
  const r = await rig({ replay: false });
  try {
    await r.pub.publish(payload(0));
    await r.pub.publish(payload(1), { drop: true });
    await r.pub.publish(payload(2));
    await until(() => r.sub.stats().lastSeq === 2n, 'seq 2');
    assert.deepEqual(r.log.map((e) => e.kind), ['batch', 'resync', 'batch']);
    assert.equal(r.sub.stats().replays, 0);
  } finally {
    await r.close();
  }
});

test('a replay that never answers times out into a resync, and the next gap asks again on a fresh socket', async () => {
  const r = await rig({ silentReplay: true }, { replayTimeoutMs: 200 });
  try {
    await r.pub.publish(payload(0));
    await r.pub.publish(payload(1), { drop: true });
    await r.pub.publish(payload(2));
    await until(() => r.sub.stats().lastSeq === 2n, 'seq 2');
    await r.pub.publish(payload(3), { drop: true });
    await r.pub.publish(payload(4));
    await until(() => r.sub.stats().lastSeq === 4n, 'seq 4');
    assert.deepEqual(r.seqs(), [0, 2, 4]);
    const s = r.sub.stats();
    assert.equal(s.replays, 2);
    assert.equal(s.resyncs, 2);
    // The join check's (timed out too, before the first live batch), then one for each gap.
    assert.equal(s.joinChecks, 1);
    assert.equal(r.pub.replayRequests, 3);
  } finally {
    await r.close();
  }
});

test('joining late, the subscriber catches up from the replay buffer before the first live batch', async () => {
  const r = await rig();
  try {
    for (let i = 0; i < 5; i++) await r.pub.publish(payload(i), { drop: true });
    await r.pub.publish(payload(5));
    await until(() => r.sub.stats().lastSeq === 5n, 'seq 5');
    assert.deepEqual(r.seqs(), range(0, 5));
    assert.equal(r.sub.stats().resyncs, 0);
  } finally {
    await r.close();
  }
});

test('bind mode: engines connect to us (centralized mode)', async () => {
  assert.equal(subscriberBinds('tcp://*:5557'), true);
  assert.equal(subscriberBinds('tcp://0.0.0.0:5557'), true);
  assert.equal(subscriberBinds('tcp://[::]:5557'), true);
  assert.equal(subscriberBinds('tcp://10.0.0.7:5557'), false);
  assert.equal(subscriberBinds('ipc:///tmp/kv'), false);
  const log: number[] = [];
  const sub = new KvEventSubscriber({ id: 'central', endpoint: 'tcp://127.0.0.1:*', mode: 'bind' }, { onBatch: (m) => log.push(Number(m.seq)), onResync: () => {} });
  await sub.start();
  const pub = await TestPublisher.start({ connectTo: sub.boundEndpoint!, replay: false });
  try {
    await pub.waitForSubscriber();
    for (let i = 0; i < 3; i++) await pub.publish(payload(i));
    await until(() => log.length === 3, '3 batches');
    assert.deepEqual(log, [0, 1, 2]);
  } finally {
    await sub.close();
    await pub.close();
  }
});

test('close() during a pending replay returns promptly and no callback fires afterwards', async () => {
  const r = await rig({ silentReplay: true }, { replayTimeoutMs: 60_000 });
  await r.pub.publish(payload(0));
  await r.pub.publish(payload(1), { drop: true });
  await r.pub.publish(payload(2));
  // The join check's replay, pending (rig waited for it): the live batches wait behind it.
  await until(() => r.pub.replayRequests === 1, 'the replay request');
  const before = r.log.length;
  await r.sub.close();
  await r.sub.close();
  await r.pub.publish(payload(3));
  await new Promise((res) => setTimeout(res, 50));
  assert.equal(r.log.length, before);
  await r.pub.close();
  await assert.rejects(r.sub.start(), /already started or closed/);
});

test('a throwing handler is counted and does not stop the stream; the apply lag uses the injected clock', async () => {
  const pub = await TestPublisher.start();
  const seen: number[] = [];
  const sub = new KvEventSubscriber({ id: 'pod-b', endpoint: pub.endpoint }, {
    onBatch: (m) => {
      seen.push(Number(m.seq));
      if (m.seq === 1n) throw new Error('consumer bug');
    },
    onResync: () => {},
  }, { now: () => 1_700_000_010_000 });
  try {
    await sub.start();
    await pub.waitForSubscriber();
    const fmt = { batchLayout: 'map', eventLayout: 'map', hashFormat: 'int' } as const;
    for (let i = 0; i < 3; i++) await pub.publish(encodeBatch({ ts: 1_700_000_000 + i, events: [{ type: 'AllBlocksCleared' }], dataParallelRank: null }, fmt));
    await until(() => seen.length === 3, '3 batches');
    const s = sub.stats();
    assert.deepEqual(seen, [0, 1, 2]);
    assert.equal(s.handlerErrors, 1);
    assert.equal(s.lastApplyLagMs, 8000);
  } finally {
    await sub.close();
    await pub.close();
  }
});

test('a consumer that falls behind: ZMQ drops past the high-water marks, replay fills every hole, order holds', async () => {
  const big = (n: number): Uint8Array => {
    const e: BlockStored<bigint> = {
      type: 'BlockStored', blockHashes: [BigInt(n) + 1000n], parentBlockHash: null, tokenIds: Array.from({ length: 16_384 }, (_, i) => 100_000 + i),
      blockSize: 16_384, loraId: null, medium: 'GPU', loraName: null, extraKeys: null, groupIdx: 0,
    };
    return encodeBatch({ ts: 1, events: [e], dataParallelRank: 0 }, { batchLayout: 'array', eventLayout: 'array', hashFormat: 'int' });
  };
  let stall = true;
  const r = await rig({ sendHighWaterMark: 4 }, { receiveHighWaterMark: 4 });
  const original = r.log.push.bind(r.log);
  r.log.push = (...items: Entry[]): number => {
    // The first batch blocks the consumer's thread a while, as a slow apply would.
    if (stall) { stall = false; const until = Date.now() + 300; while (Date.now() < until); }
    return original(...items);
  };
  try {
    for (let i = 0; i < 300; i++) await r.pub.publish(big(i));
    await until(() => r.sub.stats().lastSeq === 299n, { what: 'seq 299', timeoutMs: 20_000 });
    assert.deepEqual(r.seqs(), range(0, 299));
    assert.ok(r.log.every((e) => e.kind === 'batch' && e.hash === BigInt(e.seq)));
    const s = r.sub.stats();
    assert.equal(s.resyncs, 0);
    // 300 × ~50 KB against queues of 4 messages: ZMQ must have dropped some, and the replay brought them back. A
    // hole is found by a later batch (a gap) or, when ZMQ dropped everything after it, by the tail check.
    assert.ok(s.replayedBatches >= 1 && s.gaps + s.tailChecks >= 1, `gaps ${s.gaps}, tail checks ${s.tailChecks}, replayed ${s.replayedBatches}`);
  } finally {
    await r.close();
  }
});

test('the last batches of a burst dropped on the live stream: a tail check after a quiet period replays them', async () => {
  const r = await rig({}, { tailCheckMs: 150 });
  try {
    for (let i = 0; i < 8; i++) await r.pub.publish(payload(i));
    // Lost on the live socket, kept in the engine's replay buffer; nothing after them would reveal the gap.
    for (let i = 8; i < 10; i++) await r.pub.publish(payload(i), { drop: true });
    await until(() => r.sub.stats().lastSeq === 9n, 'seq 9');
    assert.deepEqual(r.seqs(), range(0, 9));
    assert.ok(r.log.slice(8).every((e) => e.kind === 'batch' && e.replayed));
    const s = r.sub.stats();
    assert.ok(s.tailChecks >= 1);
    assert.equal(s.resyncs, 0);
    assert.equal(s.gaps, 0);
  } finally {
    await r.close();
  }
});

test('replayOnStart: what the engine published before we started is replayed with no live batch; a restart after that resyncs', async () => {
  const pub = await TestPublisher.start({ topic: 'kv@pod-a@m' });
  const log: Entry[] = [];
  for (let i = 0; i < 5; i++) await pub.publish(payload(i), { drop: true });
  const sub = new KvEventSubscriber({ id: 'pod-a', endpoint: pub.endpoint, replayEndpoint: pub.replayEndpoint }, logInto(log), { replayOnStart: true, replayTimeoutMs: 2000 });
  try {
    await sub.start();
    await pub.waitForSubscriber();
    await until(() => log.length === 5, 'the 5 buffered batches');
    assert.ok(log.every((e, i) => e.kind === 'batch' && e.seq === i && e.replayed && e.hash === BigInt(i)));
    // The engine restarts while idle: its seq 0 is not the seq 0 we replayed (other bytes), so it resyncs.
    pub.restart();
    await pub.publish(payload(100));
    await until(() => log.length === 7, 'the new engine\'s batch');
    assert.deepEqual(log[5], { kind: 'resync', reason: 'seq-reset', nextSeq: 0, lastSeq: 4 });
    assert.deepEqual(log[6], { kind: 'batch', seq: 0, hash: 100n, replayed: false, topic: 'kv@pod-a@m' });
    // From there the live stream goes on as usual.
    await pub.publish(payload(101));
    await until(() => log.length === 8, 'seq 1');
    assert.equal(sub.stats().resyncs, 1);
    assert.equal(sub.stats().duplicates, 0);
  } finally {
    await sub.close();
    await pub.close();
  }
});

// Restarts vLLM's sequence numbers cannot show: the new process's sequence has passed the last one applied.
const hashes = (log: Entry[], from: number): Array<number | null> => log.slice(from).flatMap((e) => (e.kind === 'batch' ? [e.hash === null ? null : Number(e.hash)] : []));

test('a restart unseen until the new sequence passed ours: the gap\'s replay finds other bytes at our last seq and starts over', async () => {
  const r = await rig();
  try {
    for (let i = 0; i < 5; i++) await r.pub.publish(payload(i));
    await until(() => r.seqs().length === 5, '5 batches');
    // The new process publishes 0..9 while we hear nothing of it, then 10 reaches us: a gap from 5, as far as seqs go.
    r.pub.restart();
    for (let i = 0; i < 10; i++) await r.pub.publish(payload(100 + i), { drop: true });
    await r.pub.publish(payload(110));
    await until(() => r.sub.stats().lastSeq === 10n && r.seqs().length === 16, 'the new engine\'s 11 batches');
    assert.deepEqual(r.log[5], { kind: 'resync', reason: 'engine-restart', nextSeq: 0, lastSeq: 4 });
    assert.deepEqual(hashes(r.log, 6), range(100, 110), 'the new process\'s batches, from its seq 0, none of the old');
    const s = r.sub.stats();
    assert.equal(s.restarts, 1);
    assert.equal(s.resyncs, 1);
    assert.equal(s.duplicates, 1, 'the live seq 10 came with the replay');
  } finally {
    await r.close();
  }
});

test('a tail check after a quiet period catches a restart whose new sequence passed ours', async () => {
  const r = await rig({}, { tailCheckMs: 100 });
  try {
    for (let i = 0; i < 3; i++) await r.pub.publish(payload(i));
    await until(() => r.seqs().length === 3, '3 batches');
    r.pub.restart();
    for (let i = 0; i < 6; i++) await r.pub.publish(payload(200 + i), { drop: true });
    await until(() => r.sub.stats().restarts === 1 && r.seqs().length === 9, 'the restart and the new batches');
    assert.deepEqual(r.log[3], { kind: 'resync', reason: 'engine-restart', nextSeq: 0, lastSeq: 2 });
    assert.deepEqual(hashes(r.log, 4), range(200, 205));
  } finally {
    await r.close();
  }
});

test('a ZeroMQ reconnect checks the engine: the same process keeps everything; a restarted idle one is learnt afresh', async () => {
  const { pub, link, sub, log, close } = await linked({ reconnectMinMs: 20, reconnectMaxMs: 100, tailCheckMs: 0 });
  try {
    await sub.start();
    await pub.waitForSubscriber();
    for (let i = 0; i < 4; i++) await pub.publish(payload(i));
    await until(() => log.length === 4, '4 batches');
    // A dropped connection to the same engine: checked, nothing forgotten.
    link.cut();
    await until(() => sub.stats().reconnectChecks === 1, 'the reconnect check');
    assert.equal(sub.stats().resyncs, 0);
    assert.equal(log.length, 4);
    // Down while the engine restarts and passes our sequence, then idle: only the reconnect can tell.
    await link.down();
    pub.restart();
    for (let i = 0; i < 7; i++) await pub.publish(payload(300 + i));
    await link.up();
    await until(() => sub.stats().restarts === 1 && log.length === 12, { what: () => `the restart, seen on reconnect: ${JSON.stringify(log.slice(4))}` });
    assert.deepEqual(log[4], { kind: 'resync', reason: 'engine-restart', nextSeq: 0, lastSeq: 3 });
    assert.deepEqual(hashes(log, 5), range(300, 306));
    assert.equal(sub.stats().reconnectChecks, 2);
  } finally {
    await close();
  }
});

test('batches published before the SUB joined, then silence: the join check replays them past the start replay', async () => {
  // The kv-events thread's options: replay at start, catch up.
  const { pub, link, sub, log, close } = await linked({ replayOnStart: true, catchUpOnStart: true, reconnectMinMs: 20, reconnectMaxMs: 100 });
  try {
    await pub.publish(payload(0), { drop: true });
    await link.down();
    await sub.start();
    await until(() => log.length === 1, 'the start replay');
    // Sent with no subscriber joined (the link does not listen): ZeroMQ drops them, the replay buffer keeps them.
    for (let i = 1; i <= 3; i++) await pub.publish(payload(i));
    assert.equal(sub.stats().joinChecks, 0);
    await link.up();
    await until(() => log.length === 4, { what: () => `the batches published before the join: ${json(log)}` });
    assert.ok(log.every((e, i) => e.kind === 'batch' && e.seq === i && e.hash === BigInt(i) && e.replayed), json(log));
    const s = sub.stats();
    assert.equal(s.joinChecks, 1);
    assert.equal(s.replays, 1, 'the start replay; the join check is counted apart');
    assert.equal(s.resyncs + s.gaps + s.reconnectChecks, 0);
    // From there the live stream goes on (once our subscription has reached the publisher: the handshake that started
    // the join check can come before it, and a batch sent in between is left to the tail check after the join check).
    await pub.waitForSubscriber();
    await pub.publish(payload(4));
    await until(() => log.length === 5, 'seq 4');
    assert.deepEqual(log[4], { kind: 'batch', seq: 4, hash: 4n, replayed: false, topic: 'kv@pod-a@m' });
  } finally {
    await close();
  }
});

test('a restart learnt while disconnected, the engine publishing on until we reconnect: the reconnect check brings the rest', async () => {
  const { pub, link, sub, log, close } = await linked({ reconnectMinMs: 20, reconnectMaxMs: 100, tailCheckMs: 0 });
  try {
    await sub.start();
    await pub.waitForSubscriber();
    await until(() => pub.replayRequests >= 1, 'the join check');
    for (let i = 0; i < 3; i++) await pub.publish(payload(i));
    await until(() => log.length === 3, '3 batches');
    await link.down();
    // The engine restarts while we cannot hear it; the consumer learns it elsewhere (its /metrics start time).
    pub.restart();
    for (let i = 0; i < 4; i++) await pub.publish(payload(400 + i));
    await sub.restarted();
    assert.deepEqual(hashes(log, 4), range(400, 403));
    // It publishes on, still unheard, and goes quiet: only the reconnect can bring these.
    for (let i = 4; i < 6; i++) await pub.publish(payload(400 + i));
    await link.up();
    await until(() => log.length === 10, { what: () => `the batches published after the restart was learnt: ${json(log.slice(4))}` });
    assert.deepEqual(hashes(log, 4), range(400, 405));
    const s = sub.stats();
    assert.equal(s.reconnectChecks, 1);
    assert.equal(s.restarts, 1);
    assert.equal(s.resyncs, 1);
  } finally {
    await close();
  }
});

test('restarted(): the consumer says the engine restarted; the stream resyncs and reads the new buffer from 0', async () => {
  const r = await rig();
  try {
    for (let i = 0; i < 3; i++) await r.pub.publish(payload(i));
    await until(() => r.seqs().length === 3, '3 batches');
    await r.sub.restarted();
    assert.deepEqual(r.log[3], { kind: 'resync', reason: 'engine-restart', nextSeq: 0, lastSeq: 2 });
    assert.deepEqual(hashes(r.log, 4), [0, 1, 2], 'the buffer, read again (this engine did not in fact restart)');
    await r.pub.publish(payload(3));
    await until(() => r.seqs().length === 7, 'seq 3');
    assert.equal(r.sub.stats().restarts, 1);
  } finally {
    await r.close();
  }
});
