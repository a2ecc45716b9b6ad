// The `e2e` driver: the real gateway (`ear serve`, its own process) in front of K real simulated engines on
// loopback, driven over HTTP with streaming responses. Engines and think times share one time scale, so a
// 600 s workload takes 600 × scale wall seconds; every time the metrics see is unscaled (workload seconds).
// The engines run in this process (startSim) so the driver can sample their pending prefill every 100 ms;
// the gateway runs apart so its event loop is its own. Requests go as token ids to /v1/completions, or
// (`api`) as the text an agent sends to chat completions, Anthropic Messages or OpenAI Responses: the same
// blocks as text (token-text.ts), a session as one conversation (conversation.ts), the agents' own headers
// (api-requests.ts).
import { RETENTION_DEFAULTS } from '../../core/retention.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { ADMISSION_DEFAULTS } from '../../core/admission.js';
import { SCHEDULER } from '../../core/defaults.js';
import type { RoutingHostOptions } from '../../core/routing-host.js';
import { POD_ROWS_DEFAULTS } from '../../config/pod-rows.js';
import { Agent, request } from 'undici';
import pino from 'pino';
import { startSim, type SimServer } from '../../sim/server.js';
import type { SchedulingPolicy } from '../../sim/engine.js';
import type { TransferMode } from '../../migration/cost.js';
import { ApcBound, MetricsCollector, failureCause, type MetricsSummary } from '../metrics/index.js';
import { allSessions, replay, SessionPrompt, requestId, type OpenRequest, type Workload } from '../workloads/index.js';
import { Conversation } from '../workloads/conversation.js';
import { TokenText } from '../workloads/token-text.js';
import { createTokenizer } from '../../tokenize/index.js';
import { textRequest, type ApiRequest, type E2eApi } from './api-requests.js';
import { readStream } from './api-streams.js';
import { runWorkload, type Scheduler } from '../workloads/runner.js';
import { loadProfile } from '../../engine-model/profile.js';
import { isolatedServiceTime } from './isolated.js';
import { parseKvEventsConfig } from '../../sim/kv-events-config.js';
import type { KvEventsMode } from './lab-routing.js';

export interface E2eRunOptions {
  workload: Workload;
  policy: string;
  /** The policy's knobs (tCool scaled to the gateway's wall clock). */
  policyConfig?: Record<string, unknown>;
  kvConnectors?: TransferMode[];
  kvConnector?: TransferMode | null;
  engines: number;
  profile: string;
  /** The engines' vLLM scheduler flags (--scheduling-policy, --long-prefill-token-threshold); vLLM's defaults if not given. */
  schedulingPolicy?: SchedulingPolicy;
  longPrefillTokenThreshold?: number;
  /** The gateway tells priority engines its order (their backends get priority=vllm); false: it sends none. Default true. */
  sendEnginePriority?: boolean;
  seed: number;
  /** Wall seconds per workload second (engines and think times alike). */
  timeScale: number;
  /** Workload seconds after which no new request is sent and open ones are abandoned. */
  until?: number;
  ttftSlo?: number;
  /** precise: the engines publish KV events (ZeroMQ on loopback) and the gateway follows them; default approximate. */
  kvEvents?: KvEventsMode;
  /** The gateway's admission scheduler and knobs, as for the des driver (times in workload ms: scaled here). */
  scheduler?: RoutingHostOptions['scheduler'];
  admission?: RoutingHostOptions['admission'];
  capacity?: RoutingHostOptions['capacity'];
  /** The gateway's retention settings (config retention; times in workload ms: scaled here). */
  retention?: RoutingHostOptions['retention'];
  maxConcurrent?: number;
  /** The API the requests go through (default completions: token ids). */
  api?: E2eApi;
  onProgress?: (t: number) => void;
  /** Each request that completed, as the driver saw it (tests). */
  onRequestDone?: (r: E2eRequestRecord) => void;
}

export interface E2eRequestRecord {
  sessionId: string;
  turn: number;
  /** The engine the gateway sent it to (x-ear-backend), or null. */
  backend: string | null;
  /** Prompt tokens: the workload's, and the engine's count (null when the API did not say). */
  workloadPromptTokens: number;
  promptTokens: number | null;
  /** Cached prompt tokens as recorded (for messages: the engine's own figure, the API has none). */
  cachedTokens: number;
  outputTokens: number;
  firstTokenSeen: boolean;
}

