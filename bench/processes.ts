// The benchmarks' processes: the canned upstream (bench/upstream.ts), the OTLP sink, `ear serve` and nginx, each
// its own process, started on a free port, waited on until it answers, and every one stopped on the way out,
// error or not. Shared by bench/gateway.ts and bench/proxy-floor.ts.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';

const UPSTREAM_JS = fileURLToPath(new URL('./upstream.js', import.meta.url));
const OTLP_SINK_JS = fileURLToPath(new URL('./otlp-sink.js', import.meta.url));
const EAR_JS = fileURLToPath(new URL('../src/cli/ear.js', import.meta.url));

// ---- child processes: every one is stopped on the way out, error or not ----

export interface Child {
  name: string;
  proc: ChildProcess;
  exited: boolean;
  /** Last output, for the error message when it fails. */
  tail: string;
}

const children: Child[] = [];

export function startChild (name: string, cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Child {
  const proc = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
  const child: Child = { name, proc, exited: false, tail: '' };
  const keep = (b: Buffer): void => { child.tail = (child.tail + b.toString()).slice(-4000); };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  proc.on('exit', () => { child.exited = true; });
  proc.on('error', (err) => { child.exited = true; child.tail += `\n${err.message}`; });
  children.push(child);
  return child;
}

export function waitForOutput (child: Child, pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray> {
  return new Promise((resolve, reject) => {
    const check = (): void => {
      const m = child.tail.match(pattern);
      if (m) done(() => resolve(m));
      else if (child.exited) done(() => reject(new Error(`${child.name} exited before it was ready:\n${child.tail}`)));
    };
    const timer = setTimeout(() => done(() => reject(new Error(`${child.name} not ready after ${timeoutMs} ms:\n${child.tail}`))), timeoutMs);
    const done = (f: () => void): void => {
      clearTimeout(timer);
      child.proc.stdout?.off('data', check);
      child.proc.off('exit', check);
      f();
    };
    child.proc.stdout?.on('data', check);
    child.proc.on('exit', check);
    check();
  });
}

async function stopChild (c: Child): Promise<void> {
  if (c.exited) return;
  const gone = new Promise<void>((resolve) => c.proc.once('exit', () => resolve()));
  c.proc.kill('SIGTERM');
  const timer = setTimeout(() => c.proc.kill('SIGKILL'), 10_000);
  await gone;
  clearTimeout(timer);
}

export async function stopAll (): Promise<void> {
  await Promise.all(children.map(stopChild));
}

process.on('exit', () => {
  for (const c of children) if (!c.exited) c.proc.kill('SIGKILL');
});

export function assertAlive (): void {
  for (const c of children) if (c.exited) throw new Error(`${c.name} exited during the run:\n${c.tail}`);
}

// ---- the servers ----

export async function freePort (): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    }).on('error', reject);
  });
}

async function getStatus (url: string): Promise<number> {
  try {
    const r = await request(url, { headersTimeout: 1000, bodyTimeout: 1000 });
    await r.body.dump();
    return r.statusCode;
  } catch {
    return 0;
  }
}

export async function waitForStatus (url: string, child: Child, timeoutMs: number): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    if (await getStatus(url) === 200) return;
    if (child.exited) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${child.name}: ${url} did not answer 200 within ${timeoutMs} ms:\n${child.tail}`);
}

export async function startUpstream (): Promise<{ url: string; pid: number }> {
  const c = startChild('upstream', process.execPath, [UPSTREAM_JS]);
  const m = await waitForOutput(c, /\{"port":(\d+)\}/, 10_000);
  return { url: `http://127.0.0.1:${m[1]}`, pid: c.proc.pid! };
}

/** OTEL_* of the benchmark's own environment: cleared for every EAR but the traced one, so `ear` runs untraced. */
const NO_OTEL: NodeJS.ProcessEnv = Object.fromEntries(Object.keys(process.env).filter((k) => k.startsWith('OTEL_')).map((k) => [k, undefined]));

export async function startSink (): Promise<{ url: string; pid: number }> {
  const c = startChild('otlp-sink', process.execPath, [OTLP_SINK_JS]);
  const m = await waitForOutput(c, /\{"port":(\d+)\}/, 10_000);
  return { url: `http://127.0.0.1:${m[1]}`, pid: c.proc.pid! };
}

