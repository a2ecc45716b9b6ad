// The load generator of bench/owner-ceiling.ts, started by the real owner (src/gateway/http-threads.ts) in place of
// a data-plane thread: it speaks owner-protocol.ts as http-thread.js does (the same batches, submit records, key
// ring and reports) but serves no HTTP, so the owner, not the data plane, is what saturates. Each keeps `inflight`
// requests submitted; a release is answered at once with the first-token and finished reports (a short answer's
// both come in one read) and the next submit. Told what to send, and asked for its counts, on a BroadcastChannel.
import { BroadcastChannel, parentPort, workerData } from 'node:worker_threads';
import { Region } from '../src/core/region.js';
import { KeyRingWriter } from '../src/gateway/key-ring.js';
import { BatchedPort } from '../src/threads/batched-port.js';
import {
  ANSWER_RELEASED, RELEASED_FIELDS, RELEASED_MIGRATING, RELEASED_QUEUED, REPORT_FINISHED, REPORT_FIRST_TOKEN, SUBMIT_RECORD,
  type HttpThreadData, type ToOwnerItem, type ToThread, type ToThreadItem
} from '../src/gateway/owner-protocol.js';
import { CHANNEL, type Control, type Counts, type LoadShape } from './owner-load-protocol.js';

const data = workerData as HttpThreadData;
const port = parentPort!;
const out = new BatchedPort<ToOwnerItem>(port);
let batchesOut = 0;
const post = port.postMessage.bind(port);
port.postMessage = (m: unknown) => { batchesOut++; post(m); };
const region = new Region(data.shared);
const area = region.claimScratch();
const ring = new KeyRingWriter(region, area.ptr, area.bytes);
const ctl = new BroadcastChannel(CHANNEL);

let shape: LoadShape | null = null;
let halted = false;
let nextId = 1;
let finished = 0;
let queued = 0;
let refused = 0;
let batchesIn = 0;
let spilled = 0;
/** Ids of migrationEnded calls the owner has not answered yet. */
const migrations = new Set<number>();
/** Per session: the blocks its next turn carries, and its keys (maxBlocks a session; 0n: not made yet). */
let turns = new Uint32Array(0);
let keys = new BigUint64Array(0);

const now = (): number => performance.timeOrigin + performance.now();
const started = now();
/** Prompt tokens of each submit not yet released, for its finished report's usage. */
const promptOf = new Map<number, number>();

/** A session's keys for a turn of `n` blocks: chained by session, so its turns share their prefix (made once a session). */
function keysOf (session: number, n: number): BigUint64Array {
  const max = shape!.maxBlocks;
  const at = session * max;
  if (keys[at] === 0n) {
    let h = BigInt(session + 1) * 0x9E3779B97F4A7C15n + BigInt(data.thread);
    for (let i = 0; i < max; i++) {
      h = (h * 0xC2B2AE3D27D4EB4Fn + 0x165667B19E3779F9n) & 0xFFFFFFFFFFFFFFFFn;
      keys[at + i] = h | 1n;
    }
  }
  return keys.subarray(at, at + n);
}

function submit (): void {
  const s = shape;
  if (s === null || halted) return;
  const id = nextId++;
  if (s.sessions === 0) {
    out.postRecord([id * 4 + SUBMIT_RECORD, s.model, null, null, 12, 2, null, 0, 0, null, null, 1]);
    return;
  }
  const session = Math.floor(Math.random() * s.sessions);
  const n = turns[session];
  turns[session] = n + s.growBlocks > s.maxBlocks ? s.firstBlocks : n + s.growBlocks;
  const k = keysOf(session, n);
  const sid = `t${data.thread}-s${session}`;
  promptOf.set(id, n * 16);
  const at = ring.put(k);
  if (at === null) {
    spilled++;
    out.post({ t: 'submit', id, input: { model: s.model, sessionId: sid, parentSessionId: null, promptTokens: n * 16, maxTokens: 2, user: null, blockKeys: k.slice() }, priorityClass: 1 });
    return;
  }
  out.postRecord([id * 4 + SUBMIT_RECORD, s.model, sid, null, n * 16, 2, null, at.at, at.n, null, null, 1]);
}

function onOwner (m: ToThread): void {
  switch (m.t) {
    case 'answer':
      // The owner's answer to a migration's end: nothing to send again.
      if (migrations.delete(m.id)) return;
      // A submit refused (429 queue full, no backend): sent again.
      if (!m.ok) refused++;
      promptOf.delete(m.id);
      submit();
      return;
    case 'dropped':
      refused++;
      promptOf.delete(m.id);
      submit();
      return;
    case 'metrics':
      out.post({ t: 'metrics', id: m.id, json: [] });
      return;
    case 'drain':
      halted = true;
      out.post({ t: 'drained' });
      return;
    case 'stop':
      out.flush();
      process.exit(0);
  }
}

port.on('message', (batch: readonly ToThreadItem[]) => {
  batchesIn++;
  for (let i = 0; i < batch.length; i++) {
    const m = batch[i];
    if (typeof m === 'object') {
      onOwner(m);
      continue;
    }
    const code = m as number;
    if (code % 4 !== ANSWER_RELEASED) throw new Error(`unknown record ${code}`);
    const pid = batch[i + 1] as number;
    const prompt = promptOf.get((code - ANSWER_RELEASED) / 4) ?? 12;
    promptOf.delete((code - ANSWER_RELEASED) / 4);
    const flags = batch[i + 8] as number;
    if ((flags & RELEASED_QUEUED) !== 0) queued++;
    i += RELEASED_FIELDS;
    // A session moved: with no KV connector the data plane ends the move at once (src/request/migrate.ts), so later
    // turns go to its new host and not to the source as while a transfer is in flight.
    if ((flags & RELEASED_MIGRATING) !== 0) {
      const id = nextId++;
      migrations.add(id);
      out.post({ t: 'migrationEnded', id, pid, ok: true });
    }
    out.post(pid * 4 + REPORT_FIRST_TOKEN);
    out.postRecord([pid * 4 + REPORT_FINISHED, now(), 1, prompt, 2, -1]);
    finished++;
    submit();
  }
});

ctl.onmessage = (e: unknown) => {
  // Every generator hears the others' counts too.
  const c = (e as { data: Control | Counts }).data;
  if (c.t === 'go') {
    shape = c.shape;
    turns = new Uint32Array(Math.max(1, c.shape.sessions)).fill(c.shape.firstBlocks);
    keys = new BigUint64Array(Math.max(1, c.shape.sessions * c.shape.maxBlocks));
    for (let i = 0; i < c.shape.inflight; i++) submit();
  } else if (c.t === 'mark') {
    const counts: Counts = { t: 'counts', id: c.id, thread: data.thread, started, finished, queued, refused, batchesIn, batchesOut, spilled };
    ctl.postMessage(counts);
  } else if (c.t === 'halt') halted = true;
};

out.post({ t: 'listening', port: data.port, keyRing: ring.base });
