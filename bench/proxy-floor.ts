// The floor under EAR's proxy path: a minimal uWS server that forwards completions to bench/upstream.ts and
// streams the answer back, with nothing else (no routing, parsing, metrics), through (a) undici's
// Pool.dispatch() and (b) EAR's own HTTP/1.1 client (src/upstream/pool.ts), measured in one run
// next to the upstream alone, nginx and EAR: server CPU per response, which the shared machine's load moves
// far less than req/s. `node dist/bench/proxy-floor.js [--duration S] [--connections 16] [--only a,b]`.
import uWS from 'uWebSockets.js';
import type { HttpResponse } from 'uWebSockets.js';
import { Pool, type Dispatcher } from 'undici';
import { parseArgs } from 'node:util';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { UpstreamPool, type UpstreamCall } from '../src/upstream/pool.js';
import { nginxBinary, startChild, startEar, startNginx, startUpstream, stopAll, waitForOutput } from './processes.js';
import { cannon, percentile, sanity, type Cell, type Target } from './http-load.js';

const SELF = fileURLToPath(import.meta.url);

/** The two ways of talking to the upstream, behind one shape: send a body, get status, headers and chunks. */
interface Sink {
  headers (status: number, contentType: string): void;
  /** A view valid until flush() or end(). */
  data (chunk: Buffer): boolean;
  /** What the last socket read brought may go out now. */
  flush (): void;
  end (): void;
  error (): void;
}
type Send = (path: string, body: Buffer, sink: Sink) => (() => void);

function undiciSender (url: string): Send {
  const pool = new Pool(url, { connections: 128, pipelining: 1, keepAliveTimeout: 60_000 });
  return (path, body, sink) => {
    let abort: ((e?: Error) => void) | null = null;
    let queued = false;
    const flush = (): void => { queued = false; sink.flush(); };
    const handler: Dispatcher.DispatchHandler = {
      onConnect (a) { abort = a; },
      onHeaders (status, raw) {
        let ct = 'application/json';
        for (let i = 0; i < raw.length; i += 2) if (raw[i].toString('latin1').toLowerCase() === 'content-type') ct = raw[i + 1].toString('latin1');
        sink.headers(status, ct);
        return true;
      },
      onData (chunk) {
        // As EAR did with undici: the chunks of one socket read are written together, after it was parsed.
        if (!queued) { queued = true; queueMicrotask(flush); }
        return sink.data(chunk);
      },
      onComplete () { sink.end(); },
      onError () { sink.error(); }
    };
    pool.dispatch({ path, method: 'POST', body, headers: { 'content-type': 'application/json' } }, handler);
    return () => abort?.(new Error('client gone'));
  };
}

function rawSender (url: string): Send {
  const pool = new UpstreamPool(url, { connections: 128, headersTimeoutMs: 600_000, bodyTimeoutMs: 600_000 });
  const headers: Array<[string, string]> = [['content-type', 'application/json']];
  return (path, body, sink) => {
    let call: UpstreamCall | null = null;
    pool.dispatch({ method: 'POST', path, headers, body }, {
      onStart (c) { call = c; },
      onHeaders (status, h) {
        let ct = 'application/json';
        for (let i = 0; i < h.length; i += 2) if (h[i] === 'content-type') ct = h[i + 1];
        sink.headers(status, ct);
      },
      onData (chunk) { return sink.data(chunk); },
      onReadEnd () { sink.flush(); return true; },
      onComplete () { sink.end(); },
      onError () { sink.error(); }
    });
    return () => call?.abort(new Error('client gone'));
  };
}

