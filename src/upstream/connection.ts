// One keep-alive connection of an upstream pool (pool.ts): it writes one request at a time (no pipelining), reads
// the response through a ResponseParser, keeps the connect, headers and body deadlines, and tells the pool when it
// is idle again or gone.
import net from 'node:net';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import { UpstreamError } from './errors.js';
import { ResponseParser, type ParserSink } from './parser.js';
import type { UpstreamCall, UpstreamHandler, UpstreamPool, UpstreamRequest } from './pool.js';

/**
 * Every plain-TCP socket of every pool reads into this one buffer (reads are handled one at a time, to the end,
 * on this thread): no allocation per read, which with Node's own read buffers cost a malloc'd ArrayBuffer each.
 */
const READ_BUFFER = Buffer.allocUnsafe(64 << 10);

export class Call implements UpstreamCall {
  conn: Connection | null = null;
  done = false;
  paused = false;
  /** Sent again on a new socket once already, after a reused one closed before answering (pool.ts resend). */
  resent = false;

  constructor (readonly pool: UpstreamPool, readonly req: UpstreamRequest, readonly handler: UpstreamHandler) {}

  abort (err: Error): void {
    if (this.done) return;
    if (this.conn) {
      this.conn.fail(err);
      return;
    }
    this.pool.unqueue(this);
    this.done = true;
    this.handler.onError(err);
  }

  resume (): void {
    if (this.done || !this.paused || !this.conn) return;
    this.paused = false;
    this.conn.resumed();
  }
}

const enum Deadline { None, Connect, Headers, Body }

/** One socket to the backend, carrying one request at a time. */
export class Connection implements ParserSink {
  readonly socket: net.Socket;
  readonly parser = new ResponseParser(this);
  call: Call | null = null;
  connected = false;
  closed = false;
  /** performance.now() past which `deadlineKind` fires; 0 for none. */
  deadline = 0;
  deadlineKind = Deadline.None;
  idleSince = 0;
  /** How long the server's `keep-alive: timeout=N` lets this socket idle (N s less a second, ms); -1 without a hint. */
  keepAliveHint = -1;
  /** Requests this socket answered in full: a socket that did is a reused one for the next. */
  answered = 0;
  /** Whether any byte of the current request's response came. */
  #heard = false;

