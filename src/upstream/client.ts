// The proxy's HTTP/1.1 client to the engines: a bounded keep-alive connection pool per backend, one request at a
// time per connection (no pipelining), responses framed by Content-Length, chunked transfer-encoding or the
// connection's close. Why not undici on this path (measured 2026-11-22, server CPU per request, 2 shared cores):
// the same gateway build proxying through undici's Pool.dispatch() spent 6-10 µs more per short request at 16
// connections (48-58 vs 42-48), 7-23 more per streamed one (75-91 vs 62-71) and ~30 more at one connection
// (85-94 vs 55-59), rounds interleaved; a bare uWS proxy (bench/proxy-floor.ts) showed 3-16 µs short and 2-20
// streamed. Most of the gap is undici's per-request JS and Node's per-read ArrayBuffer, which the shared read
// buffer below avoids. undici is kept for the health probes and metric scrapes, a few requests a second.
import net from 'node:net';
import tls from 'node:tls';
import { performance } from 'node:perf_hooks';
import { EarError } from '../request/errors.js';

/** A failure of one request to an engine; what each code means: src/request/errors.ts. */
export type UpstreamErrorCode =
  | 'EAR_ERR_UPSTREAM_CONNECT_TIMEOUT' | 'EAR_ERR_UPSTREAM_HEADERS_TIMEOUT' | 'EAR_ERR_UPSTREAM_BODY_TIMEOUT'
  | 'EAR_ERR_UPSTREAM_PROTOCOL' | 'EAR_ERR_UPSTREAM_CLOSED' | 'EAR_ERR_UPSTREAM_QUEUE_FULL'
  | 'EAR_ERR_UPSTREAM_POOL_CLOSED' | 'EAR_ERR_UPSTREAM_BAD_REQUEST';

export class UpstreamError extends EarError {
  declare readonly code: UpstreamErrorCode;
  constructor (code: UpstreamErrorCode, message: string) {
    super(code, message);
    this.name = 'UpstreamError';
  }
}

/** The engine was too slow (no head within upstreamHeadersTimeoutMs, or a gap in the body past upstreamBodyTimeoutMs). */
export function isUpstreamTimeout (error: unknown): boolean {
  return error instanceof UpstreamError && (error.code === 'EAR_ERR_UPSTREAM_HEADERS_TIMEOUT' || error.code === 'EAR_ERR_UPSTREAM_BODY_TIMEOUT');
}

/** What the caller controls of a request in flight. */
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

const MAX_HEAD_BYTES = 64 << 10;
/**
 * Every plain-TCP socket of every pool reads into this one buffer (reads are handled one at a time, to the end,
 * on this thread): no allocation per read, which with Node's own read buffers cost a malloc'd ArrayBuffer each.
 */
const READ_BUFFER = Buffer.allocUnsafe(64 << 10);
const MAX_CHUNK_LINE = 4096;
const MAX_TRAILER_BYTES = 64 << 10;

/** Receives what a ResponseParser reads. */
export interface ParserSink {
  head (status: number, headers: string[]): void;
  /** Returns false to ask for reading to pause (the parser still delivers the rest of the current buffer). */
  data (chunk: Buffer): boolean;
  /** The response ended; `reusable` says whether the connection may carry another request. */
  complete (reusable: boolean): void;
}

const enum S { Idle, Head, Length, ChunkSize, ChunkExt, ChunkSizeLf, ChunkData, ChunkDataCr, ChunkDataLf, Trailers, UntilClose, Done }

/**
 * An HTTP/1.1 response reader, fed socket reads of any size. It throws UpstreamError(EAR_ERR_UPSTREAM_PROTOCOL) on input it
 * cannot frame; bytes after the response make the connection unusable (no pipelining: nobody asked for them).
 */
export class ResponseParser {
  #state = S.Idle;
  #expectBody = true;
  #head: Buffer | null = null;
  #remaining = 0;
  #lineBytes = 0;
  #sawCr = false;
  #digits = 0;
  #reusable = true;
  /** Set when data() asked for a pause; read by the connection. */
  pauseWanted = false;

  constructor (readonly sink: ParserSink) {}

  get busy (): boolean {
    return this.#state !== S.Idle && this.#state !== S.Done;
  }

  /** Expects a new response (`expectBody` false for HEAD). */
  start (expectBody = true): void {
    this.#state = S.Head;
    this.#expectBody = expectBody;
    this.#head = null;
    this.#reusable = true;
  }

  /** Stops expecting anything (the request was abandoned). */
  stop (): void {
    this.#state = S.Idle;
    this.#head = null;
  }

