import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mooncake } from '../../../src/eval/workloads/mooncake.js';
import { SessionPrompt } from '../../../src/eval/workloads/prompt-builder.js';
import { MOONCAKE_CONVERSATION, MOONCAKE_SYNTHETIC } from '../traces.js';

test('conversation trace (its first 400 lines): requests at their timestamps, lengths as recorded, sessions inferred', () => {
  const w = mooncake(MOONCAKE_CONVERSATION, { timeScale: 0.5 });
  const lines = readFileSync(MOONCAKE_CONVERSATION, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(w.requests.length, 400);
  assert.equal(w.blockSize, 512);
  assert.equal(w.requests[w.requests.length - 1].at, lines[lines.length - 1].timestamp / 1000 * 0.5);
  assert.deepEqual(w.requests.slice(0, 50).map((r) => r.promptTokens), lines.slice(0, 50).map((l) => l.input_length));
  const sessions = new Map<string, number>();
  for (const r of w.requests) sessions.set(r.sessionId, (sessions.get(r.sessionId) ?? 0) + 1);
  assert.equal(sessions.size, 363);
  assert.equal([...sessions.values()].filter((n) => n >= 2).length, 36, 'some conversations run several turns');
  assert.equal(Math.max(...sessions.values()), 3);
  // A continuation keeps all its predecessor's full blocks.
  const prompts = new Map<string, SessionPrompt>();
  for (const r of w.requests.slice(0, 400)) {
    let p = prompts.get(r.sessionId);
    if (p === undefined) { p = new SessionPrompt(w.seed, 512); prompts.set(r.sessionId, p); }
    const before = Math.floor(p.tokens.length / 512);
    if (r.turn > 0) assert.ok(r.keepBlocks >= before && before >= 2, `${r.sessionId}/${r.turn}`);
    assert.equal(p.advance(r).tokens.length, r.promptTokens);
  }
  assert.deepEqual([...w.sharedPrefixBlocks], [0]);
});

test('synthetic trace (its first 200 lines); limit cuts the replay', () => {
  assert.equal(mooncake(MOONCAKE_SYNTHETIC).requests.length, 200);
  assert.equal(mooncake(MOONCAKE_SYNTHETIC, { limit: 10 }).requests.length, 10);
});

test('inference on a constructed trace: extension of full blocks continues a session, a shared first block does not', () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-mc-'));
  try {
    const f = join(dir, 't.jsonl');
    const rows = [
      { timestamp: 0, input_length: 1100, output_length: 5, hash_ids: [0, 1, 2] }, // full blocks 0,1; 2 is cut
      { timestamp: 10, input_length: 700, output_length: 5, hash_ids: [0, 3] }, // shares only the system block
      { timestamp: 20, input_length: 2000, output_length: 0, hash_ids: [0, 1, 4, 5] }, // extends request 0
      { timestamp: 30, input_length: 1600, output_length: 5, hash_ids: [0, 1, 4, 6] }, // extends request 2's full blocks
    ];
    writeFileSync(f, rows.map((r) => JSON.stringify(r)).join('\n') + '\n');
    const w = mooncake(f);
    assert.deepEqual(w.requests.map((r) => [r.sessionId, r.turn, r.keepBlocks, [...r.newBlocks], r.at, r.outputTokens]), [
      ['m0', 0, 0, [0, 1, 2], 0, 5], ['m1', 0, 0, [0, 3], 0.01, 5], ['m0', 1, 2, [4, 5], 0.02, 1], ['m0', 2, 3, [6], 0.03, 5]]);
    assert.deepEqual(w.requests.map((r) => r.final), [false, true, false, true]);
    writeFileSync(f, JSON.stringify({ timestamp: 0, input_length: 600, output_length: 1, hash_ids: [0] }) + '\n');
    assert.throws(() => mooncake(f), /1 hash_ids for 600 tokens/);
    writeFileSync(f, '{"timestamp": 0\n');
    assert.throws(() => mooncake(f), /t\.jsonl:1/);
  } finally { rmSync(dir, { recursive: true }); }
});
