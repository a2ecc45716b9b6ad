// `ear epp`: EAR as a Gateway API Inference Extension endpoint picker. Envoy (or any conformant gateway) calls
// envoy.service.ext_proc.v3.ExternalProcessor/Process once per request; EAR's admission and routing name the
// endpoint (src/epp/stream.ts, picker.ts). The process core (gateway/core.ts, started by cli/epp.ts through startEar,
// with its uWS door: /metrics, /health, /ready and the OpenAI routes) supplies the backends, health probes, engine
// scrapes, the route pool, the tables and the one request pipeline both doors run.
import * as grpc from '@grpc/grpc-js';
import type { GatewayConfig } from '../config/index.js';
import type { ProcessCore } from '../gateway/core.js';
import type { BodySendMode } from './protocol.js';
import { addHealthService } from './health.js';
import { EppMetrics } from './metrics.js';
import { EndpointPicker } from './picker.js';
import { externalProcessor } from './protocol.js';
import { ExtProcStream, type ProcessCall } from './stream.js';

export interface EppOptions {
  /** The configuration `ear` was started with. */
  config: Readonly<GatewayConfig>;
  host: string;
  grpcPort: number;
  healthPort: number;
  /** Body mode assumed when the proxy sends no protocol_config (default FULL_DUPLEX_STREAMED, as GIE requires). */
  defaultMode?: BodySendMode;
  /** Endpoints named after the primary (default 2). */
  fallbacks?: number;
  log?: { info (o: object, msg: string): void; warn (o: object, msg: string): void };
}

export interface EppServer {
  readonly grpcPort: number;
  readonly healthPort: number;
  readonly metrics: EppMetrics;
  /** ext_proc streams open now. */
  active (): number;
  /** Readiness (and the ext_proc service) turn NOT_SERVING; open streams go on (close refuses new ones). */
  drain (): void;
  /** Waits for open streams up to `timeoutMs`, then cuts them; closes both gRPC servers. Does not close `ear`. */
  close (timeoutMs: number): Promise<void>;
}

const MAX_STREAMS_PER_CONNECTION = 4096;

function bind (server: grpc.Server, host: string, port: number): Promise<number> {
  const addr = host.includes(':') && !host.startsWith('[') ? `[${host}]:${port}` : `${host}:${port}`;
  return new Promise((resolve, reject) => server.bindAsync(addr, grpc.ServerCredentials.createInsecure(), (err, p) => err ? reject(err) : resolve(p)));
}

/**
 * The ext_proc door on `core` (the process core `ear serve` runs too: gateway/core.ts): its requests go through the
 * core's pipeline, gate and tables, as those of the HTTP door beside it do.
 */
export async function startEpp (core: ProcessCore, opts: EppOptions): Promise<EppServer> {
  const gwConfig = opts.config;
  let draining = false;
  const streams = new Set<ExtProcStream>();
  const metrics = new EppMetrics(core.metrics.registry, () => streams.size);
  const picker = new EndpointPicker({ core, fallbacks: opts.fallbacks ?? 2 });
  // The process's own readiness (a healthy backend; active-passive: this replica leads), and not draining.
  const ready = (): boolean => !draining && core.readiness().ready;

  // A request body arrives in one message in BUFFERED mode: the limit is the gateway's body limit and some room.
  const limit = gwConfig.maxBodyBytes + (1 << 16);
  // Streams per proxy connection are bounded (each may hold a body of up to maxBodyBytes until it is picked).
  const grpcServer = new grpc.Server({ 'grpc.max_receive_message_length': limit, 'grpc.max_concurrent_streams': MAX_STREAMS_PER_CONNECTION });
  grpcServer.addService(externalProcessor().service, {
    Process (call: ProcessCall) {
      const s = new ExtProcStream(call, { config: gwConfig, picker, metrics, defaultMode: opts.defaultMode ?? 'FULL_DUPLEX_STREAMED', log: opts.log });
      streams.add(s);
      const gone = (): void => { streams.delete(s); };
      call.on('finish', gone);
      call.on('cancelled', gone);
      call.on('close', gone);
    }
  });
  const healthServer = new grpc.Server();
  const endWatches = addHealthService(healthServer, { ready });
  let grpcPort: number;
  let healthPort: number;
  try {
    grpcPort = await bind(grpcServer, opts.host, opts.grpcPort);
    healthPort = await bind(healthServer, opts.host, opts.healthPort);
  } catch (err) {
    grpcServer.forceShutdown();
    healthServer.forceShutdown();
    endWatches();
    throw err;
  }
  opts.log?.info({ grpcPort, healthPort }, 'ext_proc and health listening');
  return {
    grpcPort,
    healthPort,
    metrics,
    active: () => streams.size,
    drain () { draining = true; },
    async close (timeoutMs) {
      draining = true;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => { grpcServer.forceShutdown(); resolve(); }, timeoutMs);
        timer.unref();
        grpcServer.tryShutdown(() => { clearTimeout(timer); resolve(); });
      });
      endWatches();
      healthServer.forceShutdown();
    }
  };
}
