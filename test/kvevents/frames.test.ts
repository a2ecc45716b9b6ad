import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  END_SEQ, END_SEQ_BYTES, buildPubMessage, buildReplayReply, buildReplayRequest, parsePubMessage, parseReplayReply,
  parseReplayRequest, parseTopic, seqFromBytes, seqToBytes,
} from '../../src/kvevents/frames.js';
import { KvDecodeError } from '../../src/kvevents/errors.js';

const hex = (b: Uint8Array): string => Buffer.from(b).toString('hex');
const isDecodeError = (e: unknown): boolean => e instanceof KvDecodeError && e.code === 'EAR_ERR_KV_DECODE';

test('sequence numbers are 8 bytes big-endian over the whole u64 range; END_SEQ is ff×8', () => {
  assert.equal(hex(seqToBytes(0n)), '0000000000000000');
  assert.equal(hex(seqToBytes(258n)), '0000000000000102');
  assert.equal(hex(END_SEQ_BYTES), 'ffffffffffffffff');
  for (const s of [0n, 1n, 255n, 1n << 32n, (1n << 63n) + 5n, END_SEQ]) assert.equal(seqFromBytes(seqToBytes(s)), s);
  // A view into a larger buffer (as zeromq hands frames over) reads from its own offset.
  const big = new Uint8Array(12);
  big.set(seqToBytes(77n), 3);
  assert.equal(seqFromBytes(big.subarray(3, 11)), 77n);
  assert.throws(() => seqToBytes(-1n), RangeError);
  assert.throws(() => seqToBytes(1n << 64n), RangeError);
  assert.throws(() => seqFromBytes(new Uint8Array(7)), isDecodeError);
});

test('PUB messages are [topic, seq, payload] and anything but 3 frames is refused', () => {
  const payload = new Uint8Array([0x93, 1, 2]);
  const frames = buildPubMessage('kv@10.0.0.1:8000@Qwen/Qwen3-0.6B', 9n, payload);
  assert.equal(frames.length, 3);
  assert.deepEqual(parsePubMessage(frames), { topic: 'kv@10.0.0.1:8000@Qwen/Qwen3-0.6B', seq: 9n, payload });
  assert.deepEqual(parsePubMessage(buildPubMessage('', 0n, payload)).topic, '');
  assert.throws(() => parsePubMessage(frames.slice(1)), isDecodeError);
  assert.throws(() => parsePubMessage([frames[0], new Uint8Array(4), payload]), isDecodeError);
});

test('replay: request, replies and end marker as the ROUTER sends them and a DEALER receives them', () => {
  const id = new Uint8Array([0, 1, 2, 3, 4]);
  const [delim, seq] = buildReplayRequest(42n);
  assert.equal(delim.length, 0);
  assert.equal(seqFromBytes(seq), 42n);
  assert.deepEqual(parseReplayRequest([id, delim, seq]), { identity: id, startSeq: 42n });
  assert.throws(() => parseReplayRequest([id, seq]), isDecodeError);
  assert.throws(() => parseReplayRequest([id, new Uint8Array([1]), seq]), isDecodeError);

  const payload = new Uint8Array([0x90]);
  const reply = buildReplayReply(id, 43n, payload);
  assert.deepEqual(reply[0], id);
  // The DEALER sees everything after the identity, delimiter included.
  assert.deepEqual(parseReplayReply(reply.slice(1)), { seq: 43n, payload, end: false });
  assert.deepEqual(parseReplayReply(reply.slice(2)), { seq: 43n, payload, end: false });
  const end = parseReplayReply(buildReplayReply(id, 0n).slice(1));
  assert.equal(end.end, true);
  assert.equal(end.seq, END_SEQ);
  // llm-d-inference-sim puts a topic frame before seq; its end marker has an empty topic.
  assert.deepEqual(parseReplayReply([new Uint8Array(0), Buffer.from('kv@p@m'), seqToBytes(7n), payload]), { seq: 7n, payload, end: false });
  assert.equal(parseReplayReply([new Uint8Array(0), new Uint8Array(0), END_SEQ_BYTES, new Uint8Array(0)]).end, true);
  assert.throws(() => parseReplayReply([seqToBytes(1n)]), isDecodeError);
  assert.throws(() => parseReplayReply([new Uint8Array(0), new Uint8Array(3), payload]), isDecodeError);
});

test('topics: kv@<pod>@<model> with exactly three parts, anything else is the pod id', () => {
  assert.deepEqual(parseTopic('kv@10.0.0.1:8000@Qwen/Qwen3-0.6B'), { podId: '10.0.0.1:8000', model: 'Qwen/Qwen3-0.6B' });
  assert.deepEqual(parseTopic('kv@pod-a@'), { podId: 'pod-a', model: '' });
  assert.deepEqual(parseTopic(''), { podId: '', model: null });
  assert.deepEqual(parseTopic('pod-a'), { podId: 'pod-a', model: null });
  assert.deepEqual(parseTopic('kv@pod@org/model@v2'), { podId: 'kv@pod@org/model@v2', model: null });
});
