// How many requests a second one owner (the main thread that decides for every data-plane thread, src/gateway/
// http-threads.ts) can decide, and its CPU a request there: issue 30's question of whether the 8-core target
// (≥ 200k req/s) needs the fast path (a request placed in its data-plane thread, no message to the owner). The
// real `startEar` with `httpThreads` N, except that each data-plane thread is bench/owner-load-thread.ts: it speaks
// the owner protocol (batches, submit records, the key ring, reports) and serves no HTTP, so the owner saturates
// before anything else does. Backends: the bench upstream (bench/upstream.ts), leased as `--backends` pods.
// Run alone: `npm run build && node dist/bench/owner-ceiling.js [--threads 2] [--inflight 256] [--seconds 5]
//   [--kind short|session] [--sessions 1024] [--blocks 256] [--warm-index] [--policy ear] [--backends 8] [--scheduler S]`.
import { BroadcastChannel } from 'node:worker_threads';
import { readFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildConfig } from '../src/config/index.js';
import { startEar } from '../src/gateway/ear.js';
import { BENCH_MODEL } from './upstream.js';
import { startUpstream, stopAll } from './processes.js';
import { gitCommit, machine } from './machine.js';
import { CHANNEL, type Control, type Counts, type LoadShape } from './owner-load-protocol.js';

const { values: a } = parseArgs({
  options: {
    threads: { type: 'string', default: '2' },
    inflight: { type: 'string', default: '256' },
    seconds: { type: 'string', default: '5' },
    kind: { type: 'string', default: 'short' },
    policy: { type: 'string', default: 'ear' },
    backends: { type: 'string', default: '8' },
    scheduler: { type: 'string' },
    sessions: { type: 'string', default: '1024' },
    blocks: { type: 'string', default: '256' },
    'warm-index': { type: 'boolean', default: false }
  }
});
const threads = Number(a.threads);
// One thread is the main thread's own data plane: no owner protocol, nothing to measure.
if (!(threads >= 2)) throw new RangeError('--threads: 2 or more');
const seconds = Number(a.seconds);
const shape: LoadShape = a.kind === 'session'
  // A turn of --blocks keys (256: a 16 KB turn of ~4k BPE tokens; ~1000: dataplane16.sh's 16 KB body under the
  // default character tokenizer) growing 8 blocks a turn, sessions of ~30 turns (then a new one of the same keys:
  // its blocks are assumed on its pod already), drawn from --sessions a generator.
  ? { inflight: Number(a.inflight), model: BENCH_MODEL, sessions: Number(a.sessions), firstBlocks: Number(a.blocks), growBlocks: 8, maxBlocks: Number(a.blocks) + 240 }
  : { inflight: Number(a.inflight), model: BENCH_MODEL, sessions: 0, firstBlocks: 0, growBlocks: 0, maxBlocks: 0 };

/** The main thread's CPU (ms): utime + stime of its task (its tid is the pid), in Linux's 100 clock ticks a second. */
function ownerCpuMs (): number {
  const f = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
}

const ctl = new BroadcastChannel(CHANNEL);
let markId = 0;
/** Each generator's start as its first mark said. */
const starts = new Map<number, number>();
/** Every generator's counts now, summed. */
function mark (): Promise<Omit<Counts, 't' | 'id' | 'thread' | 'started'>> {
  const id = ++markId;
  const sum = { finished: 0, queued: 0, refused: 0, batchesIn: 0, batchesOut: 0, spilled: 0 };
  const heard = new Set<number>();
  let n = 0;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${n} of ${threads} generators answered mark ${id} within 10 s`)), 10_000);
    ctl.onmessage = (e: unknown) => {
      const c = (e as { data: Counts | Control }).data;
      if (c.t !== 'counts' || c.id !== id) return;
      // A generator that died is started again by the owner, with its counts at 0 and no load to send: a run
      // with one is not a measurement.
      const first = starts.get(c.thread);
      if (heard.has(c.thread) || (first !== undefined && first !== c.started)) {
        clearTimeout(timer);
        reject(new Error(`generator ${c.thread} was started again during the run: no figure`));
        return;
      }
      heard.add(c.thread);
      starts.set(c.thread, c.started);
      sum.finished += c.finished; sum.queued += c.queued; sum.refused += c.refused;
      sum.batchesIn += c.batchesIn; sum.batchesOut += c.batchesOut; sum.spilled += c.spilled;
      if (++n === threads) {
        clearTimeout(timer);
        resolve(sum);
      }
    };
    ctl.postMessage({ t: 'mark', id } satisfies Control);
  });
}

const upstream = await startUpstream();
const backends = Array.from({ length: Number(a.backends) }, (_, i) => `${upstream.url},id=b${i}`);
const file: Record<string, unknown> = { host: '127.0.0.1', port: 0, httpThreads: threads, routeThreads: 1, policy: a.policy, healthIntervalMs: 60_000, metricsIntervalMs: 0 };
if (a.scheduler !== undefined) file.scheduler = a.scheduler;
if (a['warm-index']) file.prefixIndexWarm = true;
let ear: Awaited<ReturnType<typeof startEar>> | null = null;
try {
  ear = await startEar(buildConfig(file, { backend: backends }), { threadEntry: new URL('./owner-load-thread.js', import.meta.url), threadLogger: pino({ level: 'error' }) });
  ctl.postMessage({ t: 'go', shape } satisfies Control);
  await sleep(1500);
  const c0 = await mark();
  const cpu0 = ownerCpuMs();
  const elu0 = performance.eventLoopUtilization();
  const t0 = performance.now();
  await sleep(seconds * 1000);
  const c1 = await mark();
  const cpu1 = ownerCpuMs();
  const elu = performance.eventLoopUtilization(elu0);
  const wall = (performance.now() - t0) / 1000;
  const n = c1.finished - c0.finished;
  const perReq = ((cpu1 - cpu0) * 1000) / n;
  console.log(`owner ceiling: ${threads} generator threads × ${shape.inflight} in flight, ${a.kind === 'session' ? `session turns (${a.blocks}+ blocks) of ${a.sessions} sessions a thread` : 'short'} requests, policy ${a.policy}, ${backends.length} backends, scheduler ${ear.core.config.scheduler}`);
  console.log(`  ${Math.round(n / wall)} req/s decided and finished; owner CPU ${perReq.toFixed(2)} µs a request (${((cpu1 - cpu0) / (wall * 10)).toFixed(0)}% of a core), event loop utilization ${elu.utilization.toFixed(2)}`);
  console.log(`  per request: ${((c1.batchesIn - c0.batchesIn) / n).toFixed(3)} owner batches out, ${((c1.batchesOut - c0.batchesOut) / n).toFixed(3)} batches in; queued ${c1.queued - c0.queued}, refused ${c1.refused - c0.refused}, keys spilled ${c1.spilled - c0.spilled}`);
  const w = ear.routing.host.walkStats();
  const ring = ear.routing.host.tableStats().find((t) => t.table === 'record_ring');
  const mig = ear.routing.host.migrationStats();
  console.log(`  prefix walks: ${w.full} whole, ${w.shortcut} from a session's hint; ${w.recordedKeys} keys recorded (${w.fullRecords} whole prompts); record ring ops dropped ${ring?.dropped ?? 0}; sessions moved ${mig.started} (${mig.turnsToSource} turns to a move's source)`);
  console.log(`  ${machine()}, commit ${gitCommit()}, load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
  ctl.postMessage({ t: 'halt' } satisfies Control);
  await sleep(200);
} finally {
  ctl.close();
  await ear?.close();
  await stopAll();
}
