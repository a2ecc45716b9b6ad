// An HTTP/1.1 response reader for the upstream client (connection.ts feeds it socket reads): head, then a body
// framed by Content-Length, chunked transfer-encoding or the connection's close; bounded heads, chunk lines and
// trailers.
import { UpstreamError } from './errors.js';

const MAX_HEAD_BYTES = 64 << 10;
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
