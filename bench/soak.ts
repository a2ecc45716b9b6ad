// `npm run soak -- --minutes M`: agentic sessions through `ear serve` in front of `ear sim` engines (all separate
// processes) at about 70% of the engines' capacity, with graceful engine restarts and SIGHUP reloads in between;
// one row a minute (requests, failures by cause, the gateway's RSS and heap, its table sizes and what their bounds
// dropped), then a verdict. Pass: no lost request, and RSS and heap flat after warm-up (least-squares slope under
// 1 MB per 10 minutes). Exit code 0 on pass, 1 on fail; `summary.json` in the output directory.
// Memory is judged by runs with at least 10 minutes after warm-up (see MIN_JUDGED_S); shorter ones report slopes.
//
// RSS is judged without the routing tables' shared region: one fixed-size WebAssembly memory (1 GiB by default)
// whose pages fault in as keys first land on them, which at soak rates takes tens of minutes to complete. It
// cannot leak (its size is fixed at start), so the verdict is on the rest of the process (heaps of every thread,
// native buffers, sockets), and the region's resident bytes are reported beside it with their ceiling.
//
// Capacity, from the engine profile rather than a calibration run: engines run with max-num-seqs 1, so an engine
// serves one request at a time and its capacity is one second of service per second. A request's service time is
// the profile's step-time model for it alone (src/eval/drivers/isolated.ts) with its session's previous prompt
// cached; the mean service of a session (all its turns) over a pilot of sessions drawn from the same generator
// gives the session arrival rate that offers `load` × engines seconds of service per second. Cross-session
// prefix hits (shared system and project prompts) only lower the real load below that.
import { mkdirSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { agentic, allSessions, SessionPrompt, type ClosedLoopWorkload, type Session } from '../src/eval/workloads/index.js';
import type { AgenticOptions } from '../src/eval/workloads/agentic.js';
import { runWorkload, type Scheduler } from '../src/eval/workloads/runner.js';
import { isolatedServiceTime } from '../src/eval/drivers/isolated.js';
import { loadProfile, type EngineProfile } from '../src/engine-model/profile.js';
import { machine, gitCommit } from './machine.js';
import { SoakFleet, MODEL, SESSION_IDLE_MS } from './soak-fleet.js';
import { send, soakAgent } from './soak-client.js';
import { byLabel, parseMetrics, sharedRegionResident, slope, total, windowMinima } from './soak-stats.js';

const USAGE = `usage: npm run soak -- [--minutes M] [--engines N] [--load F] [--event-every S] [--warmup S] [--seed N] [--out DIR]
  --minutes M      how long sessions are started (default 10); requests in flight then finish
  --engines N      ear sim processes (default 3)
  --load F         offered load as a share of the engines' capacity (default 0.7)
  --event-every S  seconds between fleet events, alternately an engine restart and a SIGHUP reload, the first
                   at half of it (default 60)
  --warmup S       seconds left out of the memory slopes (default: a quarter of the run, 40 to 900)
  --idle-tail S    after the last request, keep sampling the gateway's session table this long with no traffic
                   (default 0; past the gateway's sessionIdleMs of 60 s it shows the table emptying)
  --out DIR        where summary.json goes (default results/soak-<time>)
  --gateway-cpu-prof DIR  run the gateway under node --cpu-prof (npm run flamegraph -- soak)`;

/** The agentic generator scaled to a soak: the same session structure (growing contexts, tool results, new
 *  tasks, compaction) with prompts in the thousands of tokens, so two shared cores can drive it for an hour. */
const SOAK_SHAPE: Partial<AgenticOptions> = {
  clients: 4, systemTokens: 1024, turnsMedian: 4, turnsSigma: 0.8, turnsMax: 40, projectMedian: 2048, taskMedian: 300,
  outputMedian: 48, outputSigma: 0.6, toolResultMedian: 200, largeToolProbability: 0.2, largeToolMedian: 2000,
  toolDelayMedian: 2, maxContext: 16384, summaryTokens: 1000
};
const PROFILE = 'h100-llama-3.1-8b';
/** Slope limit: 1 MB per 10 minutes, in bytes per second. */
const FLAT_BYTES_PER_S = 1e6 / 600;
const SAMPLE_MS = 2000;
const HEAP_WINDOW_S = 30;
/**
 * Memory is judged only with this many seconds of samples after warm-up: the limit is 1 MB per 10 minutes, and
 * over a shorter window the MBs that collections, allocator pages and thread start-up move RSS by are larger than
 * what a leak at the limit adds (a 2-minute run measured slopes from -73 to +900 MB/10 min on one build).
 */
const MIN_JUDGED_S = 600;

/** Seconds of engine service a session asks for (all its turns, its sub-agents), each turn alone on an engine
 *  holding the session's previous prompt. */
function sessionDemand (p: EngineProfile, s: Session, blockSize: number): number {
  let d = 0;
  for (const x of allSessions([s])) {
    for (const t of x.turns) d += isolatedServiceTime(p, t.promptTokens, Math.min(t.keepBlocks * blockSize, t.promptTokens), t.outputTokens);
  }
  return d;
}

interface Row {
  minute: number;
  sent: number;
  ok: number;
  failed: Record<string, number>;
  /** Share of gateway samples in which an engine had a request in flight (mean over engines). */
  busy: number;
  rssMB: number;
  /** Of the RSS, the shared tables' region (see the header). */
  regionMB: number;
  heapMB: number;
  tables: Record<string, number>;
  /** Sessions the client has sent a turn of, or had one answered, within the gateway's sessionIdleMs: what tables.sessions should hold. */
  liveSessions: number;
  dropped: Record<string, number>;
  events: string[];
  /** The machine's 1-minute load average (other work shares it). */
  load1: number;
}

async function main (): Promise<number> {
  const { values } = parseArgs({
    options: {
      minutes: { type: 'string', default: '10' }, engines: { type: 'string', default: '3' }, load: { type: 'string', default: '0.7' },
      'event-every': { type: 'string', default: '60' }, warmup: { type: 'string' }, seed: { type: 'string', default: '1' },
      out: { type: 'string' }, 'gateway-cpu-prof': { type: 'string' }, 'idle-tail': { type: 'string', default: '0' }, help: { type: 'boolean', short: 'h' }
    }
  });
  if (values.help) { console.log(USAGE); return 0; }
  const minutes = Number(values.minutes);
  const engines = Number(values.engines);
  const load = Number(values.load);
  const eventEvery = Number(values['event-every']);
  const seed = Number(values.seed);
  const idleTailSeconds = Number(values['idle-tail']);
  if (!(minutes > 0) || !Number.isInteger(engines) || engines < 2 || !(load > 0 && load < 1) || !(eventEvery > 0) || !(idleTailSeconds >= 0 && idleTailSeconds <= 3600)) {
    console.error(`soak: bad arguments (engines ≥ 2 so one can restart while the others serve; 0 < load < 1; idle tail 0 to 3600 s)\n${USAGE}`);
    return 2;
  }
  const duration = minutes * 60;
  // At most 15 minutes: the gateway's RSS rises for its first 15–20 (JIT, V8 pages, malloc arenas of three threads)
  // and then holds in a band (bench/RESULTS.md "Soak"); a 10-minute warm-up judged that rise as growth.
  const warmup = values.warmup === undefined ? Math.min(900, Math.max(40, duration / 4)) : Number(values.warmup);
  const out = resolve(values.out ?? join('results', `soak-${new Date().toISOString().replace(/[:.]/g, '-')}`));
  mkdirSync(out, { recursive: true });

  // Capacity → session rate (see the header).
  const profile = loadProfile(PROFILE);
  const pilot = agentic({ ...SOAK_SHAPE, seed: seed + 7919, sessions: 2000 });
  const meanDemand = pilot.sessions.reduce((a, s) => a + sessionDemand(profile, s, pilot.blockSize), 0) / pilot.sessions.length;
  const rate = load * engines / meanDemand;
  const w: ClosedLoopWorkload = agentic({ ...SOAK_SHAPE, seed, rate, duration });
  const turnsOf = new Map<string, number>();
  for (const s of allSessions(w.sessions)) turnsOf.set(s.id, s.turns.length);
  console.log(`soak: ${minutes} min, ${engines} × ear sim (${PROFILE}, max-num-seqs 1), load ${load}: mean session service ${meanDemand.toFixed(2)} s → ${rate.toFixed(3)} sessions/s, ${w.sessions.length} sessions; output in ${out}`);

  const cpuProf = values['gateway-cpu-prof'] === undefined ? undefined : resolve(values['gateway-cpu-prof']);
  const fleet = await SoakFleet.start({ engines, profile: PROFILE, maxNumSeqs: 1, dir: out, gatewayCpuProf: cpuProf });
  const agent = soakAgent();
  const t0 = performance.now();
  const now = (): number => (performance.now() - t0) / 1000;

  // Per-minute counters, reset when a row is printed; totals for the verdict.
  let minuteSent = 0;
  let minuteOk = 0;
  let minuteFailed: Record<string, number> = {};
  let minuteEvents: string[] = [];
  const failures: Record<string, number> = {};
  let sent = 0;
  let ok = 0;
  let open = 0;
  let skipped = 0;

  // The sessions the gateway should hold: last activity (a turn sent or answered) within its idle TTL. Bounded:
  // entries past the TTL are dropped at each row.
  const lastActivity = new Map<string, number>();
  const liveSessions = (): number => {
    const since = now() - SESSION_IDLE_MS / 1000;
    for (const [id, t] of lastActivity) if (t < since) lastActivity.delete(id);
    return lastActivity.size;
  };
  const prompts = new Map<string, SessionPrompt>();
  const sched: Scheduler = { at: (t, fn) => { setTimeout(() => fn(Math.max(t, now())), Math.max(0, (t - now()) * 1000)); } };
  runWorkload(w, sched, (d, done) => {
    // Sessions run out their turns after the deadline without sending them: the soak ends when those in flight do.
    if (now() > duration) { skipped++; done(now()); return; }
    let sp = prompts.get(d.sessionId);
    if (sp === undefined) prompts.set(d.sessionId, sp = new SessionPrompt(w.seed, w.blockSize));
    const { tokens } = sp.advance(d.spec);
    if (d.turn === (turnsOf.get(d.sessionId) ?? 0) - 1) prompts.delete(d.sessionId);
    sent++; minuteSent++; open++;
    lastActivity.set(d.sessionId, now());
    send(agent, fleet.url, MODEL, { sessionId: d.sessionId, tokens, maxTokens: d.outputTokens, stream: (d.turn + d.sessionId.length) % 2 === 0 })
      .then((o) => {
        if (o.ok) { ok++; minuteOk++; } else {
          failures[o.cause] = (failures[o.cause] ?? 0) + 1;
          minuteFailed[o.cause] = (minuteFailed[o.cause] ?? 0) + 1;
        }
      })
      .finally(() => { open--; lastActivity.set(d.sessionId, now()); done(now()); });
  });

  // Fleet events: engine restarts (round robin) and plain reloads, alternately, at half an interval then every
  // interval, one at a time (a restart that drains long delays the next event, which then runs at once).
  const events: Array<{ at: number; what: string; seconds: number; error?: string }> = [];
  const eventsDone = (async () => {
    for (let k = 0; (k + 0.5) * eventEvery < duration - 5; k++) {
      const due = (k + 0.5) * eventEvery;
      if (now() < due) await new Promise((resolve) => setTimeout(resolve, (due - now()) * 1000));
      if (now() > duration - 5) break;
      const restart = k % 2 === 0;
      const engine = Math.floor(k / 2) % engines;
      const what = restart ? `restart ${fleet.engineIds[engine]}` : 'reload';
      const at = now();
      try {
        if (restart) await fleet.restartEngine(engine);
        else await fleet.reload();
        events.push({ at, what, seconds: now() - at });
      } catch (err) {
        events.push({ at, what, seconds: now() - at, error: (err as Error).message });
      }
      minuteEvents.push(`${what} (${(now() - at).toFixed(1)} s)`);
    }
  })();

  // Gateway samples: memory, in-flight per engine, tables.
  const rss: Array<[number, number]> = [];
  const rssOutsideRegion: Array<[number, number]> = [];
  const heap: Array<[number, number]> = [];
  let region = { rss: 0, size: 0 };
  let busySamples = 0;
  let busyHits = 0;
  let last = new Map<string, number>();
  const sample = async (): Promise<void> => {
    try {
      const m = parseMetrics(await (await fetch(`${fleet.url}/metrics`)).text());
      const r = sharedRegionResident(fleet.gatewayPid);
      last = m;
      const t = now();
      rss.push([t, total(m, 'process_resident_memory_bytes')]);
      if (r !== null) {
        region = r;
        rssOutsideRegion.push([t, total(m, 'process_resident_memory_bytes') - r.rss]);
      }
      heap.push([t, total(m, 'nodejs_heap_size_used_bytes')]);
      for (const v of Object.values(byLabel(m, 'ear_backend_in_flight', 'backend'))) { busySamples++; if (v > 0) busyHits++; }
    } catch {}
  };
  const sampler = setInterval(() => { void sample(); }, SAMPLE_MS);

  const rows: Row[] = [];
  const header = '| min | sent | ok | failed (by cause) | engines busy | RSS MB | of it, tables region MB | heap MB | tables (entries) | live sessions | dropped by bounds | fleet events | load avg |';
  console.log(header);
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  const printRow = (): void => {
    const m = last;
    const row: Row = {
      minute: rows.length + 1, sent: minuteSent, ok: minuteOk, failed: minuteFailed,
      busy: busySamples === 0 ? 0 : busyHits / busySamples,
      rssMB: total(m, 'process_resident_memory_bytes') / 1e6, regionMB: region.rss / 1e6, heapMB: total(m, 'nodejs_heap_size_used_bytes') / 1e6,
      tables: byLabel(m, 'ear_table_entries', 'table'), liveSessions: liveSessions(),
      dropped: { ...byLabel(m, 'ear_table_dropped_total', 'table'), kv_map: total(m, 'ear_kv_map_drops_total') },
      events: minuteEvents, load1: loadavg()[0]
    };
    rows.push(row);
    const fmt = (r: Record<string, number>): string => Object.entries(r).map(([k, v]) => `${k} ${v}`).join(', ') || '0';
    console.log(`| ${row.minute} | ${row.sent} | ${row.ok} | ${fmt(row.failed)} | ${(row.busy * 100).toFixed(0)}% | ${row.rssMB.toFixed(1)} | ${row.regionMB.toFixed(1)} | ${row.heapMB.toFixed(1)} | ${fmt(row.tables)} | ${row.liveSessions} | ${fmt(row.dropped)} | ${row.events.join('; ') || '—'} | ${row.load1.toFixed(1)} |`);
    // What the verdict would say now (a run stopped early still leaves its figures).
    const sofar = (p: Array<[number, number]>): number => slope(p.filter(([t]) => t >= warmup)) * 600 / 1e6;
    writeFileSync(join(out, 'progress.json'), JSON.stringify({ rows, failures, rssMBPer10Min: sofar(rssOutsideRegion), rssWithRegionMBPer10Min: sofar(rss),
      heapMBPer10Min: slope(windowMinima(heap.filter(([t]) => t >= warmup), HEAP_WINDOW_S)) * 600 / 1e6, samples: { rss, rssOutsideRegion, heap } }) + '\n');
    minuteSent = 0; minuteOk = 0; minuteFailed = {}; minuteEvents = []; busySamples = 0; busyHits = 0;
  };
  const minuteTimer = setInterval(printRow, 60_000);

  // The deadline, then the requests in flight (bounded: one still open after the client timeout is a failure).
  await new Promise((resolve) => setTimeout(resolve, duration * 1000));
  const drainDeadline = now() + 330;
  while (open > 0 && now() < drainDeadline) await new Promise((resolve) => setTimeout(resolve, 200));
  await eventsDone;
  await sample();
  clearInterval(sampler);
  clearInterval(minuteTimer);
  if (minuteSent > 0 || minuteOk > 0 || Object.keys(minuteFailed).length > 0) printRow();
  const endMetrics = last;
  // No traffic from here: the session table should follow the live sessions down to none (expiry on the
  // gateway's upkeep timer, not on requests).
  const idleTail: Array<{ seconds: number; sessions: number; live: number }> = [];
  const tailEnd = now() + idleTailSeconds;
  while (idleTailSeconds > 0) {
    await sample();
    const sessions = byLabel(last, 'ear_table_entries', 'table').sessions ?? 0;
    idleTail.push({ seconds: Math.round(now() - duration), sessions, live: liveSessions() });
    console.log(`idle tail: ${idleTail.at(-1)!.seconds} s after the deadline, sessions ${sessions} (live ${idleTail.at(-1)!.live})`);
    if (now() >= tailEnd) break;
    await new Promise((resolve) => setTimeout(resolve, Math.min(5000, (tailEnd - now()) * 1000)));
  }
  await fleet.close();
  await agent.close();

  // Verdict. Every failure is a lost request: restarts drain first and the load is under capacity, so a healthy
  // backend could have served each one. Requests still open at the end count too.
  if (open > 0) failures['unfinished at the end'] = open;
  const failed = Object.values(failures).reduce((a, b) => a + b, 0);
  const after = (p: Array<[number, number]>): Array<[number, number]> => p.filter(([t]) => t >= warmup);
  const rssSlope = slope(after(rssOutsideRegion));
  const rssTotalSlope = slope(after(rss));
  const heapSlope = slope(windowMinima(after(heap), HEAP_WINDOW_S));
  const reasons: string[] = [];
  if (sent === 0) reasons.push('no request was sent');
  if (failed > 0) reasons.push(`${failed} lost requests`);
  const judged = duration - warmup >= MIN_JUDGED_S;
  if (judged && rssSlope >= FLAT_BYTES_PER_S) reasons.push(`RSS (outside the tables' region) grows ${(rssSlope * 600 / 1e6).toFixed(2)} MB per 10 min`);
  if (judged && heapSlope >= FLAT_BYTES_PER_S) reasons.push(`heap grows ${(heapSlope * 600 / 1e6).toFixed(2)} MB per 10 min`);
  const eventErrors = events.filter((e) => e.error !== undefined);
  if (eventErrors.length > 0) reasons.push(`${eventErrors.length} fleet events failed`);
  const summary = {
    pass: reasons.length === 0, reasons,
    command: `npm run soak -- ${process.argv.slice(2).join(' ')}`.trim(), machine: machine(), commit: gitCommit(),
    minutes, engines, profile: PROFILE, load, meanSessionServiceSeconds: meanDemand, sessionsPerSecond: rate, warmupSeconds: warmup,
    requests: { sent, ok, failed, lost: failed, notSentAfterDeadline: skipped }, failures,
    memory: {
      judged, judgedAfterSeconds: MIN_JUDGED_S,
      rssMBPer10Min: rssSlope * 600 / 1e6, heapMBPer10Min: heapSlope * 600 / 1e6, limitMBPer10Min: 1, heapWindowSeconds: HEAP_WINDOW_S,
      rssWithRegionMBPer10Min: rssTotalSlope * 600 / 1e6, regionResidentMB: region.rss / 1e6, regionMappedMB: region.size / 1e6
    },
    gateway: {
      requestsAnswered: total(endMetrics, 'ear_requests_total'), clientAborts: total(endMetrics, 'ear_client_aborts_total'),
      upstreamErrors: byLabel(endMetrics, 'ear_upstream_errors_total', 'kind'), retries: total(endMetrics, 'ear_upstream_retries_total'),
      kvResyncs: total(endMetrics, 'ear_kv_resyncs_total'), kvGaps: total(endMetrics, 'ear_kv_gaps_total')
    },
    events, rows, idleTail,
    /** [seconds, bytes]: every sample, for plots. */
    samples: { rss, rssOutsideRegion, heap }
  };
  writeFileSync(join(out, 'summary.json'), JSON.stringify(summary, null, 2) + '\n');
  console.log(`\nsoak ${summary.pass ? 'PASS' : 'FAIL'}${reasons.length ? ': ' + reasons.join('; ') : ''}: ${sent} requests, ${failed} lost; ` +
    `RSS outside the tables' region ${summary.memory.rssMBPer10Min.toFixed(3)} MB/10 min (with it ${summary.memory.rssWithRegionMBPer10Min.toFixed(3)}), heap ${summary.memory.heapMBPer10Min.toFixed(3)} MB/10 min after ${warmup} s warm-up (limit 1${judged ? '' : `; not judged: ${Math.max(0, duration - warmup)} s after warm-up, the criterion needs ${MIN_JUDGED_S}`})`);
  console.log(JSON.stringify({ pass: summary.pass, reasons, requests: summary.requests, failures, memory: summary.memory, summary: join(out, 'summary.json') }));
  return summary.pass ? 0 : 1;
}

// Exit at once: sessions cut at the deadline still have think-time timers pending.
main().then((code) => process.exit(code), (err) => { console.error(err); process.exit(1); });
