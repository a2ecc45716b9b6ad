// The `des` driver: K engines from the simulator's core on one virtual clock (src/sim/des.ts), the gateway's
// routing host called in-process through LabRouting (the same host, policies and WASM tables as the gateway,
// fed engine load and index updates as the gateway is), and the workload runner issuing requests as the
// workload's closed or open loop says. Deterministic for a seed.
import { createAndAttach } from '../../core/region.js';
import { BlockHasher, copyKeys } from '../../core/block-keys.js';
import { createPolicy } from '../../core/policies/index.js';
import type { UserUsageOptions } from '../../core/user-usage.js';
import { DesHost } from '../../sim/des.js';
import { KV_CONNECTORS, MAX_SESSIONS, METRICS_INTERVAL_MS, PROACTIVE_INTERVAL_MS, SCHEDULER, UPKEEP_EVERY_MS } from '../../core/defaults.js';
import { LabRouting, type KvEventsMode } from './lab-routing.js';
import type { Placement, RoutingHostOptions } from '../../core/routing-host.js';
import type { RetentionStats } from '../../core/retention.js';
import type { AdmissionStats, AdmissionWaiter } from '../../core/admission-control.js';
import { DesKvEventFeed, type DesKvFeedStats } from './des-kv-events.js';
import { loadProfile, resolveProfile } from '../../engine-model/profile.js';
import { exportLeg } from './des-nixl.js';
import type { KvImport } from '../../sim/engine-types.js';
import type { SchedulingPolicy } from '../../sim/engine.js';
import { TransferCosts, type TransferMode } from '../../migration/cost.js';
import type { BlockDigest } from '../../sim/block-hash.js';
import { ApcBound, MetricsCollector, failureCause, type MetricsSummary } from '../metrics/index.js';
import { replay, SessionPrompt, requestId, type Workload } from '../workloads/index.js';
import { runWorkload } from '../workloads/runner.js';
import { isolatedServiceTime, isolatedTtft } from './isolated.js';
import { OffloadStore } from '../../sim/offload-store.js';
import { DesProactive } from './des-proactive.js';
import { readEarProactiveKnobs } from '../../core/policies/ear.js';
import { priorityToSend, type EnginePriorityKind } from '../../core/engine-priority.js';

export interface DesRunOptions {
  workload: Workload;
  policy: string;
  policyConfig?: Record<string, unknown>;
  /** The per-user token window (the gateway's userWindow); default as the gateway's. */
  userWindow?: UserUsageOptions;
  engines: number;
  profile: string;
  seed: number;
  /** Overrides the profile's KV capacity per engine (sensitivity sweeps). */
  numGpuBlocks?: number;
  /** The engines' vLLM scheduler flags (--scheduling-policy, --long-prefill-token-threshold); vLLM's defaults if not given. */
  schedulingPolicy?: SchedulingPolicy;
  longPrefillTokenThreshold?: number;
  /**
   * Whether the lab's gateway tells priority engines its order (a backend's `priority=vllm`), as the gateway
   * does: default true, and it matters only with schedulingPolicy priority. False: it sends none, as a stock
   * router does (baselines).
   */
  sendEnginePriority?: boolean;
  /** Virtual seconds after which the run stops (requests still open are counted incomplete). */
  until?: number;
  ttftSlo?: number;
  tCool?: number;
  /** The policy's tHot (tokens): the collector judges a move accurate if its target stays at or below it. */
  tHot?: number;
  /** Where the index learns from: routing decisions only (default), or also the engines' KV events. */
  kvEvents?: KvEventsMode;
  /** Precise mode: an engine's KV events reach the index this long after its step (ms of virtual time). */
  kvDelayMs?: number;
  /** Assumed entries in the index expire after this long (ms); default as the gateway picks it for the mode. */
  assumedTtlMs?: number;
  /** The engines' figures reach the router this often (ms of virtual time, on the sampling tick of UPKEEP_EVERY_MS); default the gateway's metricsIntervalMs. */
  scrapeIntervalMs?: number;
  /** The gateway's admission scheduler (default the gateway's, SCHEDULER) and its knobs. */
  scheduler?: RoutingHostOptions['scheduler'];
  admission?: RoutingHostOptions['admission'];
  capacity?: RoutingHostOptions['capacity'];
  /** Retention of tool-gap prefixes (the gateway's config retention); default retention.ts's. */
  retention?: RoutingHostOptions['retention'];
  /** Requests in flight each engine may hold (the gateway's per-backend maxConcurrent); none by default. */
  maxConcurrent?: number;
  /** KV connectors the engines offer (default the gateway's) and a forced one (default: by estimated cost). */
  kvConnectors?: TransferMode[];
  kvConnector?: TransferMode | null;
  /** Called every virtual second with the time (progress display). */
  onProgress?: (t: number) => void;
  /** Virtual seconds with requests open and no event but the sampler after which the run is given up as stalled
   *  (those requests fail as `stalled`); default 24 h. Nothing in a healthy run waits that long. */
  stallLimit?: number;
  /** Where the stall warning goes (default console.warn). */
  onWarning?: (message: string) => void;
}

