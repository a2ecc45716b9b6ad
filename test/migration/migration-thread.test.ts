// The migration thread as the gateway runs it: a worker over the shared region, told backends and bodies by
// messages, asked for its counters, and stopped; and a move planned by the thread reaches the main thread.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { startMigrationThread } from '../../src/migration/migration-thread.js';
import type { FromMigrationThread } from '../../src/migration/thread-protocol.js';
import { MODEL, routingHost } from '../fixtures/host.js';

const TTL = 3_600_000;
const KNOBS = { tHot: 1000, minGain: 1000, tCool: 60 };

test('migration thread: plans over the tables the main thread writes, pre-warms the target, reports the move; stop ends it', async () => {
  // An engine that answers the export leg with NIXL params, as vLLM does, and every pre-warm.
  let posts = 0;
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      posts++;
      const exporting = Buffer.concat(chunks).toString('utf8').includes('"do_remote_decode":true');
      const params = { do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [[1]], remote_engine_id: 'e', remote_request_id: 'r', remote_host: '127.0.0.1', remote_port: 1 };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ choices: [], kv_transfer_params: exporting ? params : null }));
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const { region, host, rows: [a, b] } = routingHost({ policy: 'ear-proactive', knobs: KNOBS, pods: ['a', 'b'], sessionTtlMs: TTL });
  const now = performance.timeOrigin + performance.now();
  host.holdSession('s', a, TTL, now);
  const key = host.sessionKey('s');
  const moved: Array<Extract<FromMigrationThread, { type: 'moved' }>> = [];
  const errors: string[] = [];
  let arrived!: () => void;
  const movedOnce = new Promise<void>((resolve) => { arrived = resolve; });
  const thread = startMigrationThread({
    policyConfig: KNOBS, intervalMs: 20, bodyCacheBytes: 1 << 20,
    transfers: { kvCostProfile: 'h100-llama-3.1-8b', kvConnectors: ['nixl'], kvConnector: 'nixl' },
    upstream: { connections: 2, headersTimeoutMs: 10_000, bodyTimeoutMs: 10_000 }
  }, { memory: region.memory, module: region.module }, {
    onMoved: (m) => { moved.push(m); arrived(); },
    onTransfer: () => {},
    onError: (e) => errors.push(e)
  });
  thread.setBackends([{ index: a, id: 'a', url, models: [MODEL] }, { index: b, id: 'b', url, models: [MODEL] }]);
  // The caller's buffer is a view into a larger one: only the view's bytes reach the thread.
  const big = Buffer.from(`xxxx${JSON.stringify({ model: MODEL, prompt: 'hello', max_tokens: 8 })}yyyy`);
  thread.body(key, { sessionId: 's', model: MODEL, path: '/v1/completions', body: big.subarray(4, big.length - 4) });
  const s0 = await thread.stats();
  assert.equal(s0.bodies.entries, 1);
  assert.deepEqual([s0.planned, s0.errors], [0, 0], 'a cold host: nothing planned');
  host.load.addPendingPrefill(a, 50_000); // a turns hot
  await Promise.race([movedOnce, new Promise((_resolve, reject) => setTimeout(() => reject(new Error('no move within 20 s')), 20_000))]);
  assert.deepEqual(moved, [{ type: 'moved', key, sessionId: 's', from: a, to: b }]);
  assert.equal(posts, 2, 'the export leg on a, then the pre-warm import on b');
  const last = await thread.stop();
  assert.ok(last !== null);
  assert.deepEqual([last.transferred, last.failed, last.errors], [1, 0, 0]);
  assert.deepEqual(errors, []);
  await assert.rejects(thread.stats());
  server.close();
});
