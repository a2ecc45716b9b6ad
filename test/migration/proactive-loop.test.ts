// The migration thread's loop against fake engines (HTTP servers that answer as vLLM's NixlConnector does): what
// each connector sends for a proactive move (nixl: the export leg on the source, then the pre-warm import on the
// target; recompute: the pre-warm on the target; shared-store: nothing), what the main thread is told, and that
// a failed transfer or a missing body moves nothing and is counted.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readEarProactiveKnobs } from '../../src/core/policies/ear.js';
import { LoadTable } from '../../src/core/load-table.js';
import { PodTable } from '../../src/core/pod-table.js';
import { SessionTable } from '../../src/core/session-table.js';
import { ProactivePlanner } from '../../src/migration/proactive-planner.js';
import { ProactiveLoop } from '../../src/migration/proactive-loop.js';
import { kvTransfersFor } from '../../src/migration/transfers-for.js';
import type { TransferMode } from '../../src/migration/cost.js';
import type { FromMigrationThread } from '../../src/migration/thread-protocol.js';
import { prewarmBody } from '../../src/migration/proactive-transfer.js';
import { MODEL, routingHost } from '../fixtures/host.js';
import { once } from '../fixtures/wait.js';

const TTL = 3_600_000;
const KNOBS = { tHot: 1000, minGain: 1000, tCool: 60, maxMovesPerPod: 2 };
const PARAMS = { do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [1, 2, 3], remote_engine_id: 'src-engine', remote_host: 'localhost', remote_port: 5600 };

interface Seen { path: string; body: Record<string, unknown>; rid: string }

/** An engine that records what it gets and answers `status` (an export leg with NIXL params, as vLLM does). */
async function engine (status = 200): Promise<{ url: string; seen: Seen[]; server: Server }> {
  const seen: Seen[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      seen.push({ path: req.url ?? '', body, rid: String(req.headers['x-request-id']) });
      const exporting = (body.kv_transfer_params as { do_remote_decode?: boolean } | undefined)?.do_remote_decode === true;
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ id: 'x', choices: [{ message: { role: 'assistant', content: 'a' } }], kv_transfer_params: exporting ? PARAMS : null }));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen, server };
}

const servers: Server[] = [];
after(() => { for (const s of servers) s.close(); });

const BODY = { model: MODEL, messages: [{ role: 'user', content: 'hello there' }], max_tokens: 64, stream: true, stream_options: { include_usage: true } };

async function setup (mode: TransferMode, targetStatus = 200) {
  const src = await engine();
  const dst = await engine(targetStatus);
  servers.push(src.server, dst.server);
  const { region, host, rows: [a, b] } = routingHost({ policy: 'ear-proactive', knobs: KNOBS, pods: ['a', 'b'], sessionTtlMs: TTL });
  host.holdSession('s', a, TTL, 0);
  const key = host.sessionKey('s');
  host.sessions.setCount(key, 'contextTokens', 2000);
  host.load.addPendingPrefill(a, 50_000);
  const sent: FromMigrationThread[] = [];
  const planner = new ProactivePlanner({ sessions: new SessionTable(region), load: new LoadTable(region), pods: new PodTable(region) }, readEarProactiveKnobs(KNOBS));
  const loop = new ProactiveLoop({
    planner, transfers: kvTransfersFor({ kvCostProfile: 'h100-llama-3.1-8b', kvConnectors: [mode], kvConnector: mode }),
    bodyCacheBytes: 1 << 20, intervalMs: 1000, upstream: { connections: 2, headersTimeoutMs: 5000, bodyTimeoutMs: 5000 },
    send: (m) => sent.push(m), now: () => 10_000
  });
  loop.setBackends([{ index: a, id: 'a', url: src.url, models: [MODEL] }, { index: b, id: 'b', url: dst.url, models: [MODEL] }]);
  const body = (): void => loop.body(key, { sessionId: 's', model: MODEL, path: '/v1/chat/completions', body: Buffer.from(JSON.stringify(BODY)) });
  return { src, dst, loop, sent, key, a, b, body };
}

