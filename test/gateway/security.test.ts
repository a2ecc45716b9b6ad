// Security, against running `ear serve` processes (issue 13 item 5): the admin token and what path tricks
// reach; client API keys; per-key and per-IP rate limits; what reaches an engine (headers are an allowlist, a
// client's kv_transfer_params never); and no connection to a host a request names (SSRF).
// Requests go over raw node:net where the bytes matter: fetch and undici normalize paths and refuse headers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer as createHttpServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, createServer as createTcpServer, type AddressInfo } from 'node:net';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN, metric, SERVE_LISTENING, simFleet, start, stop, text, type Proc, type SimFleet } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';
import { wholeAnswer } from '../fixtures/raw-answer.js';
import { THREAD_INLINE_FEATURES_MAX_BYTES } from '../../src/features/inline-features.js';

/** A message over every thread's inline bound: its request's features come from the route pool. */
const POOLED = THREAD_INLINE_FEATURES_MAX_BYTES + 2000;

const ENGINE_KEY = 'sk-engine-only';
const OPEN_KEY = 'k-open';
const LIMITED_KEY = 'k-limited';

// ---------------------------------------------------------------------------------------------------------
// A recording engine: every request's method, path, headers (as sent, duplicates kept) and body. It serves
// /v1/* only with its own key, as vLLM --api-key does, so a gateway that does not send it serves nothing.

interface Recorded { method: string; url: string; headers: Array<[string, string]>; body: string }

interface RecordingEngine { url: string; hostPort: string; got: Recorded[]; close (): Promise<void> }

async function recordingEngine (): Promise<RecordingEngine> {
  const got: Recorded[] = [];
  const server: Server = createHttpServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const headers: Array<[string, string]> = [];
      for (let i = 0; i < req.rawHeaders.length; i += 2) headers.push([req.rawHeaders[i].toLowerCase(), req.rawHeaders[i + 1]]);
      const body = Buffer.concat(chunks).toString('utf8');
      if (req.url === '/health') return res.end();
      if (req.url === '/metrics') return res.end('vllm:num_requests_running{engine="0",model_name="m"} 0\n');
      if (req.url?.startsWith('/v1/') === true && req.headers.authorization !== `Bearer ${ENGINE_KEY}`) {
        res.statusCode = 401;
        return res.end('{"error":"Unauthorized"}');
      }
      if (req.url === '/v1/models') return res.end(JSON.stringify({ object: 'list', data: [{ id: 'm', object: 'model' }] }));
      got.push({ method: req.method ?? '', url: req.url ?? '', headers, body });
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ id: 'x', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, text: 'ok', finish_reason: 'stop' }], usage: { prompt_tokens: 10, completion_tokens: 1, total_tokens: 11 } }));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    hostPort: `127.0.0.1:${port}`,
    got,
    async close () {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  };
}

/** A TCP server that only counts the connections it gets. */
async function canary (): Promise<{ port: number; connections: () => number; close (): Promise<void> }> {
  let n = 0;
  const server = createTcpServer((s) => { n++; s.destroy(); });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { port: (server.address() as AddressInfo).port, connections: () => n, close: () => new Promise<void>((r) => server.close(() => r())) };
}

// ---------------------------------------------------------------------------------------------------------
// Raw HTTP/1.1 over a socket.

interface RawAnswer {
  /** null: no status line came (the server closed, or nothing arrived). */
  status: number | null;
  head: string;
  body: string;
  /** 'server': the server closed the connection; 'timeout': the test's own bound passed first; 'client': `untilAnswer` and the answer came whole. */
  closedBy: 'server' | 'timeout' | 'client';
}

/** Sends `request` as is and reads until the server closes (requests say `connection: close`) or `timeoutMs`. */
/**
 * Sends `request` on a fresh connection and reads until the server closes it (or `timeoutMs`). `untilAnswer`: the
 * client closes once a whole answer with a Content-Length came, for a request that keeps its connection alive (a
 * server waits for the next request there, up to uWS's idle timeout of ~10 s).
 */
