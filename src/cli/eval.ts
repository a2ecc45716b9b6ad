// `ear eval`: one workload, every policy asked for, the same metrics and report (specs/evaluation.md).
//   ear eval --driver des|e2e --workload agentic|claude-code:DIR|mooncake:FILE --policies a,b,c --engines N
//            --profile NAME [--duration S] [--seed N] [--out DIR] [--sweep name=v1,v2,...] [--set opt=value]...
import { parseArgs } from 'node:util';
import { policyNames } from '../core/policies/index.js';
import { SCHEDULERS, type SchedulerKind } from '../core/admission.js';
import { SCHEDULER } from '../core/defaults.js';
import { runDes, type DesRunOptions } from '../eval/drivers/des.js';
import type { KvEventsMode } from '../eval/drivers/lab-routing.js';
import { runE2e } from '../eval/drivers/e2e.js';
import { E2E_APIS, isE2eApi, type E2eApi } from '../eval/drivers/api-requests.js';
import { loadWorkload, workloadStats, type Workload } from '../eval/workloads/index.js';
import { buildResults, describeWorkload, policyTable, Progress, writeReport, type PolicyResult, type Sweep } from '../eval/report/index.js';
import type { MetricsSummary } from '../eval/metrics/index.js';
import { EAR_DEFAULTS } from '../core/policies/ear.js';
import { parseTransferMode, type TransferMode } from '../migration/cost.js';
import { configFor, knobValue, policiesTaking, type PolicyKnobs } from './policy-knobs.js';
import { SCHEDULING_POLICIES, type SchedulingPolicy } from '../sim/engine.js';
import { maxPodRows } from '../config/pod-rows.js';
import { RETENTION_FIELDS } from '../config/retention.js';
import type { RetentionOptions } from '../core/retention.js';

const USAGE = `usage: ear eval [--driver des|e2e] [--workload agentic|claude-code:DIR|mooncake:FILE] [--policies|--policy a,b,c]
                [--engines N] [--profile NAME] [--duration S] [--seed N] [--out DIR] [--sweep name=v1,v2,...]
                [--set option=value]... [--time-scale X] [--api completions|chat|messages|responses]
                [--ttft-slo S] [--scheduler NAME] [--no-plots]

Runs the workload against each policy and writes results.json, report.md and PNG plots to --out.
  --policies    default: every registered policy (${policyNames().join(', ')})
  --duration    agentic: seconds of session arrivals; traces: virtual seconds after which the run stops
  --set         a workload option (e.g. --set rate=1 --set clients=4); for the engines numGpuBlocks=N and vLLM's
                scheduler flags schedulingPolicy=fcfs|priority, longPrefillTokenThreshold=N (0: no cap), and
                sendEnginePriority=true|false (the gateway tells priority engines its order; false: as a stock
                router, none); or for the
                gateway: kvEvents=approximate|precise (the index learns from routing only, or also from the engines'
                KV events); des only: kvDelayMs=N (the events' delivery delay), scrapeIntervalMs=N (engine metrics),
                kvConnectors=nixl+shared-store+recompute (what moves KV; shared-store gives the engines one shared
                offload store), kvConnector=auto|nixl|shared-store|recompute; retention.NAME=V (the gateway's
                retention settings, docs/retention.md: retention.maxShare=0.3, retention.gapFactor=3, ...)
  --scheduler   the gateway's admission scheduler: ${SCHEDULERS.join(', ')} (default ${SCHEDULER}, as ear serve's)
                its knobs with --set: levels, quantumMs, beta, maxQueued, queueTimeoutMs, prefillBudgetTokens,
                kvHighWatermark, learnLimit=0|1, holdEngineQueue=0|1 (default 1 under atlas, plas, vtc: nothing
                waits in an engine, it waits in EAR's order), maxConcurrent (per engine)
                a policy's knobs, e.g. tHot=32768, tCool=60, minGain=8192: each policy that has the
                knob gets it, the others run with their defaults
  --sweep       one flag over several values: engines, numGpuBlocks, schedulingPolicy, longPrefillTokenThreshold,
                scheduler, a scheduler knob, a policy knob
                (tHot, tCool, …) or any workload option (e.g. rate=0.25,0.5,1, turnsSigma=1.5,2,2.5 for
                the skew: the report shows each value's realised top-1% token share, or scheduler=off,fcfs,plas,atlas)
  --time-scale  e2e only: wall seconds per workload second (default 0.1)
  --api         e2e only: the API the requests go through: completions (token ids, the default), or the
                workload's tokens as text over chat (completions), messages (Anthropic, as Claude Code sends
                them) or responses (OpenAI, as Codex sends them); compare APIs with each other (evaluation.md)`;

