// `ear serve`: the gateway. Flags override the YAML file given with --config; `--demo N` starts N simulated
// engines in this process and puts the gateway in front of them (what `npm start` runs).
import pino from 'pino';
import { ConfigError, DEFAULTS, type GatewayConfig } from '../config/index.js';
import { parseGatewayArgs, readGatewayConfig } from './serve-options.js';
import { maxPodRows } from '../config/pod-rows.js';
import { startGatewayProcess, stopSignals } from './gateway-process.js';
import { fitHttpThreads } from '../gateway/ear.js';
import { autoHttpThreads } from '../config/server.js';
import { policyNames } from '../core/policies/index.js';
import { startSim, type SimServer } from '../sim/server.js';
import { parseKvEventsConfig } from '../sim/kv-events-config.js';
import { DEFAULT_PROFILE } from '../engine-model/profile.js';

const USAGE = `usage: ear serve [--config FILE] [--backend URL[,id=NAME][,kv-events=tcp://H:P][,replay=tcp://H:P][,topic=PREFIX][,role=both|prefill|decode][,kv-blocks=N][,max-concurrent=N][,api-key=ENGINE_KEY][,priority=vllm|sglang|sglang-low-first]]...
                 [--host H] [--port P] [--http-threads N] [--policy NAME] [--tokenizer NAME] [--block-size N] [--route-threads N]
                 [--assumed-ttl-ms N] [--prefix-index-keys N] [--prefix-index-warm] [--admin-token T] [--api-key K]... [--max-body-bytes N] [--max-header-bytes N] [--client-body-timeout-ms N] [--session-store memory|redis://HOST[:PORT][/DB]] [--max-contexts N]
                 [--max-pods N]
                 [--proactive-interval-ms N] [--proactive-body-cache-bytes N] [--ha active-active|active-passive] [--lease-name N]
                 [--demo N [--demo-profile NAME] [--demo-time-scale X]]
                 [--discovery k8s [--kubeconfig F] [--namespace NS] [--label-selector S | --inference-pool NAME]]

An OpenAI-compatible gateway in front of vLLM / SGLang engines (or \`ear sim\`).
  --config FILE        YAML with any of the fields below (camelCase) and a \`backends\` list; SIGHUP reloads its backends,
                       apiKeys, rateLimits and adminToken
  --backend SPEC       an engine (repeatable); replaces the file's list
  --http-threads N     data-plane threads (default auto: one per core the process may use, its CPU limit counted, at
                       most 64; 1 with --demo); N ≥ 2: N threads listen on the port, each reading, proxying and
                       streaming, while the main thread makes every decision; 1: the main thread serves HTTP itself
  --policy NAME        routing policy: ${policyNames().join(', ')} (default ${DEFAULTS.policy})
  --tokenizer NAME     tokenizer for block keys (default ${DEFAULTS.tokenizer}): character, tiktoken:o200k_base, hf:qwen3, hf:PATH, remote:URL (engine /tokenize)
  --assumed-ttl-ms N   how long a routing decision's assumed prefix stays in the index (default: 5000 when a
                       backend has kv-events, i.e. precise mode; else 20 min)
  --prefix-index-keys N  blocks the prefix index holds (default ${DEFAULTS.prefixIndexKeys}: 16M tokens, 256 MB of slots; up
                       to 3145728, 512 MB); at the bound each new block evicts one not used lately
  --prefix-index-warm  make the prefix index's memory resident at start (256 MB, ~1 s of CPU), so new keys pay
                       no page fault later (default: pages come as keys land)
  --scheduler NAME     admission: off, fcfs, plas, atlas (Autellix; default), vtc. Requests wait, ordered by their
                       session's service, while engines are at capacity (learned from their /metrics, or a
                       backend's max-concurrent=N, or --prefill-budget-tokens; under atlas, plas and vtc also
                       the engine's own queue); with no signal it passes through. A backend's priority=vllm|sglang
                       sends EAR's order to an engine that schedules by priority (KV legs first)
  --max-queued N       requests that may wait (default ${DEFAULTS.maxQueued}; above: 429 with Retry-After)
  --queue-timeout-ms N longest wait for admission (default ${DEFAULTS.queueTimeoutMs}; then 504 timeout_error)
  --prefill-budget-tokens N  prompt tokens a backend may hold uncomputed before it takes no more (default 0: none)
  --session-store S    memory (default: this process's session table) or redis://HOST[:PORT][/DB]: session
                       bindings and service shared by every replica naming the same Redis (down: local table)
  --max-header-bytes N largest request head answered (default ${DEFAULTS.maxHeaderBytes}; then 431); above 4096, one split
                       across TCP reads is closed unanswered (docs/security.md)
  --client-body-timeout-ms N  the whole request body must arrive within N ms (default ${DEFAULTS.clientBodyTimeoutMs}; then 408)
  --max-contexts N     explicit contexts (POST /v1/context) live at once (default ${DEFAULTS.maxContexts}; 429 beyond)
  --max-pods N         pod rows of the shared tables: backends serving or draining at once (default ${DEFAULTS.maxPods},
                       at most ${maxPodRows()}; a backend past them waits for a row); discovery's maxPods follows it
  --kv-connectors L    how KV moves when a session migrates (ear, ear-proactive) or a P/D request goes to its decode
                       engine (pd-static): a list of nixl (vLLM NixlConnector two-step), shared-store (engines share an
                       LMCache / Mooncake store), recompute (always offered); default ${DEFAULTS.kvConnectors.join(',')}
  --kv-connector M     auto (default: per transfer, the cheapest by estimated cost) or one of them, always
  --proactive-interval-ms N  ear-proactive: how often the migration thread moves idle sessions off hot engines
                       (default ${DEFAULTS.proactiveIntervalMs})
  --proactive-body-cache-bytes N  ear-proactive: bytes of sessions' last request bodies kept for those moves
                       (default ${DEFAULTS.proactiveBodyCacheBytes}; least recently used dropped beyond, counted)
  --ha MODE            several replicas: active-active (default: every replica is ready) or active-passive (a
                       Kubernetes Lease elects a leader; only it reports ready on /ready). YAML \`ha:\` sets the lease's
                       timings, kubeconfig and namespace
  --lease-name N       active-passive: the Lease's name (default ${DEFAULTS.ha.leaseName})
  --demo N             start N simulated engines here and route to them
  --discovery k8s      backends are the Running, Ready pods a label selector picks (config \`discovery:\`),
                       followed by a Kubernetes watch; --kubeconfig F (default in-cluster, else ~/.kube/config),
                       --namespace NS (default the pod's own), --label-selector S (default app=vllm), or
                       --inference-pool NAME (an InferencePool's selector and targetPorts)
SIGTERM/SIGINT drain: stop accepting, finish in-flight requests (up to drainTimeoutMs), flush traces, exit.
Tracing (OpenTelemetry, off by default) is configured by the OTEL_* environment variables: on when
OTEL_TRACES_EXPORTER names an exporter or OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT is set (docs/tracing.md).`;