function raw (port: number, request: string | Buffer, timeoutMs = 30_000, untilAnswer = false): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let closedBy: RawAnswer['closedBy'] = 'server';
    const timer = setTimeout(() => { closedBy = 'timeout'; s.destroy(); }, timeoutMs);
    s.on('data', (d: Buffer) => {
      chunks.push(d);
      if (untilAnswer && wholeAnswer(Buffer.concat(chunks))) {
        closedBy = 'client';
        s.destroy();
      }
    });
    s.on('error', () => {});
    s.on('close', () => {
      clearTimeout(timer);
      const all = Buffer.concat(chunks).toString('latin1');
      const cut = all.indexOf('\r\n\r\n');
      const head = cut < 0 ? all : all.slice(0, cut);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(head);
      resolve({ status: m === null ? null : Number(m[1]), head, body: cut < 0 ? '' : Buffer.from(all.slice(cut + 4), 'latin1').toString('utf8'), closedBy });
    });
    s.write(request);
  });
}

function get (path: string, headers: string[] = []): string {
  return `GET ${path} HTTP/1.1\r\nhost: gw\r\n${headers.map((h) => `${h}\r\n`).join('')}connection: close\r\n\r\n`;
}

function post (path: string, body: string, headers: string[] = []): string {
  return `POST ${path} HTTP/1.1\r\nhost: gw\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${headers.map((h) => `${h}\r\n`).join('')}connection: close\r\n\r\n${body}`;
}

function headerOf (a: RawAnswer, name: string): string | null {
  const m = new RegExp(`^${name}: (.*)$`, 'im').exec(a.head);
  return m === null ? null : m[1].trim();
}

/** An OpenAI-style error body's code (asserting the shape). */
function errorCode (a: RawAnswer): string {
  const doc = JSON.parse(a.body) as { error: { message: unknown; type: unknown; code: unknown } };
  assert.equal(typeof doc.error.message, 'string', a.body);
  assert.equal(typeof doc.error.type, 'string', a.body);
  assert.equal(typeof doc.error.code, 'string', a.body);
  return doc.error.code as string;
}

const chatBody = (extra: Record<string, unknown> = {}): string => JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 1, ...extra });

// ---------------------------------------------------------------------------------------------------------

