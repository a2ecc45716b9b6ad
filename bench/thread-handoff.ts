// What N data-plane threads would pay to leave routing to one owner thread (issue 30 part 2's decision): the
// routing host's whole bookkeeping of one request (route, dispatched, first token, finished: what an owner would
// run for every request of every thread), against the cost of handing a request to another thread and back
// (postMessage on a MessagePort, and a ring of slots in a SharedArrayBuffer woken by Atomics.notify /
// Atomics.waitAsync), one at a time (latency) and pipelined (the owner's cost per message at saturation).
// Run alone: `npm run build && node dist/bench/thread-handoff.js [seconds per figure]`.
import { Worker, MessageChannel, isMainThread, parentPort, workerData, type MessagePort } from 'node:worker_threads';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { createAndAttach } from '../src/core/region.js';
import { RoutingHost } from '../src/core/routing-host.js';
import { PrefixIndexWriter } from '../src/core/prefix-index.js';
import { RingConsumer } from '../src/core/ring.js';
import { IndexFeeder } from '../src/kvevents/index-feeder.js';
import { createPolicy } from '../src/core/policies/index.js';
import { machine, gitCommit } from './machine.js';

const SECONDS = Number(process.argv[2] ?? 2);
const BLOCK = 16;

/**
 * Calls `fn` in batches of 64 for about `seconds`, `between` after each batch (not timed: the index writer's
 * work, another thread's in the gateway); returns µs per call.
 */
function perCall (fn: () => void, between: () => void, seconds: number): number {
  for (let i = 0; i < 2048; i++) { fn(); if ((i & 63) === 63) between(); }
  let n = 0;
  let spent = 0n;
  const end = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  for (let t = process.hrtime.bigint(); t < end;) {
    for (let i = 0; i < 64; i++) fn();
    n += 64;
    const t1 = process.hrtime.bigint();
    spent += t1 - t;
    between();
    t = process.hrtime.bigint();
  }
  return Number(spent) / 1e3 / n;
}

/** The owner's work for one request: the host's route, dispatched, firstToken and finished. */
function hostCosts (policy: string): Array<{ policy: string; request: string; us: number }> {
  const region = createAndAttach({ prefixIndexKeys: 1 << 18, sessions: 1 << 16, heapJobs: 16, recordRingOps: 1 << 16, pods: 8, scratchSlots: 12 });
  const host = new RoutingHost(region, { policy: createPolicy(policy), blockSize: BLOCK, sessionTtlMs: 60_000, random: () => 0.5 });
  for (let i = 0; i < 8; i++) host.addPod({ id: `p${i}`, role: 'both', models: new Set(['m']), state: 'ready' });
  for (let i = 0; i < 8; i++) host.engineLoad(i, { running: 1, waiting: 0, kvUsage: 0.2 }, 0);
  // The index's writer, pumped between batches so the index holds what routing recorded (as the kv-events thread).
  const feeder = new IndexFeeder(new PrefixIndexWriter(region), new RingConsumer(region), { assumedTtlMs: 600_000, expiryBudget: 64 });
  const pump = (): void => { while (feeder.pump() > 0); };
  const none = new Set<number>();
  const keysOf = (n: number, seed: bigint): BigUint64Array => {
    const k = new BigUint64Array(n);
    for (let i = 0; i < n; i++) k[i] = (seed * 0x9E3779B97F4A7C15n + BigInt(i + 1) * 0xC2B2AE3D27D4EB4Fn) & 0xFFFFFFFFFFFFFFFFn;
    return k;
  };
  const out: Array<{ policy: string; request: string; us: number }> = [];
  const cases: Array<{ request: string; tokens: number; session: boolean }> = [
    { request: 'short chat (no session, 0 full blocks)', tokens: 12, session: false },
    { request: '16 KB session turn (~4k tokens, 256 blocks)', tokens: 4096, session: true },
    { request: '140 KB session turn (~36k tokens, 2.2k blocks)', tokens: 36_000, session: true }
  ];
  let clock = 1;
  for (const c of cases) {
    // 64 sessions, each turn the same prompt again (the index holds it on the session's host after the first).
    const sessions = Array.from({ length: 64 }, (_, i) => ({ id: `s${i}`, keys: keysOf(Math.floor(c.tokens / BLOCK), BigInt(i + 1)) }));
    let i = 0;
    const one = (): void => {
      const s = sessions[i++ & 63];
      const now = clock++;
      const p = host.route({ model: 'm', sessionId: c.session ? s.id : null, parentSessionId: null, promptTokens: c.tokens, blockKeys: s.keys, maxTokens: 16, user: null }, none, now);
      host.dispatched(p, now);
      host.firstToken(p, now);
      host.finished(p, { promptTokens: c.tokens, completionTokens: 16 }, now);
    };
    out.push({ policy, request: c.request, us: perCall(one, pump, SECONDS) });
  }
  return out;
}

// ---- handoff between two threads ----

const RING_SLOTS = 1024;
/** Ring layout (Int32 indexes): [0] head (producer), [1] tail (consumer), [2..] slots; one per direction. */
function ringOf (sab: SharedArrayBuffer, which: number): Int32Array {
  return new Int32Array(sab, which * (RING_SLOTS + 2) * 4, RING_SLOTS + 2);
}