  feed (buf: Buffer): void {
    let i = 0;
    const n = buf.length;
    while (i < n) {
      switch (this.#state) {
        case S.Idle:
        case S.Done:
          throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'the upstream sent bytes no request asked for');
        case S.Head:
          i = this.#readHead(buf, i);
          break;
        case S.Length: {
          const take = Math.min(this.#remaining, n - i);
          this.#remaining -= take;
          this.#emit(buf.subarray(i, i + take));
          i += take;
          if (this.#state !== S.Length) return;
          if (this.#remaining === 0) return this.#finish(i < n);
          break;
        }
        case S.ChunkSize: {
          const c = buf[i++];
          const v = hexValue(c);
          if (v >= 0) {
            if (++this.#digits > 13) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'chunk size too large');
            this.#remaining = this.#remaining * 16 + v;
          } else if (this.#digits === 0) {
            throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad chunk size line');
          } else if (c === 13) {
            this.#state = S.ChunkSizeLf;
          } else if (c === 59 || c === 32 || c === 9) {
            this.#state = S.ChunkExt; // chunk extensions (and whitespace before them) are ignored
            this.#lineBytes = 0;
          } else {
            throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad chunk size line');
          }
          break;
        }
        case S.ChunkExt: {
          const c = buf[i++];
          if (c === 13) this.#state = S.ChunkSizeLf;
          else if (c === 10 || ++this.#lineBytes > MAX_CHUNK_LINE) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad chunk extension');
          break;
        }
        case S.ChunkSizeLf: {
          if (buf[i++] !== 10) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad chunk size line');
          if (this.#remaining === 0) {
            this.#state = S.Trailers;
            this.#lineBytes = 0;
            this.#sawCr = false;
          } else {
            this.#state = S.ChunkData;
          }
          break;
        }
        case S.ChunkData: {
          const take = Math.min(this.#remaining, n - i);
          this.#remaining -= take;
          if (this.#remaining === 0) this.#state = S.ChunkDataCr;
          const st = this.#state;
          this.#emit(buf.subarray(i, i + take));
          i += take;
          if (this.#state !== st) return;
          break;
        }
        case S.ChunkDataCr:
          if (buf[i++] !== 13) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'chunk data longer than its size');
          this.#state = S.ChunkDataLf;
          break;
        case S.ChunkDataLf:
          if (buf[i++] !== 10) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'chunk data longer than its size');
          this.#state = S.ChunkSize;
          this.#remaining = 0;
          this.#digits = 0;
          break;
        case S.Trailers: {
          // Trailer fields are read past and dropped; an empty line ends the message.
          const c = buf[i++];
          if (this.#sawCr) {
            if (c !== 10) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad trailer line');
            this.#sawCr = false;
            if (this.#lineBytes === 0) return this.#finish(i < n);
            this.#lineBytes = 0;
          } else if (c === 13) {
            this.#sawCr = true;
          } else if (c === 10 || ++this.#lineBytes > MAX_TRAILER_BYTES) {
            throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad trailer line');
          }
          break;
        }
        case S.UntilClose:
          this.#emit(i === 0 ? buf : buf.subarray(i));
          return;
      }
    }
  }

  /** The connection reached end of stream: ends an until-close body, or throws if the response is incomplete. */
  end (): void {
    if (this.#state === S.UntilClose) {
      this.#state = S.Done;
      this.sink.complete(false);
      return;
    }
    if (this.busy) throw new UpstreamError('EAR_ERR_UPSTREAM_CLOSED', 'the upstream closed the connection before the response ended');
  }

  #emit (chunk: Buffer): void {
    if (chunk.length > 0 && !this.sink.data(chunk)) this.pauseWanted = true;
  }

  #finish (extra: boolean): void {
    this.#state = S.Done;
    this.sink.complete(this.#reusable && !extra);
  }

  /** Reads the head from buf[i..]; returns where the body starts, or buf.length if the head is not complete yet. */
  #readHead (buf: Buffer, i: number): number {
    let data: Buffer;
    let from: number;
    const held = this.#head;
    if (held === null) {
      data = buf;
      from = i;
    } else {
      data = Buffer.concat([held, buf.subarray(i)]);
      from = 0;
    }
    // The search restarts 3 bytes before the new bytes, in case the blank line straddles two reads.
    const end = data.indexOf('\r\n\r\n', held === null ? from : Math.max(0, held.length - 3), 'latin1');
    if (end < 0) {
      if (data.length - from > MAX_HEAD_BYTES) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'response head too large');
      this.#head = held === null ? Buffer.from(buf.subarray(i)) : data;
      return buf.length;
    }
    if (end - from > MAX_HEAD_BYTES) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'response head too large');
    this.#head = null;
    this.#parseHead(data.toString('latin1', from, end));
    // Where the body starts in `buf`: past the blank line, less the bytes that came in earlier reads.
    const bodyAt = end + 4 - (held === null ? 0 : held.length - i);
    return bodyAt;
  }

  #parseHead (text: string): void {
    const lines = text.split('\r\n');
    const status = statusOf(lines[0]);
    if (status === 101) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'unexpected protocol switch');
    if (status < 200) {
      // An interim response (100 Continue, 103 Early Hints): the real one follows.
      this.#state = S.Head;
      return;
    }
    const http10 = lines[0].charCodeAt(7) === 48;
    const headers: string[] = [];
    let length = -1;
    let chunked = false;
    let te = false;
    let close = http10;
    for (let k = 1; k < lines.length; k++) {
      const line = lines[k];
      const colon = line.indexOf(':');
      if (colon <= 0 || !isToken(line, colon)) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad header line');
      const name = line.slice(0, colon).toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers.push(name, value);
      if (name === 'content-length') {
        if (!/^\d{1,15}$/.test(value)) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad content-length');
        const v = Number(value);
        if (length >= 0 && v !== length) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'conflicting content-length');
        length = v;
      } else if (name === 'transfer-encoding') {
        te = true;
        const codings = value.toLowerCase().split(',');
        chunked = codings[codings.length - 1].trim() === 'chunked';
      } else if (name === 'connection') {
        const v = value.toLowerCase();
        if (/(^|[\s,])close($|[\s,])/.test(v)) close = true;
        else if (http10 && /(^|[\s,])keep-alive($|[\s,])/.test(v)) close = false;
      }
    }
    this.#reusable = !close;
    this.sink.head(status, headers);
    if (this.#state !== S.Head) return; // the sink stopped the response
    if (!this.#expectBody || status === 204 || status === 304) return this.#finish(false);
    if (te) {
      // Transfer-Encoding overrides Content-Length; such a message must not leave the connection reusable.
      if (length >= 0) this.#reusable = false;
      if (chunked) {
        this.#state = S.ChunkSize;
        this.#remaining = 0;
        this.#digits = 0;
      } else {
        this.#state = S.UntilClose;
      }
    } else if (length >= 0) {
      this.#state = S.Length;
      this.#remaining = length;
      if (length === 0) this.#finish(false);
    } else {
      this.#state = S.UntilClose;
    }
  }
}

function statusOf (line: string): number {
  // "HTTP/1.1 200 OK"; the reason phrase may be empty or absent.
  if (line.length < 12 || !line.startsWith('HTTP/1.') || (line.charCodeAt(7) !== 48 && line.charCodeAt(7) !== 49) ||
    line.charCodeAt(8) !== 32 || (line.length > 12 && line.charCodeAt(12) !== 32)) {
    throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad status line');
  }
  let s = 0;
  for (let k = 9; k < 12; k++) {
    const d = line.charCodeAt(k) - 48;
    if (d < 0 || d > 9) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad status line');
    s = s * 10 + d;
  }
  if (s < 100) throw new UpstreamError('EAR_ERR_UPSTREAM_PROTOCOL', 'bad status line');
  return s;
}

function isToken (line: string, end: number): boolean {
  for (let k = 0; k < end; k++) {
    const c = line.charCodeAt(k);
    if (c <= 32 || c >= 127 || c === 34 || c === 40 || c === 41 || c === 44 || c === 47 || (c >= 58 && c <= 64) ||
      c === 91 || c === 92 || c === 93 || c === 123 || c === 125) return false;
  }
  return true;
}

function hexValue (c: number): number {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

function hasCtl (s: string): boolean {
  for (let k = 0; k < s.length; k++) {
    const c = s.charCodeAt(k);
    if (c === 13 || c === 10 || c === 0) return true;
  }
  return false;
}

/** A request of the pool's, waiting or on a connection. */
class Call implements UpstreamCall {
  conn: Connection | null = null;
  done = false;
  paused = false;

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
class Connection implements ParserSink {
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
    this.socket.on('error', (e: Error) => this.fail(e));
    this.socket.on('close', () => this.fail(new UpstreamError('EAR_ERR_UPSTREAM_CLOSED', 'the upstream closed the connection')));
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
      this.fail(err as Error);
      return;
    }
    this.fail(new UpstreamError('EAR_ERR_UPSTREAM_CLOSED', 'the upstream closed the connection'));
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
export interface UpstreamPoolStats {
  connects: number;
  queueFull: number;
  /** Idle sockets found dead when taken (the request went to another socket). */
  staleSockets: number;
}

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
  readonly stats: UpstreamPoolStats = { connects: 0, queueFull: 0, staleSockets: 0 };
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
    while (idle.length > 0) {
      const c = idle.pop()!;
      if (c.usable) return c;
      // The server closed it and we have not seen the close yet: nothing was written, so another socket is safe.
      this.stats.staleSockets++;
      c.close();
    }
    if (this.#all.size >= this.connections) return null;
    const c = new Connection(this);
    this.stats.connects++;
    this.#all.add(c);
    this.#timer ??= setInterval(() => this.#tick(), this.#tickMs).unref();
    return c;
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
        const limit = c.keepAliveHint >= 0 ? Math.min(c.keepAliveHint, this.keepAliveTimeoutMs) : this.keepAliveTimeoutMs;
        if (now - c.idleSince > limit) c.close();
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