describe('security of a running gateway', () => {
  let engine: RecordingEngine;
  let gw: Proc;
  let port: number;
  let dir: string;

  before(async () => {
    engine = await recordingEngine();
    dir = mkdtempSync(join(tmpdir(), 'ear-sec-'));
    const cfg = join(dir, 'ear.yaml');
    writeFileSync(cfg, [
      'healthIntervalMs: 60000',
      'metricsIntervalMs: 0',
      `apiKeys: [${OPEN_KEY}, ${LIMITED_KEY}]`,
      'rateLimits:',
      '  keys:',
      `    ${LIMITED_KEY}: { requestsPerSecond: 0.01, burst: 2 }`,
      'backends:',
      `  - { id: r0, url: "${engine.url}", apiKey: ${ENGINE_KEY} }`,
      ''
    ].join('\n'));
    gw = await start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--admin-token', ADMIN], SERVE_LISTENING);
    port = Number(new URL(gw.url).port);
  });
  after(async () => {
    await stop(gw);
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('admin endpoints need the admin token: the canonical path with it answers, every path trick without it gets 4xx and no admin data', async () => {
    const ok = await raw(port, get('/admin/backends', [`authorization: Bearer ${ADMIN}`]));
    assert.equal(ok.status, 200, ok.body);
    assert.ok(ok.body.includes('"backends"') && ok.body.includes(engine.url), 'the control: admin data is recognizable');
    assert.ok(!ok.body.includes(ENGINE_KEY), 'a backend\'s engine key is never shown');

    const tricks = ['/admin/backends', '/admin/..%2f', '/admin/..%2fbackends', '/v1/../admin/backends', '//admin/backends', '/%61dmin/backends',
      '/ADMIN/backends', '/Admin/Backends', '/admin/backends/', '/admin/./backends', '/admin//backends', '/admin/backends%00', '/admin/backends;x',
      '/admin/backends?x=1', '/admin/backends#frag', '/admin/sessions/..%2F..%2Fx', '/admin/sessions/..%2F..%2Fadmin%2Fbackends',
      '/admin/sessions/%E0%A4%A', '/admin/sessions/%', `/admin/${'a'.repeat(4000)}`, `/${'a'.repeat(8000)}`];
    const wrongAuth = ['', `authorization: Bearer ${OPEN_KEY}`, `authorization: Bearer ${ADMIN.slice(0, -1)}`, `authorization: Bearer ${ADMIN}x`,
      `authorization: bearer ${ADMIN}`, `authorization: ${ADMIN}`, `authorization: Basic ${Buffer.from(`admin:${ADMIN}`).toString('base64')}`,
      `x-admin-token: ${ADMIN}`];
    for (const path of tricks) {
      const answers = await Promise.all(wrongAuth.map((auth) => raw(port, get(path, auth === '' ? [] : [auth]))));
      for (const [k, a] of answers.entries()) {
        const auth = wrongAuth[k];
        assert.equal(a.closedBy, 'server', `${path} [${auth}]: no hang`);
        if (a.status === null) continue; // uWS's parser refused the request line or header: closed, nothing sent
        // 431: the long paths make heads over maxHeaderBytes (4096), refused before any route is looked at.
        assert.ok([400, 401, 404, 431].includes(a.status), `${path.slice(0, 60)} [${auth}]: ${a.status} ${a.body.slice(0, 200)}`);
        errorCode(a);
        assert.ok(!a.body.includes('"backends"') && !a.body.includes(engine.url), `${path.slice(0, 60)} [${auth}] leaked admin data`);
      }
    }
    // With the token, a trick reaches nothing it should not either: only the canonical route serves.
    for (const path of tricks.filter((p) => p !== '/admin/backends' && p !== '/admin/backends?x=1')) {
      const a = await raw(port, get(path, [`authorization: Bearer ${ADMIN}`]));
      assert.ok(a.status !== null && [400, 404, 431].includes(a.status), `${path.slice(0, 60)} with the token: ${a.status} ${a.body.slice(0, 200)}`);
      errorCode(a);
      assert.ok(!a.body.includes('"backends"'), path);
      assert.ok(a.body.length < 1024, 'an error echoes a long path cut short');
    }
  });

  test('requests uWS\'s parser refuses (NUL, CR in the path, absolute-form, no leading slash, a path of 200 KB) are closed without a response: no admin data, no hang past uWS\'s idle timeout', async () => {
    const lines = [`GET /admin/backends\u0000x HTTP/1.1`, 'GET /admin/backends\rX HTTP/1.1', 'GET http://x/admin/backends HTTP/1.1', 'GET * HTTP/1.1',
      'GET admin/backends HTTP/1.1', `GET /admin/${'a'.repeat(200_000)} HTTP/1.1`, 'GET /admin/backends HTTP/1.1\r\nx-bad: a\u0000b'];
    // Together: the pinned uWS build drops a malformed request line at its idle timeout (about 10 s), not at once.
    const answers = await Promise.all(lines.map((l) => raw(port, `${l}\r\nhost: x\r\nauthorization: Bearer ${OPEN_KEY}\r\nconnection: close\r\n\r\n`, 60_000)));
    for (const [i, a] of answers.entries()) {
      const what = JSON.stringify(lines[i].slice(0, 40));
      assert.equal(a.closedBy, 'server', `${what}: the gateway closes it by itself`);
      assert.ok(a.status === null || [400, 404].includes(a.status), `${what}: ${a.status}`);
      assert.ok(!a.body.includes('"backends"'), what);
    }
    const alive = await raw(port, get('/health'));
    assert.equal(alive.status, 200);
  });

  test('client API keys: every /v1 route needs a configured key (Bearer or x-api-key, exact); a malformed context id no longer kills the gateway', async () => {
    const routes: Array<[string, (auth: string[]) => string]> = [
      ['chat', (h) => post('/v1/chat/completions', chatBody(), h)],
      ['completions', (h) => post('/v1/completions', JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 1 }), h)],
      ['context', (h) => post('/v1/context', chatBody(), h)],
      ['context get', (h) => get('/v1/context/ctx-none', h)],
      ['models', (h) => get('/v1/models', h)]
    ];
    for (const [name, req] of routes) {
      for (const auth of [[], [`authorization: Bearer ${OPEN_KEY.slice(0, -1)}`], [`authorization: Bearer ${OPEN_KEY}x`], [`authorization: ${OPEN_KEY}`], [`authorization: Bearer ${ADMIN}`], [`x-api-key: ${OPEN_KEY}x`], [`x-api-key: Bearer ${OPEN_KEY}`]]) {
        const a = await raw(port, req(auth));
        assert.equal(a.status, 401, `${name} ${auth.join()}: ${a.body}`);
        assert.equal(errorCode(a), 'EAR_ERR_UNAUTHORIZED');
      }
      // Anthropic's clients (Claude Code) send the key as x-api-key: accepted as the bearer token is.
      for (const auth of [`authorization: Bearer ${OPEN_KEY}`, `x-api-key: ${OPEN_KEY}`]) {
        const a = await raw(port, req([auth]));
        assert.ok(a.status === 200 || (name === 'context get' && a.status === 404), `${name} with the key (${auth.split(':')[0]}): ${a.status} ${a.body}`);
      }
    }
    // Before: decodeURIComponent threw inside the uWS handler, before the key was checked, and the process died.
    for (const auth of [[], [`authorization: Bearer ${OPEN_KEY}`]]) {
      for (const id of ['%E0%A4%A', '%', '%ZZ']) {
        const a = await raw(port, get(`/v1/context/${id}`, auth));
        assert.equal(a.status, auth.length === 0 ? 401 : 400, `${id}: ${a.body}`);
        const d = await raw(port, `DELETE /v1/context/${id} HTTP/1.1\r\nhost: gw\r\n${auth.map((h) => `${h}\r\n`).join('')}connection: close\r\n\r\n`);
        assert.equal(d.status, auth.length === 0 ? 401 : 400, `DELETE ${id}: ${d.body}`);
      }
    }
    assert.equal(gw.child.exitCode, null, 'the gateway is still running');
    assert.equal((await raw(port, get('/health'))).status, 200);
  });

  test('rate limits: a key with its own bucket gets 429 EAR_ERR_RATE_LIMITED with Retry-After past its burst, on every /v1 route; other keys are not affected; the metric names no key', async () => {
    const limited = [`authorization: Bearer ${LIMITED_KEY}`];
    for (let i = 0; i < 2; i++) {
      const a = await raw(port, post('/v1/chat/completions', chatBody(), limited));
      assert.equal(a.status, 200, `burst request ${i}: ${a.body}`);
    }
    for (const req of [post('/v1/chat/completions', chatBody(), limited), post('/v1/completions', JSON.stringify({ model: 'm', prompt: 'x' }), limited),
      post('/v1/context', chatBody(), limited), get('/v1/context/ctx-none', limited), get('/v1/models', limited)]) {
      const a = await raw(port, req);
      assert.equal(a.status, 429, a.body);
      assert.equal(errorCode(a), 'EAR_ERR_RATE_LIMITED');
      const retry = headerOf(a, 'retry-after');
      assert.match(retry ?? '', /^[0-9]+$/, 'Retry-After in whole seconds');
      assert.ok(Number(retry) >= 1 && Number(retry) <= 100, `a token comes back within 1/rate = 100 s: ${retry}`);
    }
    for (let i = 0; i < 6; i++) assert.equal((await raw(port, post('/v1/chat/completions', chatBody(), [`authorization: Bearer ${OPEN_KEY}`]))).status, 200, 'no limit of its own, no default');
    assert.ok(await metric(gw.url, 'ear_rate_limited_total', '{scope="key",route="/v1/chat/completions"}') >= 1);
    assert.ok(await metric(gw.url, 'ear_rate_limited_total', '{scope="key",route="/v1/context"}') >= 1);
    const m = await (await fetch(`${gw.url}/metrics`)).text();
    assert.ok(!m.includes(LIMITED_KEY) && !m.includes(OPEN_KEY), 'no key is a label');
  });

  test('upstream headers are an allowlist: a client\'s x-ear-*, hop-by-hop, authorization, cookie and host never reach the engine; the backend\'s own key does', async () => {
    const before = engine.got.length;
    const tricks = [
      'x-ear-backend: evil', 'x-ear-priority: high', 'x-ear-parent-session-id: p1', 'x-ear-internal: 1', 'x-session-id: s-headers',
      'keep-alive: timeout=999', 'te: trailers', 'trailer: x-evil', 'upgrade: h2c', 'proxy-authorization: Basic Zm9vOmJhcg==',
      'proxy-connection: keep-alive', 'cookie: session=stolen', 'x-forwarded-host: evil.example', 'x-forwarded-for: 10.9.9.9',
      'forwarded: host=evil.example', 'x-request-id: rid-sec-1'
    ];
    const key = `authorization: Bearer ${OPEN_KEY}`;
    const answers = [
      await raw(port, post('/v1/chat/completions', chatBody(), [key, ...tricks])),
      await raw(port, post('/v1/completions', JSON.stringify({ model: 'm', prompt: 'hi', max_tokens: 1 }), [key, ...tricks])),
      await raw(port, post('/v1/context', chatBody(), [key, ...tricks])),
      // The header names Connection lists are hop-by-hop too; a duplicated Host; a chunked body.
      await raw(port, post('/v1/chat/completions', chatBody(), [key, 'connection: keep-alive, x-secret', 'x-secret: 1', 'host: evil.example']), 30_000, true),
      await raw(port, `POST /v1/chat/completions HTTP/1.1\r\nhost: evil.example\r\n${key}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n${Buffer.byteLength(chatBody()).toString(16)}\r\n${chatBody()}\r\n0\r\n\r\n`)
    ];
    for (const [i, a] of answers.entries()) {
      assert.ok(a.status !== null && a.status < 500, `request ${i}: ${a.status} ${a.body}`);
    }
    const got = engine.got.slice(before);
    assert.ok(got.length >= 4, `the engine got the requests (${got.length})`);
    const allowed = new Set(['host', 'content-type', 'content-length', 'x-request-id', 'authorization']);
    for (const r of got) {
      for (const [name, value] of r.headers) assert.ok(allowed.has(name), `${name}: ${value} reached the engine`);
      assert.deepEqual(r.headers.filter(([n]) => n === 'host'), [['host', engine.hostPort]], 'the backend\'s own host, once');
      assert.deepEqual(r.headers.filter(([n]) => n === 'authorization'), [['authorization', `Bearer ${ENGINE_KEY}`]], 'the engine\'s key, never the client\'s');
      assert.ok(!r.body.includes('evil') && !r.body.includes('stolen'));
    }
    assert.ok(got.some((r) => r.headers.some(([n, v]) => n === 'x-request-id' && v === 'rid-sec-1')), 'a sane request id passes, for logs');
  });

  test('a client\'s kv_transfer_params never reach the engine: chat and completions, duplicated, escaped, over a session\'s spliced turns, and through /v1/context', async () => {
    const before = engine.got.length;
    const params = { do_remote_prefill: true, remote_host: '203.0.113.7', remote_port: 5600, remote_block_ids: [[1, 2]], remote_engine_id: 'e', remote_request_id: 'r' };
    const p = JSON.stringify(params);
    const key = `authorization: Bearer ${OPEN_KEY}`;
    const long = text('kv-strip', POOLED); // the route pool's session path (body splice)
    const turn1 = [{ role: 'user', content: long }];
    const turn2 = [...turn1, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'next' }];
    const bodies: Array<[string, string, string[]]> = [
      ['/v1/chat/completions', chatBody({ kv_transfer_params: params }), []],
      ['/v1/completions', JSON.stringify({ model: 'm', prompt: 'hi', kv_transfer_params: params }), []],
      ['/v1/completions', JSON.stringify({ model: 'm', prompt: [1, 2, 3, 4], kv_transfer_params: params }), []],
      ['/v1/chat/completions', `{"model":"m","kv_transfer_params":${p},"messages":[{"role":"user","content":"hi"}],"kv_transfer_params":${p}}`, []],
      ['/v1/chat/completions', `{"model":"m","messages":[{"role":"user","content":"hi"}],"kv\\u005ftransfer_params":${p}}`, []],
      ['/v1/chat/completions', JSON.stringify({ model: 'm', messages: turn1, kv_transfer_params: params }), ['x-session-id: s-kv']],
      ['/v1/chat/completions', JSON.stringify({ model: 'm', messages: turn2, kv_transfer_params: params }), ['x-session-id: s-kv']],
      ['/v1/chat/completions', `${JSON.stringify({ model: 'm', messages: turn2 }).slice(0, -1)},"kv_transfer_params":${p}}`, ['x-session-id: s-kv']],
      ['/v1/context', chatBody({ kv_transfer_params: params }), []]
    ];
    for (const [path, body, headers] of bodies) {
      const a = await raw(port, post(path, body, [key, ...headers]));
      assert.equal(a.status, 200, `${path} ${body.slice(0, 80)}: ${a.body}`);
    }
    const got = engine.got.slice(before);
    assert.equal(got.length, bodies.length, 'each reached the engine once');
    for (const r of got) {
      const doc = JSON.parse(r.body) as Record<string, unknown>;
      assert.ok(!('kv_transfer_params' in doc), `kv_transfer_params reached the engine: ${r.body.slice(0, 200)}`);
      assert.ok(!r.body.includes('203.0.113.7'), 'nothing of the client\'s params');
    }
  });
});

