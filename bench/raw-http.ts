// One HTTP/1.1 exchange as raw bytes over node:net, for the gateway fuzzer: whatever bytes a case holds go out
// unchanged (no client library would send a bare CR in a header or a Content-Length that lies), and the
// answer is read back as the server framed it (Content-Length, chunked, or until close).
import net from 'node:net';

export interface RawAnswer {
  /**
   * 'answered': a complete response; 'closed': the server closed with no (or a partial) response; 'timeout':
   * neither within the bound ('held' is the fuzzer's name for a timeout it allows).
   */
  kind: 'answered' | 'closed' | 'timeout' | 'held';
  status: number;
  headers: Array<[string, string]>;
  body: Buffer;
  /** The bytes received, for reports. */
  raw: Buffer;
}

const HEAD_END = Buffer.from('\r\n\r\n');

interface Parsed { status: number; headers: Array<[string, string]>; body: Buffer; complete: boolean }

/** Parses a response out of `buf`: complete when its framing says so (`closed`: the peer ended, so read-to-close bodies end too). */
export function parseResponse (buf: Buffer, closed: boolean): Parsed | null {
  // Interim answers (100 Continue to `expect: 100-continue`) come before the response: skip them.
  while (/^HTTP\/1\.[01] 1\d\d /.test(buf.subarray(0, 13).toString('latin1')) && buf.indexOf(HEAD_END) >= 0) buf = buf.subarray(buf.indexOf(HEAD_END) + 4);
  const end = buf.indexOf(HEAD_END);
  if (end < 0) return null;
  const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(lines[0]);
  if (m === null) return null;
  const status = Number(m[1]);
  const headers: Array<[string, string]> = [];
  for (const l of lines.slice(1)) {
    const i = l.indexOf(':');
    if (i > 0) headers.push([l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim()]);
  }
  const rest = buf.subarray(end + 4);
  const get = (k: string): string | undefined => headers.find(([h]) => h === k)?.[1];
  if (status === 204 || status === 304) return { status, headers, body: Buffer.alloc(0), complete: true };
  const te = get('transfer-encoding');
  if (te !== undefined && /chunked/i.test(te)) {
    const chunks: Buffer[] = [];
    let at = 0;
    for (;;) {
      const nl = rest.indexOf('\r\n', at);
      if (nl < 0) return { status, headers, body: Buffer.concat(chunks), complete: false };
      const size = parseInt(rest.subarray(at, nl).toString('latin1'), 16);
      if (!Number.isFinite(size)) return { status, headers, body: Buffer.concat(chunks), complete: closed };
      if (size === 0) return { status, headers, body: Buffer.concat(chunks), complete: true };
      if (rest.length < nl + 2 + size + 2) return { status, headers, body: Buffer.concat(chunks), complete: false };
      chunks.push(rest.subarray(nl + 2, nl + 2 + size));
      at = nl + 2 + size + 2;
    }
  }
  const cl = get('content-length');
  if (cl !== undefined) {
    const n = Number(cl);
    return { status, headers, body: rest.subarray(0, n), complete: rest.length >= n };
  }
  return { status, headers, body: rest, complete: closed };
}

/**
 * Sends `bytes` to host:port and resolves with the first response (or how the exchange ended). `halfClose`
 * ends the client's side after sending (a client that has nothing more to send); the connection is
 * destroyed once a response is complete or `timeoutMs` passed.
 */
export function rawExchange (port: number, bytes: Buffer, timeoutMs: number, halfClose = false, host = '127.0.0.1'): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host });
    const got: Buffer[] = [];
    let done = false;
    const finish = (kind: RawAnswer['kind'], p: Parsed | null): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      const raw = Buffer.concat(got);
      resolve(p === null ? { kind, status: 0, headers: [], body: Buffer.alloc(0), raw } : { kind, status: p.status, headers: p.headers, body: p.body, raw });
    };
    const timer = setTimeout(() => finish('timeout', parseResponse(Buffer.concat(got), false)), timeoutMs);
    sock.on('connect', () => {
      sock.write(bytes);
      if (halfClose) sock.end();
    });
    sock.on('data', (d: Buffer) => {
      got.push(d);
      const p = parseResponse(Buffer.concat(got), false);
      if (p !== null && p.complete) finish('answered', p);
    });
    const closed = (): void => {
      const p = parseResponse(Buffer.concat(got), true);
      finish(p !== null && p.complete ? 'answered' : 'closed', p);
    };
    sock.on('end', closed);
    sock.on('close', closed);
    // ECONNRESET after the server answered and closed is an ending like any other; ECONNREFUSED has no answer.
    sock.on('error', closed);
  });
}
