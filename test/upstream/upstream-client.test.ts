import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import fc from 'fast-check';
import { ResponseParser, type ParserSink } from '../../src/upstream/parser.js';
import { UpstreamError } from '../../src/upstream/errors.js';
import { UpstreamPool, type UpstreamCall, type UpstreamHandler } from '../../src/upstream/pool.js';
import { until } from '../fixtures/wait.js';

// ---- the parser, fed bytes directly ----

interface Seen {
  heads: Array<[number, string[]]>;
  body: string;
  reusable: boolean | null;
}

function sink (seen: Seen): ParserSink {
  return {
    head (status, headers) { seen.heads.push([status, headers]); },
    // The parser hands out views of its input: copy, as a caller that keeps them must.
    data (chunk) { seen.body += Buffer.from(chunk).toString('latin1'); return true; },
    complete (reusable) { assert.equal(seen.reusable, null, 'completed twice'); seen.reusable = reusable; }
  };
}

function parse (pieces: Buffer[], eof = false): Seen {
  const seen: Seen = { heads: [], body: '', reusable: null };
  const p = new ResponseParser(sink(seen));
  p.start();
  for (const b of pieces) p.feed(b);
  if (eof) p.end();
  return seen;
}

function splitAt (all: Buffer, cuts: number[]): Buffer[] {
  const out: Buffer[] = [];
  let prev = 0;
  for (const c of [...cuts].sort((a, b) => a - b)) {
    out.push(all.subarray(prev, c));
    prev = c;
  }
  out.push(all.subarray(prev));
  return out;
}

const SSE = 'data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n';
const CHUNKED = 'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n' +
  'f\r\ndata: {"a":1}\n\n\r\n' + 'F;ext=1\r\ndata: {"b":2}\n\n\r\n' + 'e \r\ndata: [DONE]\n\n\r\n' + '0\r\nx-trailer: 1\r\n\r\n';

const CASES: Array<{ name: string; raw: string; eof?: boolean; status: number; body: string; reusable: boolean; contentType?: string }> = [
  { name: 'content-length', raw: 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}', status: 200, body: '{"ok":true}', reusable: true, contentType: 'application/json' },
  { name: 'chunked with extensions and trailers', raw: CHUNKED, status: 200, body: SSE, reusable: true, contentType: 'text/event-stream' },
  { name: 'interim 100 and 103 before the answer', raw: 'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </x>\r\n\r\nHTTP/1.1 503 Service Unavailable\r\ncontent-length: 2\r\n\r\nno', status: 503, body: 'no', reusable: true },
  { name: 'no body on 204', raw: 'HTTP/1.1 204 No Content\r\n\r\n', status: 204, body: '', reusable: true },
  { name: 'empty content-length', raw: 'HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n', status: 200, body: '', reusable: true },
  { name: 'connection: close', raw: 'HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 3\r\n\r\nabc', status: 200, body: 'abc', reusable: false },
  { name: 'body until close', raw: 'HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nall of it', eof: true, status: 200, body: 'all of it', reusable: false },
  { name: 'HTTP/1.0 without keep-alive', raw: 'HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nhi', status: 200, body: 'hi', reusable: false },
  { name: 'HTTP/1.0 with keep-alive', raw: 'HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nhi', status: 200, body: 'hi', reusable: true },
  { name: 'transfer-encoding beats content-length, not reusable', raw: 'HTTP/1.1 200 OK\r\ncontent-length: 99\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n', status: 200, body: 'hi', reusable: false },
  { name: 'status line without a reason', raw: 'HTTP/1.1 200\r\ncontent-length: 1\r\n\r\nx', status: 200, body: 'x', reusable: true }
];

test('every kind of framing reads the same split at every byte offset', () => {
  for (const c of CASES) {
    const all = Buffer.from(c.raw, 'latin1');
    const whole = parse([all], c.eof);
    assert.equal(whole.heads.length, 1, c.name);
    assert.equal(whole.heads[0][0], c.status, c.name);
    assert.equal(whole.body, c.body, c.name);
    assert.equal(whole.reusable, c.reusable, c.name);
    if (c.contentType) {
      const h = whole.heads[0][1];
      assert.equal(h[h.indexOf('content-type') + 1], c.contentType, c.name);
    }
    for (let at = 1; at < all.length; at++) assert.deepEqual(parse(splitAt(all, [at]), c.eof), whole, `${c.name} split at ${at}`);
    assert.deepEqual(parse(splitAt(all, Array.from({ length: all.length - 1 }, (_, i) => i + 1)), c.eof), whole, `${c.name} byte by byte`);
  }
});