describe('rate limits per client IP address when no keys are configured', () => {
  let engine: RecordingEngine;
  let gw: Proc;
  let dir: string;
  before(async () => {
    engine = await recordingEngine();
    dir = mkdtempSync(join(tmpdir(), 'ear-sec-ip-'));
    const cfg = join(dir, 'ear.yaml');
    writeFileSync(cfg, ['healthIntervalMs: 60000', 'metricsIntervalMs: 0', 'rateLimits: { perIp: { requestsPerSecond: 0.01, burst: 1 } }',
      'backends:', `  - { id: r0, url: "${engine.url}", apiKey: ${ENGINE_KEY} }`, ''].join('\n'));
    gw = await start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0'], SERVE_LISTENING);
  });
  after(async () => {
    await stop(gw);
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('one address, one bucket: the second request is refused with Retry-After, whatever the headers claim', async () => {
    const port = Number(new URL(gw.url).port);
    assert.equal((await raw(port, post('/v1/chat/completions', chatBody()))).status, 200);
    for (const h of [[], ['x-forwarded-for: 10.1.2.3'], ['x-real-ip: 10.4.5.6'], ['forwarded: for=10.7.8.9'], ['authorization: Bearer anything']]) {
      const a = await raw(port, post('/v1/chat/completions', chatBody(), h));
      assert.equal(a.status, 429, `${h.join()}: ${a.body}`);
      assert.equal(errorCode(a), 'EAR_ERR_RATE_LIMITED');
      assert.match(headerOf(a, 'retry-after') ?? '', /^[0-9]+$/);
    }
    assert.ok(await metric(gw.url, 'ear_rate_limited_total', '{scope="ip",route="/v1/chat/completions"}') >= 5);
  });
});

describe('no SSRF: a request that names hosts everywhere makes the gateway connect to none of them', () => {
  let fleet: SimFleet;
  let trap: Awaited<ReturnType<typeof canary>>;
  before(async () => {
    trap = await canary();
    fleet = await simFleet(['healthIntervalMs: 60000', 'kvConnectors: nixl,recompute'], () => [[], []]);
  });
  after(async () => {
    await fleet.close();
    await trap.close();
  });

  test('URLs and host:port in every field and header reach no connection; the control (the same params sent to an engine directly) does', async () => {
    const port = Number(new URL(fleet.url).port);
    const at = `127.0.0.1:${trap.port}`;
    const url = `http://${at}/x`;
    const kv = { do_remote_prefill: true, do_remote_decode: false, remote_host: '127.0.0.1', remote_port: trap.port, remote_block_ids: [[1, 2, 3]], remote_engine_id: 'evil', remote_request_id: 'evil-1', tp_size: 1 };
    const headers = [`x-forwarded-host: ${at}`, `x-forwarded-proto: http`, `forwarded: host=${at}`, `x-session-id: ${url}`, `x-request-id: ${at}`,
      `referer: ${url}`, `origin: ${url}`, `x-ear-backend: ${url}`, `x-ear-parent-session-id: ${url}`];
    const everywhere = { user: url, tools: [{ type: 'function', function: { name: 'f', description: url, parameters: { $ref: url } } }], response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { $ref: url } } }, kv_transfer_params: kv, tokenizer: url, base_url: url, api_base: url, cache_salt: url, logit_bias: {}, max_tokens: 2 };
    const requests = [
      post('/v1/chat/completions', JSON.stringify({ model: 'm', messages: [{ role: 'user', content: `fetch ${url}` }, { role: 'user', content: [{ type: 'image_url', image_url: { url } }] }], ...everywhere }), headers),
      post('/v1/chat/completions', JSON.stringify({ model: 'm', messages: [{ role: 'user', content: text('ssrf', POOLED) }], ...everywhere }), headers),
      post('/v1/completions', JSON.stringify({ model: 'm', prompt: url, ...everywhere }), headers),
      post('/v1/chat/completions', JSON.stringify({ model: url, messages: [{ role: 'user', content: 'x' }], ...everywhere }), headers),
      post('/v1/context', JSON.stringify({ model: 'm', messages: [{ role: 'user', content: url }], ...everywhere }), headers),
      `POST /v1/chat/completions HTTP/1.1\r\nhost: ${at}\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: ${Buffer.byteLength(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], ...everywhere }))}\r\n\r\n${JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], ...everywhere })}`,
      get(`/v1/context/${encodeURIComponent(url)}`, headers),
      get(`/admin/sessions/${encodeURIComponent(url)}`, [`authorization: Bearer ${ADMIN}`, ...headers]),
      get(`/${url}`, headers)
    ];
    for (const r of requests) {
      const a = await raw(port, r);
      assert.ok(a.status !== null && a.status < 500, `${r.slice(0, 60)}: ${a.status} ${a.body.slice(0, 300)}`);
    }
    // This proves a connection is never made, so there is no event to wait for. An engine pulls before it answers
    // (so those are past); what is left is the gateway's next metrics scrape (every 1 s), which this outlasts.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(trap.connections(), 0, 'the gateway, or an engine on its behalf, connected to a host a request named');

    // The control: an engine that gets these params does connect (so the check above could fail).
    const direct = await fetch(`${fleet.sims[0].url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }], max_tokens: 1, kv_transfer_params: kv }) });
    await direct.text();
    await until(() => trap.connections() >= 1, { what: 'the engine to pull from the host its params named', timeoutMs: 30_000 });
  });
});
