// `ear epp` and `ear sim` processes for the endpoint picker's tests, and the picker's /metrics read back.
import { once } from 'node:events';
import { start, stop, SIM_LISTENING, type Proc } from '../fixtures/processes.js';
import { EnvoySide } from './envoy-side.js';

export const EPP_LISTENING = /ear epp listening: .* http on (http:\/\/127\.0\.0\.1:\d+)/;

export interface Epp {
  proc: Proc;
  /** HTTP (/metrics, /health, /ready, /admin). */
  http: string;
  grpc: string;
  health: string;
  envoy: EnvoySide;
  close (): Promise<void>;
}

/** `ear sim` engines serving model `m` (fast: time scale 0.05 unless `extra` says otherwise). */
export async function sims (n: number, extra: string[] = []): Promise<Proc[]> {
  return await Promise.all(Array.from({ length: n }, (_, i) => start(['sim', '--host', '127.0.0.1', '--port', '0', '--served-model-name', 'm',
    '--enable-prompt-tokens-details', '--seed', String(i), '--time-scale', '0.05', ...extra], SIM_LISTENING)));
}

/**
 * `ear epp` on free ports in front of `backends` (`--backend` specs), with the admin token `admin`; `nodeArgs`
 * (a preload) and `env` (OTEL_*) as processes.ts's start takes them.
 */
export async function epp (backends: string[], args: string[] = [], proc0: { nodeArgs?: string[]; env?: NodeJS.ProcessEnv } = {}): Promise<Epp> {
  const proc = await start(['epp', '--host', '127.0.0.1', '--port', '0', '--grpc-port', '0', '--grpc-health-port', '0', '--admin-token', 'admin',
    ...backends.flatMap((b) => ['--backend', b]), ...args], EPP_LISTENING, proc0.nodeArgs ?? [], proc0.env ?? {});
  const m = /ext_proc on (127\.0\.0\.1:\d+), health on (127\.0\.0\.1:\d+)/.exec(proc.out());
  if (m === null) throw new Error(`no ports in: ${proc.out()}`);
  const envoy = new EnvoySide(m[1]);
  return {
    proc, http: proc.url, grpc: m[1], health: m[2], envoy,
    async close () {
      envoy.close();
      await stop(proc);
    }
  };
}

/** A series' value on /metrics (`labels` as printed, `{kind="fallback"}`, or '' for none); 0 when absent. */
export async function metric (http: string, name: string, labels = ''): Promise<number> {
  const t = await (await fetch(`${http}/metrics`)).text();
  const line = t.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}

export function chat (content: string, extra: Record<string, unknown> = {}): Buffer {
  return Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content }], max_tokens: 8, ...extra }));
}

export const hostPort = (url: string): string => new URL(url).host;

/** The sum of a metric's series (every label set). */
export async function metricSum (http: string, name: string): Promise<number> {
  const t = await (await fetch(`${http}/metrics`)).text();
  let sum = 0;
  for (const l of t.split('\n')) if (l.startsWith(`${name}{`) || l.startsWith(`${name} `)) sum += Number(l.slice(l.lastIndexOf(' ') + 1));
  return sum;
}

/** grpc.health.v1 Check: the status name, or the gRPC error code. */
export async function health (address: string, service: string): Promise<string> {
  const { healthService } = await import('../../src/epp/protocol.js');
  const grpc = await import('@grpc/grpc-js');
  const Ctor = healthService();
  const client = new Ctor(address, grpc.credentials.createInsecure()) as unknown as { Check (r: unknown, cb: (err: { code: number } | null, res: { status: string }) => void): void; close (): void };
  try {
    return await new Promise((resolve) => client.Check({ service }, (err, res) => resolve(err ? `code ${err.code}` : res.status)));
  } finally {
    client.close();
  }
}

/** grpc.health.v1 Watch: the first status streamed. */
export async function watchFirst (address: string, service: string): Promise<string> {
  const { healthService } = await import('../../src/epp/protocol.js');
  const grpc = await import('@grpc/grpc-js');
  const Ctor = healthService();
  const client = new Ctor(address, grpc.credentials.createInsecure()) as unknown as { Watch (r: unknown): NodeJS.EventEmitter & { cancel (): void }; close (): void };
  try {
    const call = client.Watch({ service });
    const [first] = await once(call, 'data') as [{ status: string }];
    call.on('error', () => {});
    call.cancel();
    return first.status;
  } finally {
    client.close();
  }
}