interface Plan {
  driver: 'des' | 'e2e';
  workload: string;
  workloadOptions: Record<string, unknown>;
  policies: string[];
  engines: number;
  profile: string;
  seed: number;
  duration: number | null;
  numGpuBlocks: number | undefined;
  kvEvents: KvEventsMode;
  kvDelayMs: number | undefined;
  scrapeIntervalMs: number | undefined;
  /** KV connectors the engines offer (des: `shared-store` gives them one shared offload store), and a forced one. */
  kvConnectors: TransferMode[] | undefined;
  kvConnector: TransferMode | null;
  timeScale: number;
  /** e2e: the API the requests go through. */
  api: E2eApi;
  ttftSlo: number;
  scheduler: SchedulerKind;
  /** Admission and capacity knobs given with --set (admission.ts, capacity.ts). */
  admission: AdmissionKnobs;
  /** Policy knobs given with --set (each policy gets those it has). */
  policyKnobs: PolicyKnobs;
  /** The engines' vLLM scheduler flags given with --set. */
  engine: EngineKnobs;
  /** The gateway's retention settings given with --set retention.NAME=V (config retention). */
  retention: Partial<RetentionOptions>;
}

/** The engines' vLLM scheduler flags `--set` and `--sweep` take (vLLM's defaults when not given). */
const ENGINE_KNOBS = ['schedulingPolicy', 'longPrefillTokenThreshold', 'sendEnginePriority'] as const;
interface EngineKnobs { schedulingPolicy?: SchedulingPolicy; longPrefillTokenThreshold?: number; sendEnginePriority?: boolean }

function isEngineKnob (k: string): k is typeof ENGINE_KNOBS[number] {
  return (ENGINE_KNOBS as readonly string[]).includes(k);
}

function engineKnob (k: typeof ENGINE_KNOBS[number], v: string): EngineKnobs {
  if (k === 'schedulingPolicy') {
    if (!(SCHEDULING_POLICIES as readonly string[]).includes(v)) throw new UsageError(`--set schedulingPolicy must be one of ${SCHEDULING_POLICIES.join(', ')}, got "${v}"`);
    return { schedulingPolicy: v as SchedulingPolicy };
  }
  if (k === 'sendEnginePriority') {
    if (v !== 'true' && v !== 'false') throw new UsageError(`--set sendEnginePriority must be true or false, got "${v}"`);
    return { sendEnginePriority: v === 'true' };
  }
  return { longPrefillTokenThreshold: num(`set ${k}`, v, 0, true) };
}

/** The scheduler's knobs `--set` and `--sweep` take, as numbers. */
const ADMISSION_KNOBS = ['levels', 'quantumMs', 'beta', 'maxQueued', 'queueTimeoutMs', 'prefillBudgetTokens', 'kvHighWatermark', 'learnLimit', 'holdEngineQueue', 'maxConcurrent'] as const;
type AdmissionKnobs = Partial<Record<typeof ADMISSION_KNOBS[number], number>>;

function isKnob (k: string): k is typeof ADMISSION_KNOBS[number] {
  return (ADMISSION_KNOBS as readonly string[]).includes(k);
}

function schedulerOf (v: string): SchedulerKind {
  if (!(SCHEDULERS as readonly string[]).includes(v)) throw new UsageError(`--scheduler must be one of ${SCHEDULERS.join(', ')}, got "${v}"`);
  return v as SchedulerKind;
}

/** What a run sets on the host: the scheduler, its queue's knobs and the capacity signals. */
function admissionOf (scheduler: SchedulerKind, k: AdmissionKnobs): Pick<DesRunOptions, 'scheduler' | 'admission' | 'capacity' | 'maxConcurrent'> {
  const admission: Record<string, number> = {};
  for (const n of ['levels', 'quantumMs', 'beta', 'maxQueued', 'queueTimeoutMs'] as const) if (k[n] !== undefined) admission[n] = k[n]!;
  const capacity: Record<string, number | boolean> = {};
  for (const n of ['prefillBudgetTokens', 'kvHighWatermark'] as const) if (k[n] !== undefined) capacity[n] = k[n]!;
  if (k.learnLimit !== undefined) capacity.learnLimit = k.learnLimit > 0;
  if (k.holdEngineQueue !== undefined) capacity.holdEngineQueue = k.holdEngineQueue > 0;
  return { scheduler, admission, capacity, maxConcurrent: k.maxConcurrent };
}

class UsageError extends Error {}

