// The `des` driver: K engines from the simulator's core on one virtual clock (src/sim/des.ts), the routing
// core called in-process through the same Router, policies and WASM tables as the gateway, and the workload
// runner issuing requests as the workload's closed or open loop says. Deterministic for a seed.
import { createAndAttach } from '../../core/region.js';
import { BlockHasher } from '../../core/block-keys.js';
import { PrefixIndexWriter } from '../../core/prefix-index.js';
import { LoadTable } from '../../core/load-table.js';
import { SessionTable } from '../../core/session-table.js';
import { SessionKeys } from '../../core/session-key.js';
import { Router, type RouteRequest } from '../../core/router.js';
import { createPolicy } from '../../core/policies/index.js';
import type { PodView } from '../../core/policy.js';
import { DesHost } from '../../sim/des.js';
import { loadProfile, resolveProfile } from '../../sim/profile.js';
import type { BlockDigest } from '../../sim/block-hash.js';
import { ApcBound, MetricsCollector, failureCause, type MetricsSummary } from '../metrics/index.js';
import { replay, SessionPrompt, requestId, type Workload } from '../workloads/index.js';
import { runWorkload } from '../workloads/runner.js';
import { isolatedServiceTime } from './isolated.js';

export interface DesRunOptions {
  workload: Workload;
  policy: string;
  policyConfig?: Record<string, unknown>;
  engines: number;
  profile: string;
  seed: number;
  /** Overrides the profile's KV capacity per engine (sensitivity sweeps). */
  numGpuBlocks?: number;
  /** Virtual seconds after which the run stops (requests still open are counted incomplete). */
  until?: number;
  ttftSlo?: number;
  tCool?: number;
  /** Assumed entries in the index expire after this long (ms): 20 min, EAR's approximate mode. */
  assumedTtlMs?: number;
  /** Called every virtual second with the time (progress display). */
  onProgress?: (t: number) => void;
}

export interface DesRunResult {
  summary: MetricsSummary;
  wallSeconds: number;
  virtualSeconds: number;
}

const SAMPLE_EVERY = 0.1;

