// `ear epp`: EAR as the endpoint picker of a Gateway API Inference Extension gateway (Envoy ext_proc). It reads
// the same config file and flags as `ear serve`, plus its gRPC ports; its HTTP port serves /metrics, /health and
// /ready (and, as `ear serve` does, the OpenAI routes, for a client that reaches it directly).
import pino from 'pino';
import { ConfigError, type GatewayConfig } from '../config/index.js';
import { startEpp } from '../epp/server.js';
import type { BodySendMode } from '../epp/protocol.js';
import { parseGatewayArgs, readGatewayConfig } from './serve-options.js';
import { startGatewayProcess, stopSignals } from './gateway-process.js';

const MODES: Record<string, BodySendMode> = { 'full-duplex': 'FULL_DUPLEX_STREAMED', buffered: 'BUFFERED' };

const USAGE = `usage: ear epp [ear serve's options] [--grpc-port P] [--grpc-health-port P] [--ext-proc-mode full-duplex|buffered] [--fallbacks N]

The Gateway API Inference Extension endpoint picker: Envoy's ext_proc (envoy.service.ext_proc.v3.ExternalProcessor)
answered with EAR's admission and routing (x-gateway-destination-endpoint, envoy.lb metadata, 429 / 503).
  --grpc-port P          ext_proc (default 9002)
  --grpc-health-port P   gRPC health: liveness, readiness, envoy.service.ext_proc.v3.ExternalProcessor (default 9003)
  --port P               HTTP /metrics, /health, /ready (default 9090)
  --ext-proc-mode M      body mode assumed when the proxy sends no protocol_config (Envoy before 1.33):
                         full-duplex (FULL_DUPLEX_STREAMED, default) or buffered
  --fallbacks N          endpoints named after the primary for the proxy to fall back on (default 2)
Every \`ear serve\` option applies (--config, --backend, --policy, --scheduler, --max-queued, --max-pods, …): see \`ear serve --help\`.
SIGTERM/SIGINT: readiness turns NOT_SERVING, open streams finish (up to drainTimeoutMs), exit.`;

function port (v: unknown, name: string, dflt: number): number {
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new ConfigError(name, 'must be an integer in [0, 65535]');
  return n;
}

export async function main (argv: string[]): Promise<number> {
  const values = parseGatewayArgs(argv, {
    'grpc-port': { type: 'string' },
    'grpc-health-port': { type: 'string' },
    'ext-proc-mode': { type: 'string' },
    fallbacks: { type: 'string' }
  }, 'ear epp', USAGE);
  if (typeof values === 'number') return values;
  const log = pino({ level: process.env.EAR_LOG_LEVEL ?? 'info' });
  let config: Readonly<GatewayConfig>;
  let grpcPort: number;
  let healthPort: number;
  let fallbacks: number;
  let mode: BodySendMode;
  try {
    config = readGatewayConfig(values, [], undefined, { port: 9090 });
    if (config.backends.length === 0 && config.discovery === null) throw new ConfigError('backends', 'at least one --backend (or --discovery k8s) is required');
    // Envoy's ext_proc stream runs on the main thread, where the decisions are: the endpoint picker keeps one thread
    // (`auto`, say from a file `ear serve` shares, is one here; a number above 1 is refused).
    config = eppThreads(config);
    if (config.httpThreads > 1) throw new ConfigError('httpThreads', 'must be 1 for ear epp (its gRPC door runs on the main thread)');
    grpcPort = port(values['grpc-port'], '--grpc-port', 9002);
    healthPort = port(values['grpc-health-port'], '--grpc-health-port', 9003);
    const m = MODES[(values['ext-proc-mode'] as string | undefined) ?? 'full-duplex'];
    if (m === undefined) throw new ConfigError('--ext-proc-mode', 'must be full-duplex or buffered');
    mode = m;
    fallbacks = values.fallbacks === undefined ? 2 : Number(values.fallbacks);
    if (!Number.isInteger(fallbacks) || fallbacks < 0 || fallbacks > 16) throw new ConfigError('--fallbacks', 'must be an integer in [0, 16]');
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(`ear epp: ${err.message}`);
      return 2;
    }
    throw err;
  }
  const signals = stopSignals(log);
  let started: Awaited<ReturnType<typeof startGatewayProcess>>;
  try {
    started = await startGatewayProcess(config, log, 'ear epp', () => eppThreads(readGatewayConfig(values, [], undefined, { port: 9090 })));
  } catch (err) {
    signals.unhook();
    throw err;
  }
  if (typeof started === 'number') {
    signals.unhook();
    return started;
  }
  const { ear } = started;
  config = started.config;
  let epp;
  try {
    // The ext_proc door on the process core the HTTP door serves from: one pipeline, one gate, one set of tables.
    epp = await startEpp(ear.core, { config, host: config.host, grpcPort, healthPort, defaultMode: mode, fallbacks, log: log.child({ component: 'epp' }) });
  } catch (err) {
    signals.unhook();
    await started.close();
    console.error(`ear epp: ${(err as Error).message}`);
    return 1;
  }
  signals.started();
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
  log.info({ url: `http://${host}:${ear.gateway.port}`, grpcPort: epp.grpcPort, healthPort: epp.healthPort, policy: config.policy, scheduler: config.scheduler, backends: config.backends.map((b) => b.id) },
    `ear epp listening: ext_proc on ${host}:${epp.grpcPort}, health on ${host}:${epp.healthPort}, http on http://${host}:${ear.gateway.port}`);
  await signals.stopped;
  log.info('draining');
  epp.drain();
  // The lease goes first thing (a follower takes over while open streams finish here).
  await Promise.all([started.stepDown(), epp.close(config.drainTimeoutMs)]);
  await started.close();
  log.info('drained');
  process.exit(0);
}

/** `httpThreads: auto` under `ear epp`: one thread. */
function eppThreads (config: Readonly<GatewayConfig>): Readonly<GatewayConfig> {
  return config.httpThreadsAuto && config.httpThreads !== 1 ? Object.freeze({ ...config, httpThreads: 1 }) : config;
}