/** The proxy: one uWS write per upstream read for SSE, one end() with the whole body otherwise. */
function serve (send: Send): void {
  const handle = (res: HttpResponse): void => {
    let aborted = false;
    let cancel: (() => void) | null = null;
    res.onAborted(() => { aborted = true; cancel?.(); });
    const chunks: Buffer[] = [];
    res.onData((ab, isLast) => {
      chunks.push(Buffer.from(ab.slice(0)));
      if (!isLast) return;
      let status = 0;
      let ct = '';
      let sse = false;
      let started = false;
      const body: Buffer[] = [];
      let pending: Buffer[] = [];
      const write = (): void => {
        if (aborted || pending.length === 0) return;
        const data = pending.length === 1 ? pending[0] : Buffer.concat(pending);
        pending = [];
        res.cork(() => {
          if (!started) { res.writeStatus(`${status} OK`).writeHeader('content-type', ct); started = true; }
          res.write(data);
        });
      };
      cancel = send('/v1/chat/completions', chunks.length === 1 ? chunks[0] : Buffer.concat(chunks), {
        headers (s, c) { status = s; ct = c; sse = c.includes('text/event-stream'); },
        data (chunk) {
          if (aborted) return true;
          if (!sse) body.push(Buffer.from(chunk));
          else pending.push(chunk);
          return true;
        },
        flush () { if (sse) write(); },
        end () {
          if (aborted) return;
          write();
          res.cork(() => {
            if (!started) res.writeStatus(`${status} OK`).writeHeader('content-type', ct);
            if (sse) res.end();
            else res.end(body.length === 1 ? body[0] : Buffer.concat(body));
          });
        },
        error () { if (!aborted) res.cork(() => { res.writeStatus('502 Bad Gateway').end(); }); }
      });
    });
  };
  uWS.App().post('/*', handle).listen('127.0.0.1', 0, (token) => {
    if (!token) process.exit(1);
    process.stdout.write(`${JSON.stringify({ port: uWS.us_socket_local_port(token) })}\n`);
    process.once('SIGTERM', () => process.exit(0));
  });
}

async function startFloor (mode: 'undici' | 'raw', upstream: string): Promise<Target> {
  const c = startChild(`floor-${mode}`, process.execPath, [SELF, '--serve', mode, '--upstream', upstream]);
  const m = await waitForOutput(c, /\{"port":(\d+)\}/, 10_000);
  return { name: `floor-${mode}`, url: `http://127.0.0.1:${m[1]}`, pid: c.proc.pid! };
}

async function main (): Promise<void> {
  const { values } = parseArgs({
    options: {
      serve: { type: 'string' },
      upstream: { type: 'string' },
      duration: { type: 'string', default: '5' },
      connections: { type: 'string', default: '1,16' },
      rounds: { type: 'string', default: '2' },
      only: { type: 'string' }
    }
  });
  if (values.serve) return serve(values.serve === 'raw' ? rawSender(values.upstream!) : undiciSender(values.upstream!));
  const upstream = await startUpstream();
  const all: Target[] = [
    { name: 'direct', ...upstream },
    await startFloor('undici', upstream.url),
    await startFloor('raw', upstream.url),
    { name: 'nginx-1w', ...await startNginx(nginxBinary(), upstream.url, 1) },
    { name: 'ear', ...await startEar(upstream.url, undefined, undefined) }
  ];
  const only = values.only?.split(',');
  const targets = only ? all.filter((t) => only.includes(t.name)) : all;
  for (const t of targets) await sanity(t);
  for (const t of targets) for (const load of ['short', 'stream'] as const) await cannon(t, load, 16, 1);
  const rows: string[] = ['| load | conns | target | req/s | p50 ms | server CPU µs/req |', '| --- | ---: | --- | ---: | ---: | ---: |'];
  for (const load of ['short', 'stream'] as const) {
    for (const c of values.connections.split(',').map(Number)) {
      // Rounds interleave the targets, so drift on the shared machine hits them alike; the lowest CPU is kept.
      const best = new Map<string, Cell>();
      for (let r = 0; r < Number(values.rounds); r++) {
        for (const t of targets) {
          const x = await cannon(t, load, c, Number(values.duration));
          const b = best.get(t.name);
          if (!b || x.cpuUs < b.cpuUs) best.set(t.name, x);
        }
      }
      for (const t of targets) {
        const x = best.get(t.name)!;
        const row = `| ${load} | ${c} | ${t.name} | ${Math.round(x.rps)} | ${percentile(x.latencies, 50).toFixed(3)} | ${x.cpuUs.toFixed(0)} |`;
        rows.push(row);
        console.error(row);
      }
    }
  }
  console.log(rows.join('\n'));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().then(async () => { if (!process.argv.includes('--serve')) await stopAll(); }, async (err: unknown) => {
    console.error(err);
    await stopAll();
    process.exitCode = 1;
  });
}
