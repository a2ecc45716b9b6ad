// Request heads against a real `ear serve` (--max-header-bytes 3072) in front of `ear sim`, over raw sockets, as
// TCP may deliver them: whole, in 1 KB pieces with pauses, byte by byte. A head over the bound gets 431 in its
// API's shape; an agent's real head is served and its session read; what the pinned uWebSockets.js never passes
// to a handler is closed as docs/security.md "Request heads" says (issue 28, finding 7).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { parseResponse } from '../../bench/raw-http.js';
import { adminSession, simFleet, type SimFleet } from '../fixtures/processes.js';

const MAX_HEADER_BYTES = 3072;
let fleet: SimFleet;
let port: number;

// Heads uWS never passes on are held until its idle timeout (8-12 s): sent first, judged by the last test.
let rejected: Promise<Outcome[]>;

before(async () => {
  fleet = await simFleet([], () => [[]], { serveArgs: ['--max-header-bytes', String(MAX_HEADER_BYTES)] });
  port = Number(new URL(fleet.url).port);
  rejected = Promise.all(Object.values(REJECTED).map((req) => exchange([req()], 0, 30_000)));
});
after(async () => { await fleet?.close(); });

interface Outcome {
  /** 'answered': `expect` complete responses; 'closed': closed before them; 'held': neither by `timeoutMs`. */
  kind: 'answered' | 'closed' | 'held';
  /** The complete responses, in order (status 0 and no body when there were none). */
  responses: Array<{ status: number; body: string }>;
  status: number;
  body: string;
}

/** The complete responses at the start of `buf` (EAR frames its answers with Content-Length). */
function responsesIn (buf: Buffer): Array<{ status: number; body: string }> {
  const out: Array<{ status: number; body: string }> = [];
  for (;;) {
    const p = parseResponse(buf, false);
    if (p === null || !p.complete) return out;
    out.push({ status: p.status, body: p.body.toString('utf8') });
    buf = buf.subarray(buf.indexOf('\r\n\r\n') + 4 + p.body.length);
  }
}

/**
 * Writes `pieces` one by one on a fresh connection (waiting `pauseMs` between them, with Nagle off, so each
 * goes out as its own segment) and waits for `expect` responses, the connection's close, or `timeoutMs`.
 */
function exchange (pieces: Buffer[], pauseMs = 0, timeoutMs = 20_000, expect = 1): Promise<Outcome> {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: '127.0.0.1', noDelay: true });
    const got: Buffer[] = [];
    let done = false;
    const finish = (kind: Outcome['kind']): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      const responses = responsesIn(Buffer.concat(got));
      resolve({ kind: responses.length >= expect ? 'answered' : kind, responses, status: responses[0]?.status ?? 0, body: responses[0]?.body ?? '' });
    };
    const timer = setTimeout(() => finish('held'), timeoutMs);
    sock.on('data', (d: Buffer) => {
      got.push(d);
      if (responsesIn(Buffer.concat(got)).length >= expect) finish('answered');
    });
    sock.on('close', () => finish('closed'));
    sock.on('error', () => finish('closed'));
    sock.on('connect', () => {
      void (async () => {
        for (const p of pieces) {
          if (sock.destroyed) return;
          sock.write(p);
          if (pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
        }
      })();
    });
  });
}

const UUID = '3f1c8f6e-2b8a-4c9e-9d7a-1e2f3a4b5c6d';
const REJECTED = {
  underscore: () => chatOfHead(600, [`session_id: ${UUID}`]),
  cr: () => chatOfHead(600, ['x-a: a\rb']),
  nul: () => chatOfHead(600, ['x-a: a\0b'])
};

const CHAT = JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 });
const MESSAGES = JSON.stringify({ model: 'm', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] });

/** A request as bytes: `path`, the header lines, and the body with its content-length. */
function request (path: string, headers: string[], body: string): Buffer {
  return Buffer.from([`POST ${path} HTTP/1.1`, `host: 127.0.0.1:${port}`, ...headers, `content-length: ${Buffer.byteLength(body)}`, '', body].join('\r\n'), 'latin1');
}

/** A chat request whose head (as head-size.ts counts it) is `bytes` long, padded with one x-pad header. */
function chatOfHead (bytes: number, extra: string[] = []): Buffer {
  const base = request('/v1/chat/completions', ['content-type: application/json', ...extra, 'x-pad: '], CHAT);
  const headLength = base.indexOf('\r\n\r\n') + 4;
  return request('/v1/chat/completions', ['content-type: application/json', ...extra, `x-pad: ${'a'.repeat(bytes - headLength)}`], CHAT);
}

const inPieces = (b: Buffer, size: number): Buffer[] => {
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += size) out.push(b.subarray(i, i + size));
  return out;
};

const errorOf = (o: Outcome): { code?: string; type?: string } => (JSON.parse(o.body) as { error: { code?: string; type?: string } }).error;

test('a head over maxHeaderBytes is answered 431 in OpenAI\'s shape however TCP splits it, and the connection serves the next request', async () => {
  const req = chatOfHead(3500);
  const next = chatOfHead(600);
  for (const [how, pieces, pause] of [['one write', [req], 0], ['1 KB pieces', inPieces(req, 1024), 20], ['byte by byte', inPieces(req, 1), 0]] as const) {
    const o = await exchange([...pieces, next], pause, 20_000, 2);
    assert.equal(o.kind, 'answered', `${how}: ${o.kind} ${JSON.stringify(o.responses)}`);
    assert.equal(o.status, 431, `${how}: ${o.body}`);
    assert.equal(errorOf(o).code, 'EAR_ERR_HEADERS_TOO_LARGE', how);
    // The refused request's body was read past by its Content-Length: the next request on the connection is served.
    assert.equal(o.responses[1].status, 200, `${how}: ${o.responses[1].body}`);
  }
});