export function runDes (o: DesRunOptions): DesRunResult {
  const wall0 = performance.now();
  const w = o.workload;
  const profile = loadProfile(o.profile);
  const resolved = resolveProfile(profile, { numGpuBlocks: o.numGpuBlocks });
  const des = new DesHost({ seed: o.seed });
  for (let i = 0; i < o.engines; i++) des.addEngine({ profile, numGpuBlocks: o.numGpuBlocks });
  const engineHasher = des.engines[0].hasher;

  const region = createAndAttach({ pods: Math.max(8, o.engines), sessions: 1 << 16, scratchSlots: 8 });
  const index = new PrefixIndexWriter(region);
  const load = new LoadTable(region);
  const sessions = new SessionTable(region);
  const scratch = region.claimScratch();
  const sessionKeys = new SessionKeys(region, { ptr: scratch.ptr, bytes: 4096 });
  const keyHasher = new BlockHasher(region);
  const root = keyHasher.rootSeed('des');
  const assumed = index.kind.assumed;
  const router = new Router({ index, load, sessions }, createPolicy(o.policy, o.policyConfig ?? {}), {
    sessionTtlMs: 30 * 60_000,
    record: (pod, keys, nowMs) => { index.insertMany(keys, pod, assumed, nowMs); }
  });
  const pods: PodView[] = Array.from({ length: o.engines }, (_, i) => ({ index: i, id: `engine-${i}`, role: 'both', blockSize: resolved.blockSize, kvCapacityBlocks: resolved.numGpuBlocks }));
  const metrics = new MetricsCollector({ engines: o.engines, blockSize: w.blockSize, ttftSlo: o.ttftSlo, tCool: o.tCool });

  // Per session: its prompt builder and the engine-side block digests of its last prompt (reused when a turn
  // extends it, so a 33.6k-token prompt is not re-hashed with sha256 every turn).
  const prompts = new Map<string, SessionPrompt>();
  const digests = new Map<string, BlockDigest[]>();
  const isolated = new Map<string, number>();
  const ideal = new ApcBound(w.blockSize);
  let open = 0;
  let issued = 0;

  runWorkload(w, des, (d, done) => {
    let sp = prompts.get(d.sessionId);
    if (!sp) prompts.set(d.sessionId, (sp = new SessionPrompt(w.seed, w.blockSize)));
    const prevTokens = sp.tokens.length;
    const { tokens, blocks } = sp.advance(d.spec);
    const kept = Math.min(prevTokens, d.spec.keepBlocks * w.blockSize, tokens.length);
    const prevDigests = digests.get(d.sessionId) ?? [];
    const dg = engineHasher.extend(prevDigests.slice(0, Math.floor(kept / resolved.blockSize)), tokens, null, null);
    digests.set(d.sessionId, dg);
    const id = requestId(d.sessionId, d.turn);
    // Ideal: an idle engine holding every prefix this prompt could reuse (one infinite cache's hit).
    isolated.set(id, isolatedServiceTime(profile, tokens.length, ideal.observe(d.rootSessionId, blocks, tokens.length).all, d.outputTokens));

    const keys = keyHasher.hash(tokens, resolved.blockSize, root);
    const req: RouteRequest = {
      model: 'des', sessionKey: sessionKeys.key(d.sessionId),
      parentSessionKey: d.parentId === null ? null : sessionKeys.key(d.parentId),
      promptTokens: tokens.length, keys, blockSize: resolved.blockSize, expectedOutputTokens: d.outputTokens
    };
    const nowMs = d.at * 1000;
    const t0 = performance.now();
    const routed = router.route(req, pods, nowMs, des.random());
    metrics.routingDecision((performance.now() - t0) / 1000);
    router.dispatched(routed, req, nowMs);
    metrics.requestSent({ id, sessionId: d.sessionId, rootSessionId: d.rootSessionId, at: d.at, promptTokens: tokens.length, blocks });
    open++;
    issued++;
    let sawFirst = false;
    des.submit(routed.pod, {
      id, promptTokenIds: tokens, maxTokens: d.outputTokens, minTokens: 0, ignoreEos: true, stopTokenIds: [],
      loraName: null, cacheSalt: null, seed: o.seed ^ issued, arrivalTime: d.at, blockHashes: dg
    }, d.at, {
      onFirstToken: (t) => {
        sawFirst = true;
        router.firstToken(routed);
        metrics.firstToken(id, t);
      },
      onFinish: (t, out) => {
        open--;
        const outTokens = out.metrics?.numGenerationTokens ?? d.outputTokens;
        router.finished(routed, req, { sawFirstToken: sawFirst, contextTokens: tokens.length + outTokens, serviceMs: (t - d.at) * 1000 }, t * 1000);
        metrics.requestFinished(id, { at: t, cachedTokens: out.numCachedTokens, outputTokens: outTokens });
        done(t);
      },
      onError: (t, err) => {
        open--;
        router.finished(routed, req, { sawFirstToken: sawFirst, contextTokens: null, serviceMs: 0 }, t * 1000);
        metrics.requestFailed(id, t, failureCause(err));
        done(t);
      }
    });
  }, { sessionDone: (rootId, _start, end) => metrics.sessionDone(rootId, end) });

  // Every 100 ms of virtual time: per-engine pending prefill (hotspot index), index upkeep, progress.
  const sample = (t: number): void => {
    metrics.pendingPrefill(t, des.engines.map((e) => e.stats().pendingPrefillTokens));
    index.expireAssumed(t * 1000, o.assumedTtlMs ?? 20 * 60_000, 4096);
    if (o.onProgress && Math.floor(t) !== Math.floor(t - SAMPLE_EVERY)) o.onProgress(t);
    if (open > 0 || des.pendingEvents > 0) des.at(t + SAMPLE_EVERY, sample);
  };
  des.at(0, sample);
  des.run(o.until ?? Infinity);

  const idealRun = replay(w, (sessionId, turn) => isolated.get(requestId(sessionId, turn)) ?? 0);
  return { summary: metrics.summary({ idealMakespan: idealRun.makespan, idealSessionCompletion: idealRun.sessionCompletion }), wallSeconds: (performance.now() - wall0) / 1000, virtualSeconds: des.now };
}
