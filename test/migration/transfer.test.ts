// The KV connectors and their choice: the nixl export leg's body is exactly what llm-d and vLLM's proxies send,
// the params the source returns reach the target verbatim (a loopback side channel replaced by the source's
// host), and every way the source leg can fail is a failure the caller sees, not an exception. The cost model
// picks nixl for long contexts and recompute for short ones, and an override forces a mode.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { TransferCosts, backlogAhead, parseTransferMode } from '../../src/migration/cost.js';
import { prewarmBody } from '../../src/migration/proactive-transfer.js';
import { exportBody, EXPORT_PARAMS } from '../../src/migration/nixl-connector.js';
import { KvTransfers } from '../../src/migration/transfer.js';
import type { PeerAnswer, TransferPeer } from '../../src/migration/connector.js';
import { loadProfile } from '../../src/engine-model/profile.js';
import { DEFAULT_OFFLOAD, kvBytesPerToken, offloadLoadTime, prefillTime, transferTime } from '../../src/engine-model/figures.js';
import { tinyProfile } from '../sim/helpers.js';

const model = loadProfile('h20-qwen3-coder');
const signal = { aborted: false, onAbort: null };

function peer (answer: PeerAnswer | ((body: Record<string, unknown>) => PeerAnswer)): TransferPeer & { sent: Array<Record<string, unknown>> } {
  const sent: Array<Record<string, unknown>> = [];
  return {
    id: 'src', host: '10.0.0.7', sent,
    post: async (_path, body) => {
      const doc = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
      sent.push(doc);
      return typeof answer === 'function' ? answer(doc) : answer;
    }
  };
}

const json = (v: unknown, status = 200): PeerAnswer => ({ status, contentType: 'application/json', body: Buffer.from(JSON.stringify(v)) });
const HELD = { do_remote_prefill: true, do_remote_decode: false, remote_block_ids: [[1, 2, 3]], remote_engine_id: 'e1', remote_request_id: 'r1', remote_host: 'localhost', remote_port: 5600, tp_size: 1 };
const client = { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true }, max_tokens: 300, max_completion_tokens: 300, min_tokens: 5 };

test('the export leg: the client body, one token, not streamed, export params exactly as llm-d sends them', () => {
  const b = exportBody(client);
  assert.deepEqual(b.kv_transfer_params, { do_remote_decode: true, do_remote_prefill: false, remote_engine_id: null, remote_block_ids: null, remote_host: null, remote_port: null });
  assert.equal(b.stream, false);
  assert.equal(b.max_tokens, 1);
  assert.equal(b.max_completion_tokens, 1);
  assert.equal(b.ignore_eos, true);
  assert.equal('stream_options' in b, false);
  assert.equal('min_tokens' in b, false);
  assert.deepEqual(b.messages, client.messages);
  assert.equal(client.max_tokens, 300, 'the client body is not changed');
  assert.ok(Object.isFrozen(EXPORT_PARAMS));
});

test('nixl: the target gets the client body with the returned params verbatim, a loopback host replaced by the source\'s', async () => {
  const costs = new TransferCosts(model, ['nixl'], 'nixl');
  const src = peer(json({ id: 'x', choices: [], kv_transfer_params: HELD }));
  const out = await new KvTransfers(costs).transfer({ path: '/v1/chat/completions', body: Buffer.from(JSON.stringify(client)), src, requestId: 'rid', contextTokens: 30000, signal });
  assert.equal(out.ok, true);
  assert.equal(out.mode, 'nixl');
  const target = JSON.parse(out.body.toString('utf8')) as Record<string, unknown>;
  assert.deepEqual(target.kv_transfer_params, { ...HELD, remote_host: '10.0.0.7' });
  assert.equal(target.stream, true, 'the client\'s own stream, max_tokens and min_tokens go to the target');
  assert.equal(target.max_tokens, 300);
  assert.equal(target.min_tokens, 5);
  assert.equal(out.bytes, 30000 * kvBytesPerToken(model.model));
  assert.equal(src.sent.length, 1);
  assert.equal((src.sent[0].kv_transfer_params as Record<string, unknown>).do_remote_decode, true);
});

test('nixl: every failure of the source leg is a failure the caller sees, with the client body kept', async () => {
  const costs = new TransferCosts(model, ['nixl'], 'nixl');
  const body = Buffer.from(JSON.stringify(client));
  const cases: Array<[string, PeerAnswer]> = [
    ['no answer', { status: null, contentType: '', body: Buffer.alloc(0) }],
    ['500', json({ error: {} }, 500)],
    ['no params (engine without a NIXL connector)', json({ id: 'x', kv_transfer_params: null })],
    ['not JSON', { status: 200, contentType: 'text/plain', body: Buffer.from('oops') }]
  ];
  for (const [name, answer] of cases) {
    const out = await new KvTransfers(costs).transfer({ path: '/v1/chat/completions', body, src: peer(answer), requestId: 'rid', contextTokens: 30000, signal });
    assert.equal(out.ok, false, name);
    assert.equal(out.body, body, name);
    assert.ok(out.failure !== undefined && out.failure.length > 0, name);
  }
});