/** A run given up because nothing could progress: when, and the requests left open with where each was. */
export interface DesStall {
  at: number;
  idleSeconds: number;
  requests: Array<{ id: string; where: string }>;
}

export interface DesRunResult {
  summary: MetricsSummary;
  /** Where the index learned from, and in precise mode what the engines' events brought. */
  kvEvents: { mode: KvEventsMode; feed: DesKvFeedStats | null };
  /** The admission queue at the end of the run (longest wait, promotions, limits learned). */
  admission: AdmissionStats;
  wallSeconds: number;
  virtualSeconds: number;
  /** Set when the run was given up as stalled (see stallLimit); null otherwise. */
  stall: DesStall | null;
  /** What the engines did to their KV, summed: running requests preempted, cached blocks evicted. */
  engineKv: { preemptions: number; evictions: number };
  /**
   * Retention at the end of the run: records made, how they ended, and the retained prefixes the engines evicted
   * while their record was live (seen through the KV events: precise mode only; 0 in approximate mode), and the
   * requests admission routed again because retained prefixes took their pod's room while they waited.
   */
  retention: RetentionStats & { reroutes: number };
}

/** The sampler's period (s): the gateway's upkeep (host tick, index expiry), and the pending-prefill samples. */
const SAMPLE_EVERY = UPKEEP_EVERY_MS / 1000;
const STALL_LIMIT = 24 * 3600;
/** Open requests named in the stall warning (all are counted). */
const STALL_NAMED = 20;
/** The model name the lab's requests carry and its engines serve. */
const MODEL = 'des';

