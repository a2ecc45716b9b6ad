// A real redis-server for the store's tests: on a free loopback port, no persistence, killed at the end.
// `redisServerMissing` is the reason to skip (a message) when the binary is not on PATH (.ci/run installs it).
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createServer, connect } from 'node:net';
import { until } from '../fixtures/wait.js';

function missing (): string | false {
  const r = spawnSync('redis-server', ['--version'], { encoding: 'utf8' });
  if (r.error !== undefined || r.status !== 0) return 'redis-server is not on PATH (apt-get install -y redis-server; .ci/run does): skipping the redis store tests';
  return false;
}

export const redisServerMissing: string | false = missing();

export async function freePort (): Promise<number> {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

async function accepts (port: number): Promise<boolean> {
  return await new Promise((resolve) => {
    const c = connect(port, '127.0.0.1');
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', () => resolve(false));
  });
}

export class RedisServer {
  #proc: ChildProcess | null = null;
  #log = '';
  private constructor (readonly port: number) {}

  static async start (port?: number): Promise<RedisServer> {
    const s = new RedisServer(port ?? await freePort());
    await s.start();
    return s;
  }

  get url (): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  get pid (): number {
    return this.#proc?.pid ?? -1;
  }

  /** Starts (again) on the same port, and waits until it accepts connections. */
  async start (): Promise<void> {
    if (this.#proc !== null) throw new Error('redis-server already running');
    const p = spawn('redis-server', ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
      '--protected-mode', 'no', '--loglevel', 'warning'], { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#proc = p;
    p.stdout?.on('data', (b: Buffer) => { this.#log = (this.#log + b.toString()).slice(-4000); });
    p.stderr?.on('data', (b: Buffer) => { this.#log = (this.#log + b.toString()).slice(-4000); });
    await until(async () => {
      if (p.exitCode !== null) throw new Error(`redis-server exited (${p.exitCode}) on port ${this.port}: ${this.#log}`);
      return await accepts(this.port);
    }, { what: () => `redis-server to listen on ${this.port}: ${this.#log}`, timeoutMs: 10_000 });
  }

  /** SIGKILL, and waits for the exit (the port is free again). */
  async kill (): Promise<void> {
    const p = this.#proc;
    if (p === null) return;
    this.#proc = null;
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGKILL');
      await once(p, 'exit');
    }
  }

  /** SIGSTOP / SIGCONT: a server that holds its connections open and answers nothing (a "slow" Redis). */
  pause (): void { this.#proc?.kill('SIGSTOP'); }
  resume (): void { this.#proc?.kill('SIGCONT'); }
}