test('a head over maxHeaderBytes on the Messages API is 431 in Anthropic\'s shape', async () => {
  const req = request('/v1/messages', ['content-type: application/json', 'anthropic-version: 2023-06-01', `x-pad: ${'a'.repeat(3200)}`], MESSAGES);
  const o = await exchange([req]);
  assert.equal(o.status, 431, o.body);
  const body = JSON.parse(o.body) as { type: string; error: { type: string } };
  assert.equal(body.type, 'error');
  assert.equal(body.error.type, 'request_too_large');
});

test('a head just under maxHeaderBytes is served whole, in 1 KB pieces with pauses, and byte by byte', async () => {
  const req = chatOfHead(MAX_HEADER_BYTES);
  for (const [how, pieces, pause] of [['one write', [req], 0], ['1 KB pieces', inPieces(req, 1024), 20], ['byte by byte', inPieces(req, 1), 0]] as const) {
    const o = await exchange([...pieces], pause);
    assert.equal(o.status, 200, `${how}: ${o.body}`);
  }
});

test('a 64 KB head in one write, 50 times: each 431 or closed at once, never served and never held', async () => {
  const req = chatOfHead(64 * 1024);
  const seen: Record<string, number> = {};
  for (let i = 0; i < 50; i++) {
    // Under uWS's idle timeout (8 s at the earliest): a close that comes is the immediate one.
    const o = await exchange([req], 0, 7_500);
    const what = o.kind === 'answered' ? String(o.status) : o.kind;
    seen[what] = (seen[what] ?? 0) + 1;
    assert.ok(what === '431' || what === 'closed', `attempt ${i}: ${what} ${o.body.slice(0, 200)}`);
  }
  assert.ok((seen['431'] ?? 0) > 0, `some arrived in one read and were answered: ${JSON.stringify(seen)}`);
});

test('a head over 4096 bytes split across two writes is closed at once, unanswered (the pinned uWS keeps 4096 bytes of a head)', async () => {
  const req = chatOfHead(6000);
  const o = await exchange([req.subarray(0, 3000), req.subarray(3000)], 50, 7_500);
  assert.equal(o.kind, 'closed', `${o.kind} ${o.status}`);
  assert.equal(o.status, 0);
});


test('Claude Code\'s real head on /v1/messages is served and its session read', async () => {
  const session = `claude-${UUID}`;
  const req = request('/v1/messages?beta=true', [
    'Connection: keep-alive', 'Accept: application/json', 'X-Stainless-Retry-Count: 0', 'X-Stainless-Timeout: 600', 'X-Stainless-Lang: js',
    'X-Stainless-Package-Version: 0.60.0', 'X-Stainless-OS: Linux', 'X-Stainless-Arch: x64', 'X-Stainless-Runtime: node',
    'X-Stainless-Runtime-Version: v22.17.0', 'anthropic-dangerous-direct-browser-access: true', 'anthropic-version: 2023-06-01',
    `x-api-key: sk-ant-api03-${'A'.repeat(95)}`, 'x-app: cli', 'User-Agent: claude-cli/2.0.14 (external, cli)', 'content-type: application/json',
    'anthropic-beta: claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14,context-management-2025-06-27',
    `x-claude-code-session-id: ${session}`, 'x-stainless-helper-method: stream', 'accept-language: *', 'sec-fetch-mode: cors', 'accept-encoding: gzip, deflate'
  ], MESSAGES);
  const o = await exchange(inPieces(req, 512), 5);
  assert.equal(o.status, 200, o.body);
  assert.equal((await adminSession(fleet.url, session)).host, 'sim-0');
});

test('Codex\'s real head on /v1/responses is served and its session-id read', async () => {
  const session = `codex-${UUID}`;
  const req = request('/v1/responses', [
    `authorization: Bearer sk-proj-${'B'.repeat(120)}`, 'version: 0.122.0', 'openai-beta: responses=experimental', 'originator: codex_cli_rs',
    'user-agent: codex_cli_rs/0.122.0 (Ubuntu 24.4.0; x86_64) xterm-256color (codex-exec; 0.122.0)', 'accept: text/event-stream',
    'content-type: application/json', `session-id: ${session}`, `thread-id: ${UUID}`, `x-client-request-id: ${UUID}`
  ], JSON.stringify({ model: 'm', input: 'hi', max_output_tokens: 2, store: false }));
  const o = await exchange(inPieces(req, 512), 5);
  assert.equal(o.status, 200, o.body);
  assert.equal((await adminSession(fleet.url, session)).host, 'sim-0');
});

test('heads the pinned uWS rejects (`session_id`, CR or NUL in a value) are closed unanswered at its idle timeout, and the gateway serves on', async () => {
  const outcomes = await rejected;
  for (const [i, name] of Object.keys(REJECTED).entries()) {
    assert.equal(outcomes[i].kind, 'closed', `${name}: ${outcomes[i].kind} ${outcomes[i].status}`);
    assert.equal(outcomes[i].status, 0, name);
  }
  assert.equal((await exchange([chatOfHead(600)])).status, 200);
});
