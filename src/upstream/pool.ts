// The proxy's HTTP/1.1 client to the engines: a bounded keep-alive connection pool per backend, one request at a
// time per connection (no pipelining), responses framed by Content-Length, chunked transfer-encoding or the
// connection's close. Why not undici on this path (measured 2026-11-22, server CPU per request, 2 shared cores):
// the same gateway build proxying through undici's Pool.dispatch() spent 6-10 µs more per short request at 16
// connections (48-58 vs 42-48), 7-23 more per streamed one (75-91 vs 62-71) and ~30 more at one connection
// (85-94 vs 55-59), rounds interleaved; a bare uWS proxy (bench/proxy-floor.ts) showed 3-16 µs short and 2-20
// streamed. Most of the gap is undici's per-request JS and Node's per-read ArrayBuffer, which the shared read
// buffer below avoids. undici is kept for the health probes and metric scrapes, a few requests a second.
import { performance } from 'node:perf_hooks';
import { UpstreamError } from './errors.js';
import { Call, Connection } from './connection.js';

export interface UpstreamCall {
  /** Cancels the request: onError(err) follows unless it already ended. The connection is closed, not reused. */
  abort (err: Error): void;
  /** Reads again after onData returned false. */
  resume (): void;
}

export interface UpstreamHandler {
  /** First, synchronously from dispatch(). */
  onStart (call: UpstreamCall): void;
  /** The final response's status (1xx are skipped) and headers as [name, value, ...], names in lower case. */
  onHeaders (status: number, headers: string[]): void;
  /**
   * A piece of the body (de-chunked). It is a view of a read buffer that the next socket read reuses: copy what
   * is kept past onReadEnd or onComplete. Return false to stop reading until call.resume().
   */
  onData (chunk: Buffer): boolean;
  /** One socket read was parsed and the response goes on: a point to pass on what this read brought. False pauses. */
  onReadEnd (): boolean;
  onComplete (): void;
  /** The request failed (connect, timeout, protocol, close, abort); nothing else is called after. */
  onError (err: Error): void;
}

export interface UpstreamRequest {
  method: 'GET' | 'POST';
  path: string;
  /** Extra headers; host and content-length are added. */
  headers: ReadonlyArray<readonly [string, string]>;
  body: Uint8Array | null;
}

export interface UpstreamPoolOptions {
  /** Most sockets open at once. */
  connections: number;
  /** Most requests waiting for a socket; beyond it dispatch fails at once with EAR_ERR_UPSTREAM_QUEUE_FULL (counted). */
  maxQueued?: number;
  connectTimeoutMs?: number;
  /** Request written → response head complete. */
  headersTimeoutMs: number;
  /** Longest wait between two reads of the body (not counted while the caller holds the socket paused). */
  bodyTimeoutMs: number;
  /** An idle socket closes after this long, or after the server's `keep-alive: timeout=N` less a second if shorter. */
  keepAliveTimeoutMs?: number;
  /** Headers every request to this origin carries (the engine's own API key: headers.ts). */
  headers?: ReadonlyArray<readonly [string, string]>;
}

function hasCtl (s: string): boolean {
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c === 13 || c === 10 || c === 0) return true;
  }
  return false;
}

/** A request of the pool's, waiting or on a connection. */

export interface UpstreamPoolStats {
  connects: number;
  queueFull: number;
  /** Idle sockets found dead or past their keep-alive when taken (the request went to another socket). */
  staleSockets: number;
  /** Requests sent again on a new socket because the reused one closed before answering (the keep-alive race). */
  resent: number;
}

/** The process's sums of what every pool's `stats` counts of stale sockets and resends (upstream-metrics.ts). */
export const UPSTREAM_SOCKETS = { staleSockets: 0, resent: 0 };

/** Keep-alive connections to one origin (scheme://host:port; a path in the URL is ignored, as undici does). */
export class UpstreamPool {
  readonly origin: URL;
  readonly connections: number;
  readonly maxQueued: number;
  readonly connectTimeoutMs: number;
  readonly headersTimeoutMs: number;
  readonly bodyTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly headers: ReadonlyArray<readonly [string, string]>;
  readonly stats: UpstreamPoolStats = { connects: 0, queueFull: 0, staleSockets: 0, resent: 0 };
  readonly #all = new Set<Connection>();
  /** Idle sockets, most recently used last (taken first: the others age out). */
  readonly #idle: Connection[] = [];
  #queue: Call[] = [];
  #closed = false;
  #drained: (() => void) | null = null;
  #closing: Promise<void> | null = null;
  #timer: NodeJS.Timeout | null = null;
  readonly #tickMs: number;

  constructor (url: string, o: UpstreamPoolOptions) {
    this.origin = new URL(url);
    if (this.origin.protocol !== 'http:' && this.origin.protocol !== 'https:') throw new TypeError(`not an http(s) URL: ${url}`);
    this.connections = o.connections;
    this.maxQueued = o.maxQueued ?? 4096;
    this.connectTimeoutMs = o.connectTimeoutMs ?? 10_000;
    this.headersTimeoutMs = o.headersTimeoutMs;
    this.bodyTimeoutMs = o.bodyTimeoutMs;
    this.keepAliveTimeoutMs = o.keepAliveTimeoutMs ?? 4_000;
    this.headers = o.headers ?? [];
    for (const [k, v] of this.headers) if (hasCtl(k) || hasCtl(v)) throw new TypeError('a pool header has CR, LF or NUL');
    // Deadlines are checked on one timer per pool, not one per request; they fire up to a tick late.
    const shortest = Math.min(this.connectTimeoutMs, this.headersTimeoutMs, this.bodyTimeoutMs, this.keepAliveTimeoutMs);
    this.#tickMs = Math.max(10, Math.min(1000, Math.floor(shortest / 4)));
  }