/**
 * `ear serve` in front of `upstream`. It serves on one thread (`--http-threads 1`) unless `extra` says otherwise: these
 * benches' figures are of one thread, from before `ear serve` took a thread per core by default. A baseline build
 * (`o.earJs`) from before the flag is one thread anyway, and is not given it (it would refuse it).
 */
export async function startEar (upstream: string, routeThreads: string | undefined, cpuProfDir: string | undefined, extra: string[] = [],
  o: { env?: NodeJS.ProcessEnv; earJs?: string } = {}): Promise<{ url: string; pid: number; command: string }> {
  const args = ['serve', '--host', '127.0.0.1', '--port', '0', '--backend', `${upstream},id=up`, ...extra];
  if (!extra.includes('--http-threads') && (o.earJs === undefined || takesHttpThreads(o.earJs))) args.push('--http-threads', '1');
  if (routeThreads) args.push('--route-threads', routeThreads);
  const node = cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', cpuProfDir] : [];
  const c = startChild('ear', process.execPath, [...node, o.earJs ?? EAR_JS, ...args], { ...process.env, ...NO_OTEL, EAR_LOG_LEVEL: 'info', ...o.env });
  const m = await waitForOutput(c, /"url":"(http:\/\/[^"]+)"/, 20_000);
  const url = m[1];
  await waitForStatus(`${url}/ready`, c, 10_000);
  return { url, pid: c.proc.pid!, command: `ear ${args.join(' ').replace(upstream, 'http://127.0.0.1:UPSTREAM')}` };
}

/** Whether a baseline build's `ear serve` has the --http-threads flag (its help says so); this one's has. */
function takesHttpThreads (earJs: string): boolean {
  const r = spawnSync(process.execPath, [earJs, 'serve', '--help'], { encoding: 'utf8' });
  return r.stdout.includes('--http-threads');
}

export function nginxBinary (): string {
  for (const bin of ['nginx', '/usr/sbin/nginx']) if (spawnSync(bin, ['-v'], { stdio: 'ignore' }).status === 0) return bin;
  console.error('nginx is missing: apt-get install -y nginx');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  spawnSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  const r = spawnSync('apt-get', ['install', '-y', '-qq', 'nginx'], { stdio: 'inherit', env });
  if (r.status !== 0) throw new Error('cannot install nginx (apt-get install -y nginx failed)');
  for (const bin of ['nginx', '/usr/sbin/nginx']) if (spawnSync(bin, ['-v'], { stdio: 'ignore' }).status === 0) return bin;
  throw new Error('nginx installed but not runnable');
}

export function nginxVersion (bin: string): string {
  const r = spawnSync(bin, ['-v'], { encoding: 'utf8' });
  return (r.stderr || r.stdout).trim().replace(/^nginx version: /, '');
}

/** A plain keep-alive reverse proxy, as one would put in front of an engine for streaming. */
function nginxConfig (dir: string, port: number, upstream: string, workers: number): string {
  const up = new URL(upstream);
  return `worker_processes ${workers};
daemon off;
master_process on;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${dir}/client_body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  client_max_body_size 32m;
  client_body_buffer_size 1m;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  upstream engine {
    server ${up.hostname}:${up.port};
    keepalive 128;
    keepalive_requests 1000000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://engine;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }
  }
}
`;
}

export async function startNginx (bin: string, upstream: string, workers: number): Promise<{ url: string; pid: number }> {
  const dir = mkdtempSync(join(tmpdir(), `ear-bench-nginx${workers}-`));
  chmodSync(dir, 0o755); // workers run as an unprivileged user
  const port = await freePort();
  writeFileSync(join(dir, 'nginx.conf'), nginxConfig(dir, port, upstream, workers));
  const c = startChild(`nginx (worker_processes ${workers})`, bin, ['-p', dir, '-c', join(dir, 'nginx.conf'), '-e', join(dir, 'error.log')]);
  c.proc.on('exit', () => rmSync(dir, { recursive: true, force: true }));
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForStatus(`${url}/health`, c, 10_000);
  } catch (err) {
    let log = '';
    try { log = readFileSync(join(dir, 'error.log'), 'utf8'); } catch {}
    throw new Error(`${(err as Error).message}\n${log}`);
  }
  return { url, pid: c.proc.pid! };
}