test('choice by estimated cost: nixl for a long context, recompute for a short one; the store when it is cheaper; override', () => {
  const auto = new TransferCosts(model, ['nixl', 'recompute']);
  assert.equal(auto.choose(33600).mode, 'nixl');
  assert.equal(auto.choose(64).mode, 'recompute');
  assert.ok(auto.choose(33600).estimates.recompute! > auto.choose(33600).estimates.nixl!);
  // A 33.6k-token context is ~3.3 GB on this profile: ~88 ms over the 40 GB/s link plus setup (the profile's note).
  const nixl = auto.estimate('nixl', 33600);
  assert.ok(nixl > 0.08 && nixl < 0.2, `nixl estimate ${nixl}`);
  const withStore = new TransferCosts({ ...model, offload: { loadBytesPerSecond: 1e12, setup: 0 } }, ['nixl', 'shared-store']);
  assert.equal(withStore.choose(33600).mode, 'shared-store');
  assert.deepEqual(withStore.modes, ['nixl', 'shared-store', 'recompute'], 'recompute is always offered');
  assert.equal(new TransferCosts(model, ['nixl', 'recompute'], 'recompute').choose(100000).mode, 'recompute');
  assert.throws(() => new TransferCosts(model, ['recompute'], 'nixl'), /not offered/);
  assert.throws(() => parseTransferMode('rdma'), /must be one of/);
});

test('measured export legs move the nixl estimate', () => {
  const c = new TransferCosts(model, ['nixl']);
  const before = c.estimate('nixl', 1000);
  for (let i = 0; i < 50; i++) c.observeExport(2);
  assert.ok(c.estimate('nixl', 1000) > before + 1.5);
});

test('a hot source\'s backlog counts against nixl (its export leg queues behind it): a short context is recomputed instead', () => {
  const c = new TransferCosts(model, ['nixl', 'recompute']);
  assert.equal(c.choose(8000).mode, 'nixl');
  assert.equal(c.choose(8000, 60000).mode, 'recompute', 'behind 60k tokens of prefill, 8k tokens are cheaper to compute again');
  assert.equal(c.choose(100000, 60000).mode, 'nixl', 'a long context still moves');
  // What the backlog explains is not learnt as the leg's own cost.
  const before = c.estimate('nixl', 1000);
  c.observeExport(c.estimate('recompute', 60000), 60000);
  assert.ok(Math.abs(c.estimate('nixl', 1000) - before) < 0.01);
});

test('the estimates are the simulator\'s figures for the same profile, the offload store\'s default included', () => {
  const p = tinyProfile(); // no offload section
  const c = new TransferCosts(p, ['nixl', 'shared-store', 'recompute']);
  assert.equal(c.estimate('shared-store', 1000), offloadLoadTime(p, 1000));
  assert.equal(c.estimate('shared-store', 1000), DEFAULT_OFFLOAD.setup + 1000 * kvBytesPerToken(p.model) / DEFAULT_OFFLOAD.loadBytesPerSecond);
  assert.equal(c.estimate('recompute', 1000), prefillTime(p, 1000));
  // nixl: the first guess of the export leg (two steps) and the source's backlog, then the transfer.
  assert.ok(Math.abs(c.estimate('nixl', 1000, 300) - (2 * p.step.stepOverhead + prefillTime(p, 300) + transferTime(p, 1000))) < 1e-12);
});

test('a priority source: the leg counts only the running share of the source\'s pending prefill (issue 23 item 6)', () => {
  assert.equal(backlogAhead(80_000), 80_000, 'a number is an FCFS source\'s whole pending prefill');
  assert.equal(backlogAhead({ pending: 80_000, running: 2, waiting: 6, priority: false }), 80_000);
  assert.equal(backlogAhead({ pending: 80_000, running: 2, waiting: 6, priority: true }), 20_000);
  assert.equal(backlogAhead({ pending: 80_000, running: 2, waiting: 0, priority: true }), 80_000, 'nothing waiting: all of it runs');
  const c = new TransferCosts(model, ['nixl', 'recompute']);
  const fcfs = c.estimate('nixl', 33600, { pending: 400_000, running: 4, waiting: 12, priority: false });
  const prio = c.estimate('nixl', 33600, { pending: 400_000, running: 4, waiting: 12, priority: true });
  assert.equal(fcfs, c.estimate('nixl', 33600, 400_000));
  assert.ok(Math.abs(prio - c.estimate('nixl', 33600, 100_000)) < 1e-9);
  // Behind a hot FCFS queue recompute wins; on a priority engine the same source's leg is worth taking.
  assert.equal(c.choose(33600, { pending: 400_000, running: 1, waiting: 15, priority: false }).mode, 'recompute');
  assert.equal(c.choose(33600, { pending: 400_000, running: 1, waiting: 15, priority: true }).mode, 'nixl');
});

test('legs carry the most urgent priority to a priority engine, none to another; a body\'s own is never kept', () => {
  const client = { model: 'm', messages: [{ role: 'user', content: 'x' }], priority: 5 };
  assert.equal('priority' in exportBody(client), false);
  assert.equal(exportBody(client, -65).priority, -65);
  assert.equal('priority' in prewarmBody(client), false);
  assert.equal(prewarmBody(client, 65).priority, 65);
});

test('the nixl export leg is sent at its source\'s urgent value, where the API takes one', async () => {
  const answer: PeerAnswer = { status: 200, contentType: 'application/json', body: Buffer.from(JSON.stringify({ kv_transfer_params: { remote_host: '10.0.0.2' } })) };
  const body = Buffer.from(JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }));
  const t = new KvTransfers(new TransferCosts(model, ['nixl'], 'nixl'));
  for (const [priority, path, want] of [['vllm', '/v1/chat/completions', -65], ['sglang', '/v1/completions', 65], [null, '/v1/chat/completions', undefined], ['vllm', '/v1/messages', undefined]] as const) {
    const src = { ...peer(answer), priority };
    const out = await t.transfer({ path, body, src, requestId: 'r', contextTokens: 33600, signal });
    assert.equal(out.ok, true);
    assert.equal(src.sent[0].priority, want, `${priority} ${path}`);
  }
});