/** The --set retention.NAME=V settings, checked as the gateway's config checks them; only those given. */
function retentionOf (given: Record<string, unknown>): Partial<RetentionOptions> {
  if (Object.keys(given).length === 0) return {};
  let all: Record<string, number>;
  try {
    all = RETENTION_FIELDS.retention('retention', given) as Record<string, number>;
  } catch (err) {
    throw new UsageError(`--set ${(err as Error).message.replace(/^config /, '')}`);
  }
  return Object.fromEntries(Object.keys(given).map((k) => [k, all[k]]));
}

/** Flags a sweep sets on the host or the engines, not on the workload or a policy. */
function isHostFlag (flag: string): boolean {
  return flag === 'engines' || flag === 'numGpuBlocks' || flag === 'scheduler' || isKnob(flag) || isEngineKnob(flag);
}

/** Whether some policy of the run has the knob `k` (a bad value for it is a usage error). */
function isPolicyKnob (policies: readonly string[], k: string, v: string): boolean {
  try {
    return policiesTaking(policies, k, knobValue(v)).length > 0;
  } catch (err) {
    throw new UsageError(`--set ${k}=${v}: ${(err as Error).message}`);
  }
}

function num (flag: string, v: unknown, min: number, integer = false): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n < min || (integer && !Number.isInteger(n))) throw new UsageError(`--${flag} must be ${integer ? 'an integer' : 'a number'} ≥ ${min}, got ${String(v)}`);
  return n;
}

function keyValue (flag: string, s: string): [string, string] {
  const eq = s.indexOf('=');
  if (eq <= 0) throw new UsageError(`--${flag} takes name=value, got "${s}"`);
  return [s.slice(0, eq), s.slice(eq + 1)];
}

function buildWorkload (p: Plan, over: Record<string, unknown> = {}): Workload {
  const options: Record<string, unknown> = { ...p.workloadOptions, ...over };
  if (p.workload === 'agentic') {
    options.seed ??= p.seed;
    if (p.duration !== null) options.duration ??= p.duration;
  }
  return loadWorkload(p.workload, options);
}

async function runOne (p: Plan, w: Workload, policy: string, engines: number, numGpuBlocks: number | undefined, progress: Progress, over: { scheduler?: SchedulerKind; admission?: AdmissionKnobs; policyKnobs?: PolicyKnobs; engine?: EngineKnobs } = {}): Promise<MetricsSummary> {
  const admission = admissionOf(over.scheduler ?? p.scheduler, { ...p.admission, ...over.admission });
  const engine = { ...p.engine, ...over.engine };
  const knobs = { ...p.policyKnobs, ...over.policyKnobs };
  const policyConfig = configFor(policy, knobs);
  // The collector judges thrash against the same tCool and accuracy against the same tHot as the policy acted
  // on (ear's defaults when not given; for a policy without them only its moves, if any, are measured so).
  const tCool = typeof knobs.tCool === 'number' ? knobs.tCool : EAR_DEFAULTS.tCool;
  const tHot = typeof knobs.tHot === 'number' ? knobs.tHot : EAR_DEFAULTS.tHot;
  const until = p.workload === 'agentic' ? undefined : p.duration ?? undefined;
  const onProgress = (t: number): void => progress.update(Math.round(t), until ?? Math.round(t), `${policy} (virtual ${Math.round(t)} s)`);
  if (p.driver === 'des') {
    // tHot is handed on for the collector's accuracy figure; the des driver forwards it once it takes the option
    // (typed wider so that this compiles before and after).
    const options: DesRunOptions & { tHot?: number } = {
      workload: w, policy, policyConfig, engines, profile: p.profile, seed: p.seed, numGpuBlocks, until, ttftSlo: p.ttftSlo, onProgress,
      kvEvents: p.kvEvents, kvDelayMs: p.kvDelayMs, scrapeIntervalMs: p.scrapeIntervalMs, kvConnectors: p.kvConnectors, kvConnector: p.kvConnector, tCool, tHot,
      retention: p.retention, ...admission, ...engine
    };
    return runDes(options).summary;
  }
  return (await runE2e({
    workload: w, policy, policyConfig, engines, profile: p.profile, seed: p.seed, timeScale: p.timeScale, api: p.api, until, ttftSlo: p.ttftSlo, onProgress, kvEvents: p.kvEvents,
    kvConnectors: p.kvConnectors, kvConnector: p.kvConnector, retention: p.retention, ...admission, ...engine
  })).summary;
}