  get closed (): boolean {
    return this.#closed;
  }

  /** Sockets open (busy, idle or connecting). */
  get size (): number {
    return this.#all.size;
  }

  get queued (): number {
    return this.#queue.length;
  }

  dispatch (req: UpstreamRequest, handler: UpstreamHandler): void {
    const call = new Call(this, req, handler);
    handler.onStart(call);
    if (call.done) return;
    if (this.#closed) return this.#reject(call, new UpstreamError('EAR_ERR_UPSTREAM_POOL_CLOSED', 'the upstream pool is closed'));
    for (const [k, v] of req.headers) {
      if (hasCtl(k) || hasCtl(v)) return this.#reject(call, new UpstreamError('EAR_ERR_UPSTREAM_BAD_REQUEST', 'header with CR, LF or NUL'));
    }
    const conn = this.#take();
    if (conn) return conn.assign(call);
    if (this.#queue.length >= this.maxQueued) {
      this.stats.queueFull++;
      return this.#reject(call, new UpstreamError('EAR_ERR_UPSTREAM_QUEUE_FULL', `${this.maxQueued} requests already wait for a connection`));
    }
    this.#queue.push(call);
  }

  #reject (call: Call, err: Error): void {
    call.done = true;
    call.handler.onError(err);
  }

  /** An idle socket that is still up, else a new one if the bound allows. */
  #take (): Connection | null {
    const idle = this.#idle;
    const now = performance.now();
    while (idle.length > 0) {
      const c = idle.pop()!;
      // Past its keep-alive (the tick that closes it may be late: a stalled loop), the server may close it as the
      // request arrives; closed, not yet seen: nothing was written, so another socket is safe.
      if (c.usable && now - c.idleSince <= this.#keepAliveOf(c)) return c;
      this.stats.staleSockets++;
      UPSTREAM_SOCKETS.staleSockets++;
      c.close();
    }
    return this.#open();
  }

  /** A new socket, if the bound allows. */
  #open (): Connection | null {
    if (this.#all.size >= this.connections) return null;
    const c = new Connection(this);
    this.stats.connects++;
    this.#all.add(c);
    this.#timer ??= setInterval(() => this.#tick(), this.#tickMs).unref();
    return c;
  }

  /**
   * Sends `call` again on a new socket (connection.ts: its reused socket closed before answering), or first in the
   * queue when every socket is busy. False when the pool is closed (the caller then fails it as before).
   */
  resend (call: Call): boolean {
    if (this.#closed) return false;
    call.resent = true;
    this.stats.resent++;
    UPSTREAM_SOCKETS.resent++;
    const c = this.#open();
    if (c !== null) c.assign(call);
    else this.#queue.unshift(call);
    return true;
  }

  #keepAliveOf (c: Connection): number {
    return c.keepAliveHint >= 0 ? Math.min(c.keepAliveHint, this.keepAliveTimeoutMs) : this.keepAliveTimeoutMs;
  }

  unqueue (call: Call): void {
    const i = this.#queue.indexOf(call);
    if (i >= 0) this.#queue.splice(i, 1);
  }

  /** A connection is free: it takes the next queued request, or waits. */
  idle (c: Connection): void {
    const next = this.#queue.shift();
    if (next) return c.assign(next);
    if (this.#closed) return c.close();
    c.idleSince = performance.now();
    this.#idle.push(c);
    this.#checkDrained();
  }

  /** A connection closed: a queued request may now open a new one. */
  gone (c: Connection): void {
    this.#all.delete(c);
    const i = this.#idle.indexOf(c);
    if (i >= 0) this.#idle.splice(i, 1);
    while (this.#queue.length > 0 && this.#all.size < this.connections && !this.#closed) {
      const conn = this.#take();
      if (!conn) break;
      conn.assign(this.#queue.shift()!);
    }
    if (this.#all.size === 0 && this.#timer) {
      clearInterval(this.#timer);
      this.#timer = null;
    }
    this.#checkDrained();
  }

  #tick (): void {
    const now = performance.now();
    for (const c of this.#all) {
      if (c.deadline > 0 && now > c.deadline) {
        c.timeout();
      } else if (c.call === null && c.connected && c.idleSince > 0) {
        if (now - c.idleSince > this.#keepAliveOf(c)) c.close();
      }
    }
  }

  #checkDrained (): void {
    if (!this.#closed || !this.#drained) return;
    if (this.#queue.length > 0) return;
    for (const c of this.#all) if (c.call !== null) return;
    for (const c of [...this.#all]) c.close();
    const d = this.#drained;
    this.#drained = null;
    d();
  }

  /** Takes no new requests; resolves once the queued and in-flight ones have ended, with every socket closed. */
  close (): Promise<void> {
    if (this.#closing) return this.#closing;
    this.#closed = true;
    this.#closing = new Promise((resolve) => {
      this.#drained = resolve;
      this.#checkDrained();
    });
    return this.#closing;
  }

  /** Fails everything at once with `err` and closes every socket. */
  destroy (err: Error = new UpstreamError('EAR_ERR_UPSTREAM_POOL_CLOSED', 'the upstream pool was destroyed')): void {
    this.#closed = true;
    const queue = this.#queue;
    this.#queue = [];
    for (const call of queue) this.#reject(call, err);
    for (const c of [...this.#all]) c.fail(err);
    this.#closing ??= Promise.resolve();
    const d = this.#drained;
    this.#drained = null;
    d?.();
  }
}