export interface E2eRunResult {
  summary: MetricsSummary;
  /** The gateway's ear_kv_transfers_total, by "kind/mode/outcome". */
  transfers: Record<string, number>;
  wallSeconds: number;
}

const BIN = new URL('../../cli/ear.js', import.meta.url).pathname;

/** The gateway's scheduler settings for the run; its times are wall ms, the workload's are scaled by `scale`. */
function schedulerConfig (o: E2eRunOptions, scale: number): Record<string, unknown> {
  const a = o.admission ?? {};
  const c: Record<string, unknown> = { scheduler: o.scheduler ?? SCHEDULER };
  if (a.levels !== undefined) c.schedulerLevels = a.levels;
  c.schedulerQuantumMs = Math.max(1, Math.round((a.quantumMs ?? ADMISSION_DEFAULTS.quantumMs) * scale));
  if (a.beta !== undefined) c.schedulerBeta = a.beta;
  if (a.maxQueued !== undefined) c.maxQueued = a.maxQueued;
  c.queueTimeoutMs = Math.max(1, Math.round((a.queueTimeoutMs ?? ADMISSION_DEFAULTS.queueTimeoutMs) * scale));
  if (o.capacity?.prefillBudgetTokens !== undefined) c.prefillBudgetTokens = o.capacity.prefillBudgetTokens;
  if (o.capacity?.kvHighWatermark !== undefined) c.kvHighWatermark = o.capacity.kvHighWatermark;
  // Policy knobs; tCool is seconds of workload time, which the gateway lives in scaled.
  if (o.policyConfig !== undefined) {
    const k = { ...o.policyConfig };
    if (typeof k.tCool === 'number') k.tCool = k.tCool * scale;
    c.policyConfig = k;
  }
  // Retention's times are workload ms, its defaults too (as the DES keeps them): the gateway lives them scaled.
  const r: Record<string, number> = { ...RETENTION_DEFAULTS, ...o.retention };
  for (const k of ['defaultGapMs', 'minTtlMs', 'maxTtlMs'] as const) r[k] = Math.round(r[k] * scale);
  c.retention = r;
  if (o.kvConnectors !== undefined) c.kvConnectors = o.kvConnectors;
  if (o.kvConnector != null) c.kvConnector = o.kvConnector;
  c.kvCostProfile = o.profile;
  // The engines share this process's event loop with the client, which blocks it for seconds on a slow machine
  // (tokenizing and decoding prompts of 200k tokens): a missed probe is that pause, not a dead engine.
  c.unhealthyAfter = 100;
  return c;
}
const MODEL = 'ear-eval';
/** The engines' tokenizer: the text APIs' prompts are the workload's token ids decoded with it. */
const TOKENIZER = 'hf:qwen3';

const START_TIMEOUT_MS = 120_000;