export async function main (argv: string[]): Promise<number> {
  let plan: Plan;
  let out: string;
  let sweep: { flag: string; values: string[] } | null = null;
  let plots = true;
  try {
    const { values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        driver: { type: 'string', default: 'des' },
        workload: { type: 'string', default: 'agentic' },
        policies: { type: 'string' },
        policy: { type: 'string' },
        engines: { type: 'string', default: '8' },
        profile: { type: 'string', default: 'h20-qwen3-coder' },
        duration: { type: 'string' },
        seed: { type: 'string', default: '1' },
        out: { type: 'string', default: 'results' },
        sweep: { type: 'string' },
        set: { type: 'string', multiple: true },
        'time-scale': { type: 'string', default: '0.1' },
        api: { type: 'string' },
        'ttft-slo': { type: 'string', default: '2' },
        scheduler: { type: 'string', default: SCHEDULER },
        'no-plots': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' }
      }
    });
    if (values.help) {
      console.log(USAGE);
      return 0;
    }
    if (values.driver !== 'des' && values.driver !== 'e2e') throw new UsageError('--driver must be des or e2e');
    const api = values.api ?? 'completions';
    if (!isE2eApi(api)) throw new UsageError(`--api must be one of ${E2E_APIS.join(', ')}, got "${api}"`);
    if (values.api !== undefined && values.driver !== 'e2e') throw new UsageError('--api takes effect with --driver e2e only');
    const known = policyNames();
    if (values.policies !== undefined && values.policy !== undefined) throw new UsageError('--policy and --policies are the same flag: give one');
    const named = values.policies ?? values.policy;
    const policies = named ? named.split(',').map((s) => s.trim()).filter(Boolean) : known;
    for (const name of policies) if (!known.includes(name)) throw new UsageError(`unknown policy "${name}"; known: ${known.join(', ')}`);
    const workloadOptions: Record<string, unknown> = {};
    let numGpuBlocks: number | undefined;
    let kvEvents: KvEventsMode = 'approximate';
    let kvDelayMs: number | undefined;
    let scrapeIntervalMs: number | undefined;
    let kvConnectors: TransferMode[] | undefined;
    let kvConnector: TransferMode | null = null;
    const admission: AdmissionKnobs = {};
    const policyKnobs: PolicyKnobs = {};
    let engine: EngineKnobs = {};
    const retention: Record<string, unknown> = {};
    for (const s of values.set ?? []) {
      const [k, v] = keyValue('set', s);
      if (k.startsWith('retention.')) retention[k.slice('retention.'.length)] = v;
      else if (k === 'numGpuBlocks') numGpuBlocks = num('set numGpuBlocks', v, 1, true);
      else if (k === 'kvEvents') {
        if (v !== 'approximate' && v !== 'precise') throw new UsageError(`--set kvEvents must be approximate or precise, got "${v}"`);
        kvEvents = v;
      } else if (k === 'kvDelayMs') kvDelayMs = num('set kvDelayMs', v, 0);
      else if (k === 'scrapeIntervalMs') scrapeIntervalMs = num('set scrapeIntervalMs', v, 1);
      else if (k === 'kvConnectors') {
        // '+' between names: ',' separates a sweep's values.
        try { kvConnectors = v.split('+').map((m) => parseTransferMode(m.trim())); } catch (err) { throw new UsageError(`--set kvConnectors: ${(err as Error).message}`); }
      } else if (k === 'kvConnector') {
        try { kvConnector = v === 'auto' ? null : parseTransferMode(v); } catch (err) { throw new UsageError(`--set kvConnector: ${(err as Error).message}`); }
      }
      else if (isKnob(k)) admission[k] = num(`set ${k}`, v, 0);
      else if (isEngineKnob(k)) engine = { ...engine, ...engineKnob(k, v) };
      else if (isPolicyKnob(policies, k, v)) {
        policyKnobs[k] = knobValue(v);
      } else workloadOptions[k] = v;
    }
    plan = {
      driver: values.driver,
      workload: values.workload!,
      workloadOptions,
      policies,
      engines: num('engines', values.engines, 1, true),
      profile: values.profile!,
      seed: num('seed', values.seed, 0, true),
      duration: values.duration === undefined ? null : num('duration', values.duration, 1),
      numGpuBlocks,
      kvEvents,
      kvDelayMs,
      scrapeIntervalMs,
      kvConnectors,
      kvConnector,
      timeScale: num('time-scale', values['time-scale'], 0.001),
      api,
      ttftSlo: num('ttft-slo', values['ttft-slo'], 0),
      scheduler: schedulerOf(values.scheduler!),
      admission,
      policyKnobs,
      engine,
      retention: retentionOf(retention)
    };
    if (plan.engines > maxPodRows()) throw new UsageError(`--engines must be at most ${maxPodRows()} (the pod rows' bound, asm/layout.ts POD_ROWS_MAX)`);
    out = values.out!;
    plots = !values['no-plots'];
    if (values.sweep) {
      const [flag, list] = keyValue('sweep', values.sweep);
      const vs = list.split(',').filter(Boolean);
      if (vs.length < 2) throw new UsageError('--sweep needs at least two values');
      sweep = { flag, values: vs };
      if (flag === 'scheduler') for (const v of vs) schedulerOf(v);
      if (isEngineKnob(flag)) for (const v of vs) engineKnob(flag, v);
      if (!isHostFlag(flag) && vs.some((v) => isPolicyKnob(plan.policies, flag, v))) {
        if (!vs.every((v) => isPolicyKnob(plan.policies, flag, v))) throw new UsageError(`--sweep ${flag}: every value must be valid for the policies that take it`);
      }
    }
    buildWorkload(plan); // validates the workload and its options before any run starts
  } catch (err) {
    if (err instanceof UsageError || /workload|unknown option|must be/.test((err as Error).message)) {
      console.error(`ear eval: ${(err as Error).message}\n\n${USAGE}`);
      return 2;
    }
    throw err;
  }

  const w = buildWorkload(plan);
  const stats = workloadStats(w);
  console.log(`workload ${plan.workload} as realised: ${describeWorkload(stats)}`);
  const progress = new Progress({ label: `eval ${plan.driver} ${plan.workload}` });
  const results: PolicyResult[] = [];
  for (const policy of plan.policies) {
    results.push({ policy, metrics: await runOne(plan, w, policy, plan.engines, plan.numGpuBlocks, progress) });
  }
  const sweeps: Sweep[] = [];
  if (sweep) {
    const s: Sweep = { flag: sweep.flag, points: [] };
    for (const v of sweep.values) {
      const engines = sweep.flag === 'engines' ? num('sweep engines', v, 1, true) : plan.engines;
      const blocks = sweep.flag === 'numGpuBlocks' ? num('sweep numGpuBlocks', v, 1, true) : plan.numGpuBlocks;
      const policyKnob = !isHostFlag(sweep.flag) && isPolicyKnob(plan.policies, sweep.flag, v);
      const onHost = isHostFlag(sweep.flag) || policyKnob;
      const wv = onHost ? w : buildWorkload(plan, { [sweep.flag]: v });
      // A rebuilt workload's realised skew: a sweep of turnsSigma is read as a sweep of the top-1% share.
      const realised = onHost ? undefined : { top1PctTokenShare: workloadStats(wv).top1PctTokenShare };
      const over = sweep.flag === 'scheduler' ? { scheduler: v as SchedulerKind }
        : isKnob(sweep.flag) ? { admission: { [sweep.flag]: num(`sweep ${sweep.flag}`, v, 0) } }
          : isEngineKnob(sweep.flag) ? { engine: engineKnob(sweep.flag, v) }
          : policyKnob ? { policyKnobs: { [sweep.flag]: knobValue(v) } } : {};
      for (const policy of plan.policies) {
        s.points.push({ value: Number.isFinite(Number(v)) ? Number(v) : v, policy, metrics: await runOne(plan, wv, policy, engines, blocks, progress, over), ...(realised ? { realised } : {}) });
      }
    }
    sweeps.push(s);
  }
  progress.finish();
  const config = {
    driver: plan.driver, workload: plan.workload, workloadOptions: w.config, policies: plan.policies, engines: plan.engines,
    profile: plan.profile, seed: plan.seed, duration: plan.duration, numGpuBlocks: plan.numGpuBlocks ?? null,
    kvEvents: plan.kvEvents, kvDelayMs: plan.kvDelayMs ?? null, scrapeIntervalMs: plan.scrapeIntervalMs ?? null,
    scheduler: plan.scheduler, admission: plan.admission, engine: plan.engine,
    policyKnobs: Object.fromEntries(plan.policies.map((p) => [p, configFor(p, plan.policyKnobs)])),
    timeScale: plan.driver === 'e2e' ? plan.timeScale : null, api: plan.driver === 'e2e' ? plan.api : null, ttftSlo: plan.ttftSlo, sweep, command: `ear eval ${argv.join(' ')}`
  };
  const files = await writeReport(out, buildResults({ config, policies: results, sweeps, workload: stats }), { plots });
  console.log(policyTable(results));
  console.log(`\nwrote ${files.length} files to ${out}/`);
  return 0;
}