/** The demo engines' tokenizer (a real BPE, so their output reads as text), unless --tokenizer names another. */
const DEMO_TOKENIZER = 'hf:qwen3';

export async function main (argv: string[]): Promise<number> {
  const values = parseGatewayArgs(argv, {
    demo: { type: 'string' },
    'demo-profile': { type: 'string' },
    'demo-time-scale': { type: 'string' }
  }, 'ear serve', USAGE);
  if (typeof values === 'number') return values;
  const log = pino({ level: process.env.EAR_LOG_LEVEL ?? 'info' });
  const demo = values.demo === undefined ? 0 : Number(values.demo);
  if (!Number.isInteger(demo) || demo < 0 || demo > 64) {
    console.error('ear serve: --demo must be an integer in [0, 64]');
    return 2;
  }
  const sims: SimServer[] = [];
  // Demo engines publish KV events, so the demo runs in precise mode; demo engines and gateway share one tokenizer
  // (precise mode needs the gateway's tokens to be the engines' own).
  // httpThreads: a data-plane thread per core the process may use unless the file or a flag says otherwise (the
  // library's own default, for in-process gateways and `ear epp`, is 1). The demo keeps one: its engines run on the
  // main thread, and a first try should not start a thread and a tokenizer per core.
  // `auto` gives way to the tables: the most threads the shared region holds beside them (fitHttpThreads).
  const readConfig = (): Readonly<GatewayConfig> => fitHttpThreads(readGatewayConfig(values,
    sims.map((s, i) => `${s.url},id=sim-${i},kv-events=${s.kvEventsEndpoint},replay=${s.kvReplayEndpoint}`), demo > 0 ? DEMO_TOKENIZER : undefined,
    { httpThreads: demo > 0 ? 1 : 'auto' }));
  let config: Readonly<GatewayConfig>;
  try {
    config = readConfig();
    for (let i = 0; i < demo; i++) {
      sims.push(await startSim({
        host: '127.0.0.1',
        port: 0,
        profile: (values['demo-profile'] as string | undefined) ?? DEFAULT_PROFILE,
        timeScale: values['demo-time-scale'] === undefined ? 1 : Number(values['demo-time-scale']),
        // A remote tokenizer asks an engine; the engines themselves need a local one.
        tokenizer: config.tokenizer.startsWith('remote:') ? DEMO_TOKENIZER : config.tokenizer,
        servedModelName: ['ear-demo'],
        kvEventsConfig: parseKvEventsConfig({ enable_kv_cache_events: true, endpoint: 'tcp://127.0.0.1:*', replay_endpoint: 'tcp://127.0.0.1:*' }),
        enablePromptTokensDetails: true,
        seed: i,
        logger: log.child({ engine: `sim-${i}` })
      }));
    }
    config = readConfig();
    if (config.backends.length === 0 && config.discovery === null) throw new ConfigError('backends', 'at least one --backend (or --demo N, or --discovery k8s) is required');
    const cores = config.httpThreadsAuto ? autoHttpThreads() : 1;
    if (config.httpThreads < cores) {
      log.warn({ httpThreads: config.httpThreads, cores }, 'httpThreads auto: fewer data-plane threads than cores, so that their scratch areas fit the shared region beside the tables (prefixIndexKeys, maxSessions, maxPods)');
    }
  } catch (err) {
    await Promise.all(sims.map((s) => s.close()));
    if (err instanceof ConfigError) {
      console.error(`ear serve: ${err.message}`);
      return 2;
    }
    throw err;
  }
  const signals = stopSignals(log);
  let started: Awaited<ReturnType<typeof startGatewayProcess>>;
  try {
    started = await startGatewayProcess(config, log, 'ear serve', readConfig);
  } catch (err) {
    signals.unhook();
    // The demo engines' servers would keep the process alive after the error is printed.
    await Promise.all(sims.map((s) => s.close()));
    throw err;
  }
  if (typeof started === 'number') {
    signals.unhook();
    await Promise.all(sims.map((s) => s.close()));
    return started;
  }
  signals.started();
  const { ear } = started;
  config = started.config;
  const url = `http://${config.host === '0.0.0.0' ? '127.0.0.1' : config.host}:${ear.gateway.port}`;
  log.info({ url, httpThreads: config.httpThreads, policy: config.policy, scheduler: config.scheduler, sessionStore: config.sessionStore, ha: config.ha.mode, backends: config.backends.map((b) => b.id) }, `ear serve listening on ${url}`);
  if (demo > 0) {
    console.log(`\nTry:\n  curl -s ${url}/v1/chat/completions -H 'content-type: application/json' -H 'x-session-id: demo-1' \\\n` +
      `    -d '{"model":"ear-demo","messages":[{"role":"user","content":"Hello!"}],"max_tokens":32}'\n`);
  }
  await signals.stopped;
  log.info('draining');
  // The lease is released first thing (a follower takes over within a retry period) while requests drain here;
  // discovery stops handing the draining gateway new backends.
  await started.close();
  await Promise.all(sims.map((s) => s.close()));
  log.info('drained');
  // Clients' keep-alive connections would keep the process alive (this uWS has no call that closes them all), and
  // one that keeps sending on its connection (each request answered 503) would keep it alive for ever: leave now.
  process.exit(0);
}
