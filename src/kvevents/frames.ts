// ZMQ frames of vLLM's KV-event publisher (vllm-wire.md §1.6): PUB messages [topic, seq(8B BE), payload],
// replay replies [seq, payload] after the DEALER's empty delimiter, END_SEQ (ff×8) with an empty payload as
// the end marker, and the llm-d topic convention kv@<pod>@<model>.
import { KvDecodeError } from './errors.js';

export const END_SEQ = 0xffff_ffff_ffff_ffffn;
const EMPTY = new Uint8Array(0);
const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

export function seqToBytes (seq: bigint): Uint8Array {
  if (seq < 0n || seq > END_SEQ) throw new RangeError(`sequence number out of u64 range: ${seq}`);
  const b = new Uint8Array(8);
  new DataView(b.buffer).setBigUint64(0, seq);
  return b;
}

export function seqFromBytes (b: Uint8Array): bigint {
  if (b.length !== 8) throw new KvDecodeError(`a sequence frame has ${b.length} bytes, not 8`);
  return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0);
}

export const END_SEQ_BYTES: Uint8Array = seqToBytes(END_SEQ);

export interface PubMessage {
  topic: string;
  seq: bigint;
  payload: Uint8Array;
}

/** The three frames vLLM's PUB socket sends for one batch. */
export function buildPubMessage (topic: string, seq: bigint, payload: Uint8Array): [Uint8Array, Uint8Array, Uint8Array] {
  return [textEncoder.encode(topic), seqToBytes(seq), payload];
}

export function parsePubMessage (frames: Uint8Array[]): PubMessage {
  if (frames.length !== 3) throw new KvDecodeError(`a KV-event message has ${frames.length} frames, not 3`);
  return { topic: textDecoder.decode(frames[0]), seq: seqFromBytes(frames[1]), payload: frames[2] };
}

/** What a DEALER sends to the replay ROUTER to ask for every buffered batch from startSeq on. */
export function buildReplayRequest (startSeq: bigint): [Uint8Array, Uint8Array] {
  return [EMPTY, seqToBytes(startSeq)];
}

/** Server side: parses a ROUTER's [identity, "", startSeq]; any other shape is invalid, as in vLLM. */
export function parseReplayRequest (frames: Uint8Array[]): { identity: Uint8Array; startSeq: bigint } {
  if (frames.length !== 3 || frames[1].length !== 0) throw new KvDecodeError(`invalid replay request of ${frames.length} frames`);
  return { identity: frames[0], startSeq: seqFromBytes(frames[2]) };
}

/** Server side: one replayed batch, or the end marker when payload is omitted. */
export function buildReplayReply (identity: Uint8Array, seq: bigint, payload?: Uint8Array): Uint8Array[] {
  return payload === undefined ? [identity, EMPTY, END_SEQ_BYTES, EMPTY] : [identity, EMPTY, seqToBytes(seq), payload];
}

export interface ReplayReply {
  seq: bigint;
  payload: Uint8Array;
  /** The end marker: vLLM recognises it by its empty payload (its seq is END_SEQ). */
  end: boolean;
}

/**
 * Parses a reply as a DEALER receives it: ["", seq, payload] (vLLM, SGLang), also without the delimiter, or
 * ["", topic, seq, payload] (llm-d-inference-sim adds the topic).
 */
export function parseReplayReply (frames: Uint8Array[]): ReplayReply {
  let f = frames;
  if (f.length > 2 && f[0].length === 0) f = f.slice(1);
  if (f.length === 3) f = f.slice(1);
  if (f.length !== 2) throw new KvDecodeError(`a replay reply has ${frames.length} frames`);
  const payload = f[1];
  return { seq: seqFromBytes(f[0]), payload, end: payload.length === 0 };
}

export interface Topic {
  /** The pod id: the middle part of kv@<pod>@<model>, else the whole topic. */
  podId: string;
  model: string | null;
}

/** llm-d's rule: split on "@"; exactly three parts give pod and model, anything else is all pod id. */
export function parseTopic (topic: string): Topic {
  const parts = topic.split('@');
  return parts.length === 3 ? { podId: parts[1], model: parts[2] } : { podId: topic, model: null };
}