test('any chunking of a chunked stream gives the same head and body (property)', () => {
  fc.assert(fc.property(
    fc.array(fc.string({ minLength: 1, maxLength: 40 }), { minLength: 0, maxLength: 8 }),
    fc.array(fc.integer({ min: 1, max: 10_000 }), { maxLength: 12 }),
    (pieces, rawCuts) => {
      let raw = 'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n';
      for (const p of pieces) raw += `${Buffer.byteLength(p).toString(16)}\r\n${p}\r\n`;
      raw += '0\r\n\r\n';
      const all = Buffer.from(raw);
      const cuts = [...new Set(rawCuts.map((c) => c % all.length).filter((c) => c > 0))];
      const seen: Seen = { heads: [], body: '', reusable: null };
      const bytes: Buffer[] = [];
      const p = new ResponseParser({ ...sink(seen), data (c) { bytes.push(Buffer.from(c)); return true; } });
      p.start();
      for (const b of splitAt(all, cuts)) p.feed(b);
      assert.equal(seen.heads.length, 1);
      assert.equal(Buffer.concat(bytes).toString(), pieces.join(''));
      assert.equal(seen.reusable, true);
    }
  ));
});

test('malformed responses throw a protocol error instead of crashing or guessing', () => {
  const bad = [
    'HTTP/2 200 OK\r\n\r\n',
    'HTTP/1.1 2x0 OK\r\n\r\n',
    'ICY 200 OK\r\n\r\n',
    'HTTP/1.1 200 OK\r\nno colon here\r\n\r\n',
    'HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n',
    'HTTP/1.1 200 OK\r\n folded: x\r\n\r\n',
    'HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n',
    'HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nxx',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabc\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\nab\r\n',
    'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nfffffffffffffff\r\n',
    'HTTP/1.1 101 Switching Protocols\r\n\r\n'
  ];
  for (const raw of bad) {
    assert.throws(() => parse([Buffer.from(raw)]), (e: unknown) => e instanceof UpstreamError && e.code === 'EAR_ERR_UPSTREAM_PROTOCOL', JSON.stringify(raw));
  }
  // A head that never ends is cut off at its bound.
  assert.throws(() => parse([Buffer.from('HTTP/1.1 200 OK\r\n'), Buffer.alloc(70_000, 'a')]), (e: unknown) => e instanceof UpstreamError && e.code === 'EAR_ERR_UPSTREAM_PROTOCOL');
  // Bytes nobody asked for: the answer is still whole, the connection is not reused, and more bytes are an error.
  const extra = parse([Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n')]);
  assert.equal(extra.body, 'ok');
  assert.equal(extra.reusable, false);
  // End of stream before the body ends.
  assert.throws(() => parse([Buffer.from('HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nab')], true), (e: unknown) => e instanceof UpstreamError && e.code === 'EAR_ERR_UPSTREAM_CLOSED');
});

// ---- the pool, against raw TCP servers ----

interface RawServer {
  url: string;
  /** Requests as received (head and body), in order. */
  requests: string[];
  /** Sockets accepted so far. */
  connections: number;
  sockets: Set<net.Socket>;
  close (): Promise<void>;
}

/** A server that reads whole requests (content-length framed) and answers each with `answer`. */
async function rawServer (answer: (req: string, socket: net.Socket, n: number) => void): Promise<RawServer> {
  const s: RawServer = { url: '', requests: [], connections: 0, sockets: new Set(), close: async () => {} };
  const server = net.createServer((socket) => {
    s.connections++;
    s.sockets.add(socket);
    socket.on('close', () => s.sockets.delete(socket));
    socket.on('error', () => {});
    let buf = '';
    socket.on('data', (d) => {
      buf += d.toString('latin1');
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const m = /content-length: (\d+)/i.exec(buf.slice(0, end));
        const total = end + 4 + (m ? Number(m[1]) : 0);
        if (buf.length < total) return;
        const req = buf.slice(0, total);
        buf = buf.slice(total);
        s.requests.push(req);
        answer(req, socket, s.requests.length);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  s.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  s.close = () => new Promise((resolve) => {
    for (const x of s.sockets) x.destroy();
    server.close(() => resolve());
  });
  return s;
}

interface Outcome {
  status: number;
  headers: string[];
  body: string;
  error: Error | null;
  reads: number;
}

/** Sends one request; resolves when it completes or fails. `hooks` may pause or abort. */
function send (pool: UpstreamPool, body = '{"x":1}', hooks: { onStart?: (c: UpstreamCall) => void; onData?: (c: Buffer, o: Outcome) => boolean } = {}): Promise<Outcome> {
  return new Promise((resolve) => {
    const o: Outcome = { status: 0, headers: [], body: '', error: null, reads: 0 };
    const h: UpstreamHandler = {
      onStart: (c) => hooks.onStart?.(c),
      onHeaders (status, headers) { o.status = status; o.headers = headers; },
      onData (chunk) { o.body += Buffer.from(chunk).toString(); return hooks.onData ? hooks.onData(chunk, o) : true; },
      onReadEnd () { o.reads++; return true; },
      onComplete () { resolve(o); },
      onError (err) { o.error = err; resolve(o); }
    };
    pool.dispatch({ method: 'POST', path: '/v1/chat/completions', headers: [['content-type', 'application/json'], ['x-request-id', 'r1']], body: Buffer.from(body) }, h);
  });
}

const ok = (body: string, extra = ''): string => `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n${extra}content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const options = { connections: 4, headersTimeoutMs: 5000, bodyTimeoutMs: 5000 };

test('requests reuse one keep-alive connection, are written whole, and are never pipelined', async () => {
  let pending = false;
  let overlapped = false;
  const srv = await rawServer((_req, socket) => {
    if (pending) overlapped = true;
    pending = true;
    setTimeout(() => { pending = false; socket.write(ok('{"n":1}')); }, 5);
  });
  const pool = new UpstreamPool(srv.url, { ...options, connections: 1 });
  try {
    const results = await Promise.all([send(pool, '{"a":"é"}'), send(pool), send(pool)]);
    for (const r of results) {
      assert.equal(r.error, null);
      assert.equal(r.status, 200);
      assert.equal(r.body, '{"n":1}');
    }
    assert.equal(srv.connections, 1);
    assert.equal(overlapped, false, 'a second request was sent before the first was answered');
    const [first] = srv.requests;
    assert.match(first, /^POST \/v1\/chat\/completions HTTP\/1\.1\r\n/);
    assert.match(first, new RegExp(`\r\nhost: ${new URL(srv.url).host}\r\n`));
    // content-length counts bytes, not characters (the server reads latin1).
    assert.ok(first.endsWith(`\r\ncontent-type: application/json\r\nx-request-id: r1\r\ncontent-length: 10\r\n\r\n${Buffer.from('{"a":"é"}').toString('latin1')}`), first);
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('connection: close and a server that drops idle sockets: the next request opens a new connection', async () => {
  const srv = await rawServer((_req, socket, n) => {
    if (n === 1) socket.write(ok('one', 'connection: close\r\n'), () => socket.end());
    else socket.write(ok('more'));
  });
  const pool = new UpstreamPool(srv.url, options);
  try {
    assert.equal((await send(pool)).body, 'one');
    assert.equal((await send(pool)).body, 'more');
    assert.equal(srv.connections, 2);
    // The server closes its idle sockets; once the client has seen it, a request reconnects without an error.
    for (const s of srv.sockets) s.end();
    await until(() => pool.size === 0, 'the client to see its sockets closed');
    const r = await send(pool);
    assert.equal(r.error, null);
    assert.equal(r.body, 'more');
    assert.equal(srv.connections, 3);
    assert.equal(srv.requests.length, 3, 'no request was sent twice');
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('a reused socket closed before a byte of the answer (the keep-alive race) sends the request again on a new socket, once; any other loss is the caller\'s', async () => {
  // Requests 1 and 3 are answered; 2 meets its reused socket closed unanswered (the server's idle timeout as it
  // arrived) and goes again, as 3, on a new socket; 4 and 5 (its resend) both meet a closed socket: the caller gets
  // the error; 6, on a fresh socket, dies unanswered: not sent again; 7 is answered, 8 gets half a head: not sent again.
  const srv = await rawServer((_req, socket, n) => {
    if (n === 1 || n === 3 || n === 7) socket.write(ok(`answer ${n}`));
    else if (n === 8) socket.write('HTTP/1.1 200 OK\r\ncontent-', () => socket.destroy());
    else socket.destroy();
  });
  const pool = new UpstreamPool(srv.url, { ...options, connections: 1 });
  try {
    assert.equal((await send(pool)).body, 'answer 1');
    const again = await send(pool);
    assert.equal(again.error, null);
    assert.equal(again.body, 'answer 3');
    assert.equal(srv.requests.length, 3);
    assert.equal(srv.requests[2], srv.requests[1], 'the same request, whole');
    assert.equal(srv.connections, 2);
    assert.equal(pool.stats.resent, 1);
    // Twice in a row: sent again once, then the error is the caller's.
    const twice = await send(pool);
    assert.ok(twice.error instanceof UpstreamError || (twice.error as NodeJS.ErrnoException)?.code === 'ECONNRESET', String(twice.error));
    assert.equal(srv.requests.length, 5);
    assert.equal(pool.stats.resent, 2);
    // A fresh socket that dies unanswered: the server may have taken the request; not sent again.
    const fresh = await send(pool);
    assert.notEqual(fresh.error, null);
    assert.equal(srv.requests.length, 6);
    // A reused socket that began to answer: not sent again.
    assert.equal((await send(pool)).body, 'answer 7');
    const half = await send(pool);
    assert.notEqual(half.error, null);
    assert.equal(srv.requests.length, 8);
    assert.equal(pool.stats.resent, 2);
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('an idle socket past its keep-alive is not reused even when the timer that closes it is late (a stalled loop)', async () => {
  const srv = await rawServer((_req, socket) => { socket.write(ok('k')); });
  const pool = new UpstreamPool(srv.url, { ...options, keepAliveTimeoutMs: 200 });
  try {
    assert.equal((await send(pool)).body, 'k');
    await new Promise((resolve) => setImmediate(resolve)); // the socket back in the idle list
    assert.equal(pool.size, 1);
    // Block this thread past the keep-alive: the pool's tick cannot run, the socket is still in its idle list.
    const until = performance.now() + 400;
    while (performance.now() < until);
    assert.equal((await send(pool)).body, 'k');
    assert.equal(srv.connections, 2);
    assert.equal(pool.stats.staleSockets, 1);
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('connect errors, timeouts, mid-body closes and malformed answers reach onError; the pool keeps working', async () => {
  const refused = new UpstreamPool('http://127.0.0.1:1', options);
  const r0 = await send(refused);
  assert.equal((r0.error as NodeJS.ErrnoException).code, 'ECONNREFUSED');
  await refused.close();

  const srv = await rawServer((req, socket) => {
    if (req.includes('"silent"')) return; // never answers
    if (req.includes('"stall"')) return void socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc');
    if (req.includes('"cut"')) return void socket.write('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc', () => socket.destroy());
    if (req.includes('"garbage"')) return void socket.write('HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n');
    socket.write(ok('fine'));
  });
  const pool = new UpstreamPool(srv.url, { connections: 4, headersTimeoutMs: 150, bodyTimeoutMs: 150 });
  try {
    const code = (o: Outcome): string | undefined => (o.error as UpstreamError | null)?.code;
    const [silent, stall, cut, garbage] = await Promise.all(['"silent"', '"stall"', '"cut"', '"garbage"'].map((b) => send(pool, b)));
    assert.equal(code(silent), 'EAR_ERR_UPSTREAM_HEADERS_TIMEOUT');
    assert.equal(code(stall), 'EAR_ERR_UPSTREAM_BODY_TIMEOUT');
    assert.equal(stall.status, 200);
    assert.equal(code(cut), 'EAR_ERR_UPSTREAM_CLOSED');
    assert.equal(cut.body, 'abc');
    assert.equal(code(garbage), 'EAR_ERR_UPSTREAM_PROTOCOL');
    const fine = await send(pool);
    assert.equal(fine.error, null);
    assert.equal(fine.body, 'fine');
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('the pool is bounded: at most `connections` sockets, then a bounded queue, then EAR_ERR_UPSTREAM_QUEUE_FULL', async () => {
  const srv = await rawServer((_req, socket) => { setTimeout(() => socket.write(ok('q')), 20); });
  const pool = new UpstreamPool(srv.url, { ...options, connections: 1, maxQueued: 1 });
  try {
    const rs = await Promise.all([send(pool), send(pool), send(pool)]);
    assert.deepEqual(rs.map((r) => r.body), ['q', 'q', '']);
    assert.equal((rs[2].error as UpstreamError).code, 'EAR_ERR_UPSTREAM_QUEUE_FULL');
    assert.equal(pool.stats.queueFull, 1);
    assert.equal(srv.connections, 1);
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('abort: a queued request leaves the queue, one in flight closes its connection; both report the abort', async () => {
  const srv = await rawServer((req, socket) => { if (!req.includes('"hang"')) socket.write(ok('x')); });
  const pool = new UpstreamPool(srv.url, { ...options, connections: 1 });
  try {
    const gone = new Error('client gone');
    let inflight: UpstreamCall | null = null;
    let queued: UpstreamCall | null = null;
    const a = send(pool, '"hang"', { onStart: (c) => { inflight = c; } });
    const b = send(pool, '"q"', { onStart: (c) => { queued = c; } });
    assert.equal(pool.queued, 1);
    queued!.abort(gone);
    assert.equal((await b).error, gone);
    assert.equal(pool.queued, 0);
    await until(() => srv.requests.length > 0, 'the in-flight request to reach the server');
    inflight!.abort(gone);
    assert.equal((await a).error, gone);
    assert.equal(pool.size, 0);
    assert.equal((await send(pool)).body, 'x');
    assert.equal(srv.requests.length, 2, 'the aborted queued request was never sent');
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('a paused request reads nothing more until resumed, then gets the whole body', async () => {
  const big = 'y'.repeat(1 << 20);
  const srv = await rawServer((_req, socket) => {
    socket.write('HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n');
    for (let i = 0; i < big.length; i += 8192) socket.write(`2000\r\n${big.slice(i, i + 8192)}\r\n`);
    socket.write('0\r\n\r\n');
  });
  const pool = new UpstreamPool(srv.url, options);
  try {
    let call: UpstreamCall | null = null;
    let paused = false;
    let readsWhenPaused = -1;
    const done = send(pool, '{}', {
      onStart: (c) => { call = c; },
      onData: (_c, o) => {
        if (paused || o.body.length < 100_000) return true;
        paused = true;
        setTimeout(() => {
          readsWhenPaused = o.reads;
          setTimeout(() => {
            assert.equal(o.reads, readsWhenPaused, 'read while paused');
            call!.resume();
          }, 50);
        }, 0);
        return false;
      }
    });
    const r = await done;
    assert.equal(r.error, null);
    assert.equal(r.body.length, big.length);
    assert.ok(paused && readsWhenPaused > 0);
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('close() lets the request in flight finish, then refuses new ones', async () => {
  const srv = await rawServer((_req, socket) => { setTimeout(() => socket.write(ok('late')), 30); });
  const pool = new UpstreamPool(srv.url, options);
  try {
    const inflight = send(pool);
    const closed = pool.close();
    const after = await send(pool);
    assert.equal((after.error as UpstreamError).code, 'EAR_ERR_UPSTREAM_POOL_CLOSED');
    assert.equal((await inflight).body, 'late');
    await closed;
    assert.equal(pool.size, 0);
  } finally {
    await srv.close();
  }
});

test('headers with CR or LF are refused before anything is written', async () => {
  const srv = await rawServer((_req, socket) => { socket.write(ok('no')); });
  const pool = new UpstreamPool(srv.url, options);
  try {
    const r = await new Promise<Error | null>((resolve) => {
      pool.dispatch({ method: 'POST', path: '/x', headers: [['x-evil', 'a\r\nb: c']], body: null }, {
        onStart () {}, onHeaders () {}, onData: () => true, onReadEnd: () => true, onComplete: () => resolve(null), onError: resolve
      });
    });
    assert.equal((r as UpstreamError).code, 'EAR_ERR_UPSTREAM_BAD_REQUEST');
    assert.equal(srv.connections, 0);
  } finally {
    await pool.close();
    await srv.close();
  }
});

test('idle sockets close after keepAliveTimeoutMs, or sooner when the server says keep-alive: timeout=1', async () => {
  const srv = await rawServer((req, socket) => { socket.write(ok('k', req.includes('"hint"') ? 'keep-alive: timeout=1\r\n' : '')); });
  const short = new UpstreamPool(srv.url, { ...options, keepAliveTimeoutMs: 100 });
  const long = new UpstreamPool(srv.url, { ...options, keepAliveTimeoutMs: 60_000 });
  // Within 3 s: the idle socket goes at its keep-alive timeout, long before the pool's own 60 s.
  const gone = (pool: UpstreamPool, what: string): Promise<boolean> => until(() => pool.size === 0, { what, timeoutMs: 3000 });
  try {
    assert.equal((await send(short)).body, 'k');
    assert.equal(short.size, 1);
    await gone(short, 'the idle socket to go after keepAliveTimeoutMs');
    assert.equal((await send(short)).body, 'k');
    assert.equal(short.stats.connects, 2);
    // timeout=1 leaves no second to spare: the socket goes at the next check, long before 60 s.
    assert.equal((await send(long, '"hint"')).body, 'k');
    await gone(long, 'the idle socket to go after the server\'s keep-alive hint');
  } finally {
    await short.close();
    await long.close();
    await srv.close();
  }
});