/** `backends` are `--backend` specs (URL and options); `blockSize` the engines' (precise mode needs the same). */
async function startGatewayProcess (backends: string[], policy: string, blockSize: number, config: string | null): Promise<{ child: ChildProcess; url: string }> {
  const args = [BIN, 'serve', '--host', '127.0.0.1', '--port', '0', '--policy', policy, '--route-threads', '1', '--block-size', String(blockSize),
    // A row per engine: past the default's rows, as many as there are engines.
    ...(backends.length > POD_ROWS_DEFAULTS.maxPods ? ['--max-pods', String(backends.length)] : []),
    ...(config === null ? [] : ['--config', config]), ...backends.flatMap((b, i) => ['--backend', `${b},id=engine-${i}`])];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, EAR_LOG_LEVEL: 'info' } });
  let out = '';
  // Its line that it listens, or its exit: a loaded machine may take well over 10 s to start it (one core, the
  // shared region and the route threads to set up), so the bound is only there for a gateway that hangs.
  const url = await new Promise<string | null>((resolve) => {
    const seen = (d: Buffer): void => {
      out += d;
      const m = /listening on (http:\/\/[^"\s]+)/.exec(out);
      if (m) { clearTimeout(t); resolve(m[1]); }
    };
    const t = setTimeout(() => resolve(null), START_TIMEOUT_MS);
    child.stdout!.on('data', seen);
    child.stderr!.on('data', seen);
    child.once('exit', () => { clearTimeout(t); resolve(null); });
  });
  if (url !== null) return { child, url };
  child.kill('SIGKILL');
  throw new Error(`ear serve did not start:\n${out}`);
}

export async function runE2e (o: E2eRunOptions): Promise<E2eRunResult> {
  const wall0 = performance.now();
  const w = o.workload;
  const scale = o.timeScale;
  if (!(scale > 0)) throw new RangeError('e2e needs a time scale > 0');
  const profile = loadProfile(o.profile);
  const silent = pino({ level: 'silent' });
  const sims: SimServer[] = [];
  let gw: { child: ChildProcess; url: string } | null = null;
  let configDir: string | null = null;
  const dispatcher = new Agent({ connections: 512, headersTimeout: 0, bodyTimeout: 0 });
  try {
    const api = o.api ?? 'completions';
    // Each request's engine TTFT (modelled seconds) and prompt usage, by the x-request-id the gateway forwards.
    const engineTtft = new Map<string, number>();
    const engineCached = new Map<string, number>();
    for (let i = 0; i < o.engines; i++) {
      sims.push(await startSim({
        onRequestFinished: (rid, t, prompt) => {
          if (rid === null) return;
          engineTtft.set(rid, t.firstToken - t.arrival);
          if (api === 'messages') engineCached.set(rid, prompt.cachedTokens);
        },
        host: '127.0.0.1', port: 0, profile: o.profile, timeScale: scale, tokenizer: TOKENIZER, servedModelName: [MODEL],
        enablePromptTokensDetails: true, seed: o.seed + i, stopProbability: 0, logger: silent,
        ...(o.schedulingPolicy === undefined ? {} : { schedulingPolicy: o.schedulingPolicy }),
        ...(o.longPrefillTokenThreshold === undefined ? {} : { longPrefillTokenThreshold: o.longPrefillTokenThreshold }),
        kvEventsConfig: o.kvEvents === 'precise' ? parseKvEventsConfig({ enable_kv_cache_events: true, endpoint: 'tcp://127.0.0.1:*', replay_endpoint: 'tcp://127.0.0.1:*' }) : null
      }));
    }
    const cap = (o.maxConcurrent ? `,max-concurrent=${o.maxConcurrent}` : '') +
      (o.schedulingPolicy === 'priority' && o.sendEnginePriority !== false ? ',priority=vllm' : '');
    const specs = sims.map((s) => (o.kvEvents === 'precise' ? `${s.url},kv-events=${s.kvEventsEndpoint},replay=${s.kvReplayEndpoint}` : s.url) + cap);
    configDir = mkdtempSync(join(tmpdir(), 'ear-e2e-'));
    const configFile = join(configDir, 'gateway.yaml');
    writeFileSync(configFile, YAML.stringify(schedulerConfig(o, scale)));
    gw = await startGatewayProcess(specs, o.policy, profile.blockSize, configFile);
    const metrics = new MetricsCollector({ engines: o.engines, blockSize: w.blockSize, ttftSlo: o.ttftSlo });
    const t0 = performance.now();
    const now = (): number => (performance.now() - t0) / 1000 / scale;
    const sched: Scheduler = { at: (t, fn) => { setTimeout(() => fn(Math.max(t, now())), Math.max(0, (t - now()) * scale * 1000)); } };
    const prompts = new Map<string, SessionPrompt>();
    // Text APIs: each session's conversation, dropped after its last turn (a trace has thousands of sessions).
    const tokenText = api === 'completions' ? null : new TokenText(await createTokenizer(TOKENIZER));
    const conversations = new Map<string, Conversation>();
    const turnsOf = new Map<string, number>();
    if (w.kind === 'closed') for (const s of allSessions(w.sessions)) turnsOf.set(s.id, s.turns.length);
    const isolated = new Map<string, number>();
    const ideal = new ApcBound(w.blockSize);
    let open = 0;
    let finishedAll!: () => void;
    const allDone = new Promise<void>((resolve) => { finishedAll = resolve; });
    let roots = w.kind === 'closed' ? w.sessions.length : w.requests.length;
    const url = gw.url;
    runWorkload(w, sched, (d, done) => {
      if (o.until !== undefined && d.at > o.until) return;
      let sp = prompts.get(d.sessionId);
      if (!sp) prompts.set(d.sessionId, (sp = new SessionPrompt(w.seed, w.blockSize)));
      const { tokens, blocks } = sp.advance(d.spec);
      const id = requestId(d.sessionId, d.turn);
      // Ideal: an idle engine holding every prefix this prompt could reuse (one infinite cache's hit).
      isolated.set(id, isolatedServiceTime(profile, tokens.length, ideal.observe(d.rootSessionId, blocks, tokens.length).all, d.outputTokens));
      metrics.requestSent({ id, sessionId: d.sessionId, rootSessionId: d.rootSessionId, at: d.at, promptTokens: tokens.length, blocks });
      open++;
      // The gateway forwards a sane x-request-id as it is ('/' is not one of its characters).
      const rid = `eval:${id.replace(/[^A-Za-z0-9._:-]/g, ':')}`;
      let req: ApiRequest;
      let conversation: Conversation | null = null;
      const final = w.kind === 'open' ? (d.spec as OpenRequest).final : d.turn === (turnsOf.get(d.sessionId) ?? 0) - 1;
      if (tokenText === null) {
        // Written by hand: JSON.stringify turns a Uint32Array into an object, and this is the hot path of the client.
        // The OpenAI user is the root session, as the discrete-event driver sets it (fairness policies see the same users).
        const body = `{"model":"${MODEL}","prompt":[${tokens.join(',')}],"max_tokens":${d.outputTokens},"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true},"user":${JSON.stringify(d.rootSessionId)}}`;
        req = { path: '/v1/completions', headers: { 'x-session-id': d.sessionId, 'x-request-id': rid }, body };
      } else {
        conversation = conversations.get(d.sessionId) ?? null;
        if (conversation === null) conversations.set(d.sessionId, (conversation = new Conversation(tokenText, w.blockSize, w.sharedPrefixBlocks)));
        const turn = conversation.advance(tokens, blocks, d.spec.keepBlocks, d.outputTokens);
        if (final) conversations.delete(d.sessionId);
        const t = textRequest(api as Exclude<E2eApi, 'completions'>, {
          model: MODEL, conversation: turn, maxTokens: d.outputTokens, sessionId: d.sessionId, rootSessionId: d.rootSessionId, parentId: d.parentId
        });
        req = { ...t, headers: { ...t.headers, 'x-request-id': rid } };
      }
      let first = NaN;
      readStream(api, dispatcher, url, req, () => { first = now(); metrics.firstToken(id, first); })
        .then((r) => {
          const t = now();
          // The next turn sends this answer back (the conversation keeps it only until that turn is built).
          conversation?.answered(d.turn, r.text);
          // vLLM's Anthropic usage has no cached tokens: the engine's own figure, which the sim hands over in process.
          const cached = r.cachedTokens ?? engineCached.get(rid) ?? 0;
          engineCached.delete(rid);
          const output = r.outputTokens;
          o.onRequestDone?.({
            sessionId: d.sessionId, turn: d.turn, backend: r.backend, workloadPromptTokens: tokens.length, promptTokens: r.promptTokens,
            cachedTokens: cached, outputTokens: output, firstTokenSeen: !Number.isNaN(first)
          });
          // Added latency in wall seconds: client TTFT minus the engine's, both scaled to the wall clock. The
          // collector takes it as ttft − engineTtft on its own (workload) clock, so the engine TTFT is expressed there.
          const eng = engineTtft.get(rid);
          engineTtft.delete(rid);
          const ttft = (Number.isNaN(first) ? t : first) - d.at;
          const added = eng === undefined ? undefined : (ttft - eng) * scale;
          // Over a text API the engine's prompt is the re-tokenized, templated text: the APC is taken on its count.
          const promptTokens = api === 'completions' || r.promptTokens === null ? undefined : r.promptTokens;
          metrics.requestFinished(id, { at: t, cachedTokens: cached, outputTokens: output, engineTtft: added === undefined ? undefined : ttft - added, promptTokens });
          done(t);
        }, (err: Error) => {
          const t = now();
          engineCached.delete(rid);
          metrics.requestFailed(id, t, failureCause(err, 'connection'));
          done(t);
        })
        .finally(() => {
          open--;
          if (w.kind === 'open' && --roots === 0) finishedAll();
        });
    }, {
      sessionDone: (rootId, _s, end) => {
        metrics.sessionDone(rootId, end);
        if (--roots === 0) finishedAll();
      }
    });
    const sampler = setInterval(() => {
      const t = now();
      metrics.pendingPrefill(t, sims.map((s) => s.engine.stats().pendingPrefillTokens));
      o.onProgress?.(t);
    }, 100 * scale);
    const limit = o.until === undefined ? null : setTimeout(finishedAll, (o.until * 1.5 + 5) * scale * 1000);
    await allDone;
    clearInterval(sampler);
    if (limit) clearTimeout(limit);
    const gatewayMetrics = await (await request(`${url}/metrics`)).body.text();
    for (const [seconds, count] of histogramSamples(gatewayMetrics, 'ear_routing_decision_seconds')) for (let i = 0; i < count; i++) metrics.routingDecision(seconds);
    // Admission waits (wall seconds, at the histogram's resolution) in workload seconds; requests placed at once waited 0.
    let queued = 0;
    for (const [seconds, count] of histogramSamples(gatewayMetrics, 'ear_admission_wait_seconds')) {
      for (let i = 0; i < count; i++) metrics.admitted(seconds / scale);
      queued += count;
    }
    const released = Number(/^ear_admission_released_total (\S+)$/m.exec(gatewayMetrics)?.[1] ?? 0);
    // The gateway's KV transfers (the lab records each move; here the counts are what the gateway exports).
    const transfers: Record<string, number> = {};
    for (const m of gatewayMetrics.matchAll(/^ear_kv_transfers_total\{kind="([^"]+)",mode="([^"]+)",outcome="([^"]+)"\} (\S+)$/gm)) transfers[`${m[1]}/${m[2]}/${m[3]}`] = Number(m[4]);
    for (let i = queued; i < released; i++) metrics.admitted(0);
    const idealRun = replay(w, (s, k) => isolated.get(requestId(s, k)) ?? 0);
    const summary = metrics.summary({ idealMakespan: idealRun.makespan, idealSessionCompletion: idealRun.sessionCompletion });
    // Migrations as the gateway counted them (no per-move times here: thrash and transfer times stay the lab's).
    for (const [key, n] of Object.entries(transfers)) {
      const [kind, mode, outcome] = key.split('/');
      if (kind !== 'migration' && kind !== 'proactive') continue;
      if (outcome === 'ok') {
        summary.migrations.count += n;
        if (mode in summary.migrations.byMode) summary.migrations.byMode[mode as TransferMode] += n;
      } else summary.migrations.failed += n;
    }
    return { summary, transfers, wallSeconds: (performance.now() - wall0) / 1000 };
  } finally {
    if (gw) {
      gw.child.kill('SIGTERM');
      if (gw.child.exitCode === null) await once(gw.child, 'exit');
    }
    await dispatcher.close();
    await Promise.all(sims.map((s) => s.close()));
    if (configDir !== null) rmSync(configDir, { recursive: true, force: true });
  }
}

/**
 * Samples of one of the gateway's histograms (`name`, every label set summed per bucket): each bucket's count at
 * the bucket's upper bound, so percentiles come out at the histogram's resolution. Past the last bound (a pause
 * of the loaded machine) a sample counts at that bound: a lower bound of the time.
 */
function histogramSamples (text: string, name: string): Array<[number, number]> {
  const byBound = new Map<string, number>();
  for (const m of text.matchAll(new RegExp(`^${name}_bucket\\{[^}]*le="([^"]+)"[^}]*\\} (\\S+)`, 'gm'))) {
    byBound.set(m[1], (byBound.get(m[1]) ?? 0) + Number(m[2]));
  }
  const out: Array<[number, number]> = [];
  let below = 0;
  let top = 0;
  for (const [le, cumulative] of byBound) {
    const bound = le === '+Inf' ? top : Number(le);
    if (cumulative > below) out.push([bound, cumulative - below]);
    below = cumulative;
    top = bound;
  }
  return out;
}