function echoThread (): void {
  const { port, sab } = workerData as { port: MessagePort; sab: SharedArrayBuffer };
  port.on('message', (m: number) => { port.postMessage(m); });
  const inRing = ringOf(sab, 0);
  const outRing = ringOf(sab, 1);
  const drain = (): void => {
    let tail = Atomics.load(inRing, 1);
    const head = Atomics.load(inRing, 0);
    if (tail !== head) {
      while (tail !== head) {
        const v = inRing[2 + (tail & (RING_SLOTS - 1))];
        const oh = Atomics.load(outRing, 0);
        outRing[2 + (oh & (RING_SLOTS - 1))] = v;
        Atomics.store(outRing, 0, oh + 1);
        tail++;
      }
      Atomics.store(inRing, 1, tail);
      Atomics.notify(outRing, 0);
    }
    const w = Atomics.waitAsync(inRing, 0, head);
    if (w.async) void w.value.then(drain); else setImmediate(drain);
  };
  drain();
  parentPort!.postMessage('ready');
}

async function handoffCosts (): Promise<Array<{ transport: string; mode: string; us: number }>> {
  const sab = new SharedArrayBuffer(2 * (RING_SLOTS + 2) * 4);
  const { port1, port2 } = new MessageChannel();
  const w = new Worker(fileURLToPath(import.meta.url), { workerData: { port: port2, sab, echo: true }, transferList: [port2] });
  await new Promise((resolve) => w.once('message', resolve));
  const out: Array<{ transport: string; mode: string; us: number }> = [];
  const timed = async (transport: string, mode: string, run: (n: number) => Promise<void>): Promise<void> => {
    await run(2000);
    let n = 0;
    const t0 = process.hrtime.bigint();
    const end = t0 + BigInt(Math.round(SECONDS * 1e9));
    while (process.hrtime.bigint() < end) { await run(1000); n += 1000; }
    out.push({ transport, mode, us: Number(process.hrtime.bigint() - t0) / 1e3 / n });
  };
  // postMessage: one in flight at a time, then 256 in flight.
  const portRun = (inFlight: number) => (n: number): Promise<void> => new Promise((resolve) => {
    let sent = 0;
    let got = 0;
    const onMsg = (): void => {
      if (++got === n) { port1.off('message', onMsg); resolve(); return; }
      if (sent < n) { port1.postMessage(sent++); }
    };
    port1.on('message', onMsg);
    for (let i = 0; i < Math.min(inFlight, n); i++) port1.postMessage(sent++);
  });
  await timed('MessagePort postMessage', 'one at a time (round trip)', portRun(1));
  await timed('MessagePort postMessage', '256 in flight (per message)', portRun(256));
  port1.unref();
  // The shared ring: push, notify; the echo thread drains in batches; we wait on our ring's head.
  const outRing = ringOf(sab, 0);
  const inRing = ringOf(sab, 1);
  const ringRun = (inFlight: number) => async (n: number): Promise<void> => {
    let sent = 0;
    let got = 0;
    const push = (): void => {
      const h = Atomics.load(outRing, 0);
      outRing[2 + (h & (RING_SLOTS - 1))] = sent++;
      Atomics.store(outRing, 0, h + 1);
    };
    for (let i = 0; i < Math.min(inFlight, n); i++) push();
    Atomics.notify(outRing, 0);
    while (got < n) {
      const head = Atomics.load(inRing, 0);
      let tail = Atomics.load(inRing, 1);
      if (tail === head) {
        const wv = Atomics.waitAsync(inRing, 0, head);
        if (wv.async) await wv.value;
        continue;
      }
      let pushed = false;
      while (tail !== head) {
        tail++;
        got++;
        if (sent < n) { push(); pushed = true; }
      }
      Atomics.store(inRing, 1, tail);
      if (pushed) Atomics.notify(outRing, 0);
    }
  };
  await timed('SharedArrayBuffer ring + Atomics.waitAsync', 'one at a time (round trip)', ringRun(1));
  await timed('SharedArrayBuffer ring + Atomics.waitAsync', '256 in flight (per message)', ringRun(256));
  await w.terminate();
  return out;
}

async function main (): Promise<void> {
  console.log('## Handing a request to an owner thread, against routing it in place\n');
  console.log(`Command: \`npm run build && node dist/bench/thread-handoff.js ${SECONDS}\` (issue 30 part 2's choice of who routes).\n`);
  console.log(`Machine: ${machine()}, commit ${gitCommit()}, load average at start ${loadavg()[0].toFixed(2)}.\n`);
  console.log('| owner\'s work per request (one thread: route, dispatched, first token, finished) | policy | µs |');
  console.log('|---|---|---:|');
  for (const policy of ['ear', 'prefix-cache', 'round-robin']) for (const r of hostCosts(policy)) console.log(`| ${r.request} | \`${r.policy}\` | ${r.us.toFixed(2)} |`);
  console.log('\n| handoff to another thread and back | mode | µs per message (both threads busy) |');
  console.log('|---|---|---:|');
  for (const r of await handoffCosts()) console.log(`| ${r.transport} | ${r.mode} | ${r.us.toFixed(2)} |`);
  console.log(`\nLoad average at the end: ${loadavg()[0].toFixed(2)}.`);
}

if (isMainThread) await main();
else if ((workerData as { echo?: boolean }).echo === true) echoThread();