export function runDes (o: DesRunOptions): DesRunResult {
  const wall0 = performance.now();
  const w = o.workload;
  const profile = loadProfile(o.profile);
  const resolved = resolveProfile(profile, { numGpuBlocks: o.numGpuBlocks });
  const des = new DesHost({ seed: o.seed });
  const kvConnectors: readonly TransferMode[] = o.kvConnectors ?? KV_CONNECTORS;
  // Engines that offer the shared-store connector share one offload store (LMCache / Mooncake with a remote
  // backend): 2^20 blocks (16M tokens at block size 16), a cluster's CPU-memory pool, well beyond the engines' KV.
  const offloadStore = kvConnectors.includes('shared-store') ? new OffloadStore(1 << 20) : null;
  for (let i = 0; i < o.engines; i++) {
    des.addEngine({ profile, numGpuBlocks: o.numGpuBlocks, offloadStore, schedulingPolicy: o.schedulingPolicy, longPrefillTokenThreshold: o.longPrefillTokenThreshold });
  }
  const engineHasher = des.engines[0].hasher;

  const region = createAndAttach({ pods: Math.max(8, o.engines), sessions: MAX_SESSIONS, scratchSlots: 16 });
  const lab = new LabRouting(region, {
    policy: createPolicy(o.policy, o.policyConfig ?? {}), engines: o.engines, model: MODEL, blockSize: resolved.blockSize,
    kvEvents: o.kvEvents ?? 'approximate', random: () => des.random(), assumedTtlMs: o.assumedTtlMs,
    scheduler: o.scheduler ?? SCHEDULER, admission: o.admission, capacity: o.capacity, users: o.userWindow, retention: o.retention
  });
  if (o.maxConcurrent) for (let i = 0; i < o.engines; i++) lab.host.admission.setMaxConcurrent(i, o.maxConcurrent);
  const feed = lab.kvEvents === 'precise' ? new DesKvEventFeed({ writer: lab.writer, blockSize: resolved.blockSize, model: MODEL, deliveryDelayMs: o.kvDelayMs }).attach(des) : null;
  const keyHasher = new BlockHasher(region);
  const root = keyHasher.rootSeed(MODEL);
  const scrapeEvery = (o.scrapeIntervalMs ?? METRICS_INTERVAL_MS) / 1000;
  const transfers = new TransferCosts(profile, kvConnectors, o.kvConnector ?? null);
  // The engines are vLLM's: under --scheduling-policy priority each is a backend with priority=vllm.
  const enginePriority: EnginePriorityKind | null = o.schedulingPolicy === 'priority' && o.sendEnginePriority !== false ? 'vllm' : null;
  // The lab's requests are chat completions (their API takes `priority`), as the gateway's mapping is told.
  const urgent = priorityToSend(enginePriority, true, 'urgent') ?? undefined;
  const metrics = new MetricsCollector({ engines: o.engines, blockSize: w.blockSize, ttftSlo: o.ttftSlo, tCool: o.tCool, tHot: o.tHot });
  const proactive = o.policy === 'ear-proactive'
    ? new DesProactive({ des, lab, transfers, profile: resolved, knobs: readEarProactiveKnobs(o.policyConfig ?? {}), model: MODEL, metrics, intervalMs: PROACTIVE_INTERVAL_MS, enginePriority })
    : null;

  // Per session: its prompt builder and the engine-side block digests of its last prompt (reused when a turn
  // extends it, so a 33.6k-token prompt is not re-hashed with sha256 every turn).
  const prompts = new Map<string, SessionPrompt>();
  const digests = new Map<string, BlockDigest[]>();
  const isolated = new Map<string, number>();
  // Per session: the tokens of its last computed prompt an engine could hold (whole engine blocks), for `recompute`.
  const computed = new Map<string, number>();
  const ideal = new ApcBound(w.blockSize);
  let open = 0;
  let issued = 0;
  // Where each open request is, for the stall warning (bounded by the workload's requests).
  const where = new Map<string, string>();

  runWorkload(w, des, (d, done) => {
    let sp = prompts.get(d.sessionId);
    if (!sp) prompts.set(d.sessionId, (sp = new SessionPrompt(w.seed, w.blockSize)));
    const prevTokens = sp.tokens.length;
    const { tokens, blocks } = sp.advance(d.spec);
    const kept = Math.min(prevTokens, d.spec.keepBlocks * w.blockSize, tokens.length);
    const prevDigests = digests.get(d.sessionId) ?? [];
    const dg = engineHasher.extend(prevDigests.slice(0, Math.floor(kept / resolved.blockSize)), tokens, null, null);
    digests.set(d.sessionId, dg);
    proactive?.noteTurn(d.sessionId, tokens, dg);
    const id = requestId(d.sessionId, d.turn);
    // Ideal: an idle engine holding every prefix this prompt could reuse (one infinite cache's hit).
    const reusable = ideal.observe(d.rootSessionId, blocks, tokens.length).all;
    isolated.set(id, isolatedServiceTime(profile, tokens.length, reusable, d.outputTokens));

    const span = keyHasher.hash(tokens, resolved.blockSize, root);
    // A copy: the hasher's output area is reused by the next request, and this one may wait in the queue.
    const req = {
      model: MODEL, sessionId: d.sessionId, parentSessionId: d.parentId,
      promptTokens: tokens.length, blockKeys: copyKeys(new BigUint64Array(region.memory.buffer, span.ptr, span.count)), maxTokens: d.outputTokens,
      // Workloads name no users: a root session (an agent run with its sub-agents) stands for one user, so
      // fairness policies see one user per run, as a gateway would if each run sent its own OpenAI `user`.
      user: d.rootSessionId
    };
    const nowMs = d.at * 1000;
    where.set(id, `gateway queue since ${d.at.toFixed(1)} s`);
    const held = Math.floor(Math.min(kept, computed.get(d.sessionId) ?? 0) / resolved.blockSize) * resolved.blockSize;
    metrics.requestSent({ id, sessionId: d.sessionId, rootSessionId: d.rootSessionId, at: d.at, promptTokens: tokens.length, blocks, idealTtft: isolatedTtft(profile, tokens.length, reusable), heldTokens: held });
    open++;
    issued++;
    const seed = o.seed ^ issued;
    // The request itself, on its pod; `kvImport` when a connector's source leg left KV for it to pull.
    const run = (routed: Placement, t: number, kvImport: KvImport | null, arrived: ((ft: number) => void) | null): void => {
      where.set(id, `engine ${routed.pod} since ${t.toFixed(1)} s${kvImport === null ? '' : ' (KV import)'}`);
      des.submit(routed.pod, {
        id, promptTokenIds: tokens, maxTokens: d.outputTokens, minTokens: 0, ignoreEos: true, stopTokenIds: [],
        loraName: null, cacheSalt: null, seed, arrivalTime: t, blockHashes: dg, kvImport,
        // As the gateway's pipeline writes it (src/request/engine-priority.ts): where admission ranked it.
        priority: priorityToSend(enginePriority, true, routed.rank) ?? undefined
      }, t, {
        onFirstToken: (ft) => {
          computed.set(d.sessionId, tokens.length);
          arrived?.(ft);
          lab.firstToken(routed, ft * 1000);
          metrics.firstToken(id, ft);
        },
        onFinish: (ft, out) => {
          open--;
          where.delete(id);
          const outTokens = out.metrics?.numGenerationTokens ?? d.outputTokens;
          lab.finished(routed, { promptTokens: tokens.length, completionTokens: outTokens, toolCall: d.toolCall }, ft * 1000);
          const m = out.metrics;
          metrics.requestFinished(id, { at: ft, cachedTokens: out.numCachedTokens, outputTokens: outTokens, engineQueue: m === undefined ? undefined : m.firstScheduledTime - m.arrivalTime });
          done(ft);
        },
        onError: (ft, err) => {
          open--;
          where.delete(id);
          arrived?.(ft);
          lab.finished(routed, null, ft * 1000);
          metrics.requestFailed(id, ft, failureCause(err));
          done(ft);
        }
      });
    };
    // As the gateway's kv-transfer-step.ts: a placement that names a KV source runs the connector chosen by
    // the same cost estimate; nixl is the export leg on the source engine (one token, blocks held), then the
    // request pulls them on its target. A failed source leg puts a migrating session back on its source.
    const send = (routed: Placement, t: number): void => {
      lab.sent();
      const from = routed.transferFrom;
      if (from === null || from === routed.pod) return run(routed, t, null, null);
      const migrating = routed.migrateFrom !== null;
      // As kv-transfer-step.ts: a priority source runs the leg ahead of its waiting queue (cost.ts).
      const backlog = { pending: lab.host.load.pendingPrefill(from), running: lab.host.load.running(from), waiting: lab.host.load.waiting(from), priority: enginePriority !== null };
      const choice = transfers.choose(tokens.length, backlog);
      const moved = (mode: TransferMode, ok: boolean, at: number, transferTime: number, bytes: number, exportWait?: number): void => {
        // At the decision's time, the one the session table keeps as its last migration (thrash is judged on it):
        // under the engine-queue hold a placement may be dispatched long after it was decided.
        if (migrating) metrics.migration({ at: ok ? routed.decidedAt / 1000 : at, sessionId: d.sessionId, from, to: routed.pod, tokens: ok ? tokens.length : 0, bytes, transferTime, mode, ok, exportWait });
      };
      const ended = (ft: number): void => { if (migrating) lab.host.migrationEnded(routed, true, ft * 1000); };
      if (choice.mode !== 'nixl') {
        moved(choice.mode, true, t, choice.seconds, choice.mode === 'recompute' ? 0 : transfers.bytes(tokens.length));
        return run(routed, t, null, migrating ? ended : null);
      }
      where.set(id, `NIXL export leg on engine ${from} for engine ${routed.pod} since ${t.toFixed(1)} s`);
      // Defined before the leg starts: an engine that refuses the export (a prompt past max_model_len) fails it
      // inside exportLeg, before it returns.
      const failed = (xt: number): void => {
        moved('nixl', false, xt, xt - t, 0);
        const back = migrating ? lab.host.migrationEnded(routed, false, xt * 1000) : null;
        if (back === null) return run(routed, xt, null, null);
        lab.dispatched(back, xt * 1000);
        run(back, xt, null, null);
      };
      exportLeg(des, resolved, from, {
        id: `${id}#export`, promptTokenIds: tokens, minTokens: 0, ignoreEos: true, stopTokenIds: [],
        loraName: null, cacheSalt: null, seed, arrivalTime: t, blockHashes: dg, priority: urgent
      }, t, {
        held: (xt, kvImport, pull, waited) => {
          transfers.observeExport(xt - t, backlog);
          moved('nixl', true, xt, xt - t + pull, transfers.bytes(kvImport.prefixTokenIds.length), waited);
          run(routed, xt, kvImport, migrating ? ended : null);
        },
        failed
      });
    };
    const waiter: AdmissionWaiter = {
      released: (p, info) => {
        metrics.admitted(info.waitMs / 1000);
        send(p, info.now / 1000);
      },
      dropped: (reason, now) => {
        open--;
        where.delete(id);
        metrics.requestFailed(id, now / 1000, reason === 'timeout' ? 'queue_timeout' : reason);
        done(now / 1000);
      }
    };
    const t0 = performance.now();
    const placed = lab.submit(req, waiter, nowMs);
    metrics.routingDecision((performance.now() - t0) / 1000);
    if ('pod' in placed) {
      metrics.admitted(0);
      send(placed, d.at);
    }
  }, { sessionDone: (rootId, _start, end) => metrics.sessionDone(rootId, end) });

  // The gateway's scrape of every engine's /metrics, on its interval (the first right at start).
  let nextScrape = 0;
  const scrape = (t: number): void => {
    for (let i = 0; i < des.engines.length; i++) {
      const s = des.engines[i].stats();
      lab.engineReport(i, { running: s.running, waiting: s.waiting, kvUsage: s.kvUsage, numGpuBlocks: s.numGpuBlocks }, t * 1000);
    }
    nextScrape = t + scrapeEvery;
  };
  // A latent bug (a request no engine will ever step, a transfer that never ends) must show as a failure, not a
  // hang: with requests open and no event but this sampler for stallLimit seconds, the run ends and they fail.
  const stallLimit = o.stallLimit ?? STALL_LIMIT;
  let stall: DesStall | null = null;
  let lastEvents = 0;
  let lastProgress = 0;
  const stalled = (t: number): boolean => {
    const others = des.events - lastEvents - 1;
    lastEvents = des.events;
    if (others > 0 || open === 0) lastProgress = t;
    if (t - lastProgress < stallLimit) return false;
    stall = { at: t, idleSeconds: t - lastProgress, requests: [...where].map(([id, at]) => ({ id, where: at })) };
    for (const r of stall.requests) metrics.requestFailed(r.id, t, 'stalled');
    const named = stall.requests.slice(0, STALL_NAMED).map((r) => `${r.id} (${r.where})`).join(', ');
    const more = stall.requests.length > STALL_NAMED ? ` and ${stall.requests.length - STALL_NAMED} more` : '';
    (o.onWarning ?? ((m: string) => console.warn(m)))(`des: run stalled at virtual ${t.toFixed(0)} s: nothing but the sampler for ${stall.idleSeconds.toFixed(0)} s ` +
      `with ${stall.requests.length} request(s) open, counted as failed (stalled): ${named}${more}`);
    des.stop();
    return true;
  };
  // One periodic timer (two would keep each other alive): a scrape when due, and every SAMPLE_EVERY of virtual
  // time per-engine pending prefill (hotspot index), the host's and the index writer's upkeep, progress.
  const sample = (t: number): void => {
    if (stalled(t)) return;
    if (t >= nextScrape - 1e-9) scrape(t);
    metrics.pendingPrefill(t, des.engines.map((e) => e.stats().pendingPrefillTokens));
    lab.upkeep(t * 1000);
    proactive?.tick(t);
    if (o.onProgress && Math.floor(t) !== Math.floor(t - SAMPLE_EVERY)) o.onProgress(t);
    if (open > 0 || des.pendingEvents > 0) des.at(t + SAMPLE_EVERY, sample);
  };
  des.at(0, sample);
  des.run(o.until ?? Infinity);

  const idealRun = replay(w, (sessionId, turn) => isolated.get(requestId(sessionId, turn)) ?? 0);
  return {
    summary: metrics.summary({ idealMakespan: idealRun.makespan, idealSessionCompletion: idealRun.sessionCompletion }),
    kvEvents: { mode: lab.kvEvents, feed: feed?.stats() ?? null }, admission: lab.host.admission.admissionStats(des.now * 1000), wallSeconds: (performance.now() - wall0) / 1000, virtualSeconds: des.now,
    stall,
    engineKv: {
      preemptions: des.engines.reduce((n, e) => n + e.stats().preemptions, 0),
      evictions: des.engines.reduce((n, e) => n + e.pool.evictions, 0)
    },
    retention: { ...lab.host.retention.stats(), reroutes: lab.host.admission.retentionReroutes }
  };
}