  constructor (readonly pool: UpstreamPool) {
    const o = pool.origin;
    const secure = o.protocol === 'https:';
    const port = Number(o.port || (secure ? 443 : 80));
    const host = o.hostname.startsWith('[') ? o.hostname.slice(1, -1) : o.hostname;
    if (secure) {
      this.socket = tls.connect({ host, port, servername: net.isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'] });
      this.socket.on('data', (d: Buffer) => this.#data(d));
    } else {
      this.socket = net.connect({ host, port, onread: { buffer: READ_BUFFER, callback: (n: number, buf: Uint8Array) => { this.#data((buf as Buffer).subarray(0, n)); return true; } } });
    }
    this.socket.setNoDelay(true);
    this.socket.once(secure ? 'secureConnect' : 'connect', () => this.#connected());
    this.socket.on('end', () => this.#end());
    this.socket.on('error', (e: Error) => this.#lost(e));
    this.socket.on('close', () => this.#lost(new UpstreamError('EAR_ERR_UPSTREAM_CLOSED', 'the upstream closed the connection')));
    this.deadline = performance.now() + pool.connectTimeoutMs;
    this.deadlineKind = Deadline.Connect;
  }

  get usable (): boolean {
    const s = this.socket;
    return !this.closed && !s.destroyed && s.writable && !s.readableEnded;
  }

  #connected (): void {
    this.connected = true;
    this.deadline = 0;
    this.deadlineKind = Deadline.None;
    if (this.call) this.#write(this.call);
    else this.pool.idle(this);
  }

  /** Takes a request: written now if the socket is up, else once it connects. */
  assign (call: Call): void {
    call.conn = this;
    this.call = call;
    this.idleSince = 0;
    this.keepAliveHint = -1;
    this.#heard = false;
    this.parser.start();
    if (this.connected) this.#write(call);
  }

  #write (call: Call): void {
    const { req } = call;
    let head = `${req.method} ${req.path} HTTP/1.1\r\nhost: ${this.pool.origin.host}\r\n`;
    for (const [k, v] of this.pool.headers) head += `${k}: ${v}\r\n`;
    for (const [k, v] of req.headers) head += `${k}: ${v}\r\n`;
    const body = req.body;
    if (body) head += `content-length: ${body.length}\r\n`;
    head += '\r\n';
    const s = this.socket;
    if (body && body.length > 0 && body.length <= 16384) {
      // One buffer, one write syscall, for the common case.
      const out = Buffer.allocUnsafe(head.length + body.length);
      out.write(head, 0, 'latin1');
      out.set(body, head.length);
      s.write(out);
    } else if (body && body.length > 0) {
      s.cork();
      s.write(head, 'latin1');
      s.write(body);
      s.uncork();
    } else {
      s.write(head, 'latin1');
    }
    this.deadline = performance.now() + this.pool.headersTimeoutMs;
    this.deadlineKind = Deadline.Headers;
  }

  #data (d: Buffer): void {
    if (this.closed) return;
    this.#heard = true;
    try {
      this.parser.feed(d);
    } catch (err) {
      this.fail(err instanceof Error ? err : new Error(String(err)));
      return;
    }
    const call = this.call;
    if (call === null || call.done) return;
    if (!call.handler.onReadEnd() || this.parser.pauseWanted) {
      this.parser.pauseWanted = false;
      call.paused = true;
      this.socket.pause();
      this.deadline = 0; // the caller, not the upstream, is slow
    } else if (this.deadlineKind === Deadline.Body) {
      this.deadline = performance.now() + this.pool.bodyTimeoutMs;
    }
  }

  resumed (): void {
    if (this.closed) return;
    if (this.deadlineKind === Deadline.Body) this.deadline = performance.now() + this.pool.bodyTimeoutMs;
    this.socket.resume();
  }

  #end (): void {
    if (this.closed) return;
    try {
      this.parser.end();
    } catch (err) {
      this.#lost(err as Error);
      return;
    }
    this.#lost(new UpstreamError('EAR_ERR_UPSTREAM_CLOSED', 'the upstream closed the connection'));
  }

  /**
   * The socket closed or broke under a request. A reused socket that the server closed before a byte of the answer
   * is the keep-alive race (the server's idle timeout fired as the request left: vLLM's uvicorn closes idle
   * sockets after 5 s, and a stalled event loop on either side widens the window): the server did not take the
   * request, so it goes again on a new socket to the same engine, once (pool.ts resend), instead of failing over
   * to another engine and losing the session's cache there. Any other failure is the request's.
   */
  #lost (err: Error): void {
    if (this.closed) return;
    const call = this.call;
    if (call !== null && !call.done && !call.resent && this.answered > 0 && !this.#heard && !this.pool.closed) {
      this.call = null;
      call.conn = null;
      this.close();
      if (this.pool.resend(call)) return;
      call.done = true;
      call.handler.onError(err);
      return;
    }
    this.fail(err);
  }

  head (status: number, headers: string[]): void {
    const call = this.call!;
    for (let k = 0; k < headers.length; k += 2) {
      if (headers[k] === 'keep-alive') {
        const m = /timeout=(\d+)/i.exec(headers[k + 1]);
        if (m) this.keepAliveHint = Math.max(0, Number(m[1]) * 1000 - 1000);
      }
    }
    this.deadline = performance.now() + this.pool.bodyTimeoutMs;
    this.deadlineKind = Deadline.Body;
    call.handler.onHeaders(status, headers);
  }

  data (chunk: Buffer): boolean {
    const call = this.call;
    if (call === null || call.done) return true;
    return call.handler.onData(chunk);
  }

  complete (reusable: boolean): void {
    const call = this.call!;
    this.call = null;
    call.conn = null;
    call.done = true;
    this.answered++;
    this.deadline = 0;
    this.deadlineKind = Deadline.None;
    this.parser.pauseWanted = false;
    if (call.paused) this.socket.resume();
    call.handler.onComplete();
    if (reusable) {
      // Later, not inside this read: the parser is still on the stack.
      queueMicrotask(() => { if (!this.closed) this.pool.idle(this); });
    } else {
      this.close();
    }
  }

  /** Ends the connection quietly (nothing in flight, or the response is complete). */
  close (): void {
    if (this.closed) return;
    this.closed = true;
    this.parser.stop();
    this.socket.destroy();
    this.pool.gone(this);
  }

  /** The connection failed: the request on it (if any) gets `err`. */
  fail (err: Error): void {
    if (this.closed) return;
    const call = this.call;
    this.call = null;
    this.close();
    if (call !== null && !call.done) {
      call.done = true;
      call.conn = null;
      call.handler.onError(err);
    }
  }

  timeout (): void {
    const kind = this.deadlineKind;
    this.fail(kind === Deadline.Connect
      ? new UpstreamError('EAR_ERR_UPSTREAM_CONNECT_TIMEOUT', 'upstream connect timeout')
      : kind === Deadline.Headers
        ? new UpstreamError('EAR_ERR_UPSTREAM_HEADERS_TIMEOUT', 'upstream headers timeout')
        : new UpstreamError('EAR_ERR_UPSTREAM_BODY_TIMEOUT', 'upstream body timeout'));
  }
}

/** Counters a pool keeps, for metrics and tests. */