test('proactive loop, nixl: the export leg on the source, the pre-warm import with its params on the target, then the move is handed to the main thread', async () => {
  const { src, dst, loop, sent, key, a, b, body } = await setup('nixl');
  body();
  loop.tick();
  await loop.settled();
  assert.equal(src.seen.length, 1);
  assert.equal(dst.seen.length, 1);
  const exp = src.seen[0].body;
  assert.deepEqual(exp.kv_transfer_params, { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null });
  assert.deepEqual([exp.max_tokens, exp.stream, 'stream_options' in exp], [1, false, false]);
  const imp = dst.seen[0].body;
  // The params verbatim, but the loopback side channel replaced by the source's address.
  assert.deepEqual(imp.kv_transfer_params, { ...PARAMS, remote_host: '127.0.0.1' });
  assert.deepEqual([imp.max_tokens, imp.stream, 'stream_options' in imp], [1, false, false]);
  assert.deepEqual(imp.messages, BODY.messages, 'both legs carry the session\'s messages');
  assert.equal(src.seen[0].rid, dst.seen[0].rid, 'one request id on both legs');
  assert.equal(src.seen[0].path, '/v1/chat/completions');
  assert.deepEqual(sent.map((m) => m.type), ['transfer', 'moved']);
  assert.deepEqual(sent[0], { type: 'transfer', mode: 'nixl', ok: true, sourceSeconds: (sent[0] as { sourceSeconds: number }).sourceSeconds, bytes: (sent[0] as { bytes: number }).bytes, failure: undefined, from: a, to: b, tokens: 2000 });
  assert.ok((sent[0] as { bytes: number }).bytes > 0);
  assert.deepEqual(sent[1], { type: 'moved', key, sessionId: 's', from: a, to: b });
  const s = loop.stats();
  assert.deepEqual([s.planned, s.transferred, s.failed, s.noBody, s.inFlight], [1, 1, 0, 0, 0]);
  // Tried in this idle period: the next tick does not move it again (the main thread has not rebound it here).
  loop.tick();
  await loop.settled();
  assert.equal(src.seen.length, 1);
  await loop.stop();
});

test('proactive loop, recompute only: no proactive move (recomputing an idle context elsewhere is not worth it), counted', async () => {
  const { src, dst, loop, sent, body } = await setup('recompute');
  body();
  loop.tick();
  await loop.settled();
  assert.equal(src.seen.length + dst.seen.length, 0);
  assert.deepEqual(sent.map((m) => m.type), ['transfer']);
  assert.equal((sent[0] as { ok: boolean }).ok, false);
  assert.match(String((sent[0] as { failure?: string }).failure), /no offered connector moves KV/);
  await loop.stop();
});

test('proactive loop, shared-store: nothing is sent (the target loads from the store), the move is handed over', async () => {
  const { src, dst, loop, sent, body } = await setup('shared-store');
  body();
  loop.tick();
  await loop.settled();
  assert.equal(src.seen.length + dst.seen.length, 0);
  assert.deepEqual(sent.map((m) => m.type), ['transfer', 'moved']);
  await loop.stop();
});

test('proactive loop: a pre-warm the target refuses is a failed transfer: no move, counted', async () => {
  const { loop, sent, body } = await setup('nixl', 503);
  body();
  loop.tick();
  await loop.settled();
  assert.deepEqual(sent.map((m) => m.type), ['transfer']);
  assert.equal((sent[0] as { ok: boolean }).ok, false);
  assert.match(String((sent[0] as { failure?: string }).failure), /pre-warm on b answered 503/);
  assert.equal(loop.stats().failed, 1);
  assert.equal(loop.stats().inFlight, 0);
  await loop.stop();
});

test('proactive loop: a session whose body is not cached is skipped, counted, and sends nothing', async () => {
  const { src, dst, loop, sent } = await setup('nixl');
  loop.tick();
  await loop.settled();
  assert.equal(src.seen.length + dst.seen.length, 0);
  assert.deepEqual(sent, []);
  assert.equal(loop.stats().noBody, 1);
  // Counted once for its idle period, not at every tick.
  loop.tick();
  await loop.settled();
  assert.equal(loop.stats().noBody, 1);
  await loop.stop();
});

test('proactive loop: stop aborts a transfer in flight; nothing is handed over', async () => {
  const { src, loop, sent, body } = await setup('nixl');
  // The source takes the export leg and never answers.
  src.server.removeAllListeners('request');
  const reached = once(src.server, 'request', { what: 'the export leg to reach the source' });
  body();
  loop.tick();
  await reached;
  assert.equal(loop.stats().inFlight, 1);
  const s = await loop.stop();
  assert.equal(s.inFlight, 0);
  assert.equal(sent.some((m) => m.type === 'moved'), false);
  assert.equal(s.failed, 1);
});
