// The lab's KV legs failing, at once (the engine refuses the leg as it is submitted, inside the driver's call)
// and late (refused when the DES reaches it, after an earlier leg finished), with requests that cannot fit the
// engine among them: a prompt past max_model_len, and one whose max_tokens take it past. Every leg kind: a
// migration's NIXL export and import, pd-static's P/D prefill leg and its decode import, and ear-proactive's
// pre-warm. A leg that failed at once used to crash the run ("Cannot access 'failed' before initialization").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DesHost } from '../../../src/sim/des.js';
import { SimEngine } from '../../../src/sim/engine.js';
import type { SimRequest } from '../../../src/sim/engine-types.js';
import { exportLeg } from '../../../src/eval/drivers/des-nixl.js';
import { runDes } from '../../../src/eval/drivers/des.js';
import { loadProfile, resolveProfile } from '../../../src/engine-model/profile.js';
import { registerPolicy } from '../../../src/core/policies/index.js';
import type { OpenLoopWorkload, OpenRequest } from '../../../src/eval/workloads/index.js';

const PROFILE = 'h100-llama-3.1-8b';
const profile = loadProfile(PROFILE);
const MAX_MODEL_LEN = profile.maxModelLen;
const resolved = resolveProfile(profile);

function legRequest (id: string, promptTokens: number): Omit<SimRequest, 'kvExport' | 'kvImport' | 'maxTokens'> {
  return {
    id, promptTokenIds: Uint32Array.from({ length: promptTokens }, (_, i) => 1 + (i % 50000)), minTokens: 0, ignoreEos: true,
    stopTokenIds: [], loraName: null, cacheSalt: null, seed: 1, arrivalTime: 0
  };
}

test('exportLeg: an export the engine refuses fails at once, before exportLeg returns; one refused later fails when the DES reaches it', () => {
  const des = new DesHost({ seed: 1 });
  des.addEngine({ profile });
  const calls: string[] = [];
  const leg = (name: string) => ({
    held: () => { calls.push(`${name}: held`); },
    failed: (at: number) => { calls.push(`${name}: failed at ${at}`); }
  });
  // At once: the prompt is past max_model_len, refused as it is submitted.
  exportLeg(des, resolved, 0, legRequest('now#export', MAX_MODEL_LEN + 5), 0, leg('now'));
  assert.deepEqual(calls, ['now: failed at 0']);
  // Late: submitted for a later virtual time; nothing happens until the DES gets there.
  exportLeg(des, resolved, 0, legRequest('later#export', MAX_MODEL_LEN), 7, leg('later'));
  // And one that fits: held, with the blocks its prompt filled.
  exportLeg(des, resolved, 0, legRequest('fits#export', 64), 0, leg('fits'));
  assert.equal(calls.length, 1);
  des.run();
  assert.deepEqual(calls, ['now: failed at 0', 'fits: held', 'later: failed at 7']);
});

// A test policy that moves every session on each turn (to the next engine), so that migrations happen where the
// test wants them, whatever the load.
let registered = false;
function movingPolicy (): string {
  if (!registered) {
    registerPolicy('test-move-every-turn', () => ({
      name: 'test-move-every-turn',
      route (req, cluster) {
        const s = req.sessionKey === null ? null : cluster.sessions.get(req.sessionKey);
        const n = cluster.pods.length;
        if (s === null || s === undefined || s.host < 0) return { pod: cluster.pods[0].index, reason: 'new-session' };
        const to = cluster.pods[(cluster.pods.findIndex((p) => p.index === s.host) + 1) % n].index;
        return { pod: to, migrateFrom: s.host, reason: 'move' };
      }
    }));
    registered = true;
  }
  return 'test-move-every-turn';
}

let nextBlock = 1;
function open (sessionId: string, turn: number, at: number, promptTokens: number, outputTokens: number, keepBlocks = 0): OpenRequest {
  const blocks = Math.ceil(promptTokens / 16) - keepBlocks;
  const newBlocks = Uint32Array.from({ length: blocks }, () => nextBlock++);
  return { at, sessionId, turn, final: false, outputTokens, keepBlocks, newBlocks, promptTokens };
}

/**
 * Three sessions, each a short first turn and then: `over` a prompt past max_model_len (any leg of it is refused
 * at once), `tight` a prompt that fits with one output token (an export, a P leg) but not with its 200 (the
 * import that follows is refused, late), `fine` an ordinary second turn.
 */
function workload (): OpenLoopWorkload {
  const requests = [
    open('over', 0, 0, 2000, 4), open('tight', 0, 0.1, 2000, 4), open('fine', 0, 0.2, 2000, 4),
    open('over', 1, 20, MAX_MODEL_LEN + 1000, 4, 125), open('tight', 1, 20.1, MAX_MODEL_LEN - 100, 200, 125), open('fine', 1, 20.2, 3000, 4, 125)
  ].map((r) => ({ ...r, final: r.turn === 1 }));
  return { kind: 'open', name: 'legs', blockSize: 16, seed: 1, sharedPrefixBlocks: new Set(), config: {}, requests };
}

/** Every engine request of a run: its id, and whether the engine refused it (and how). */
function recordEngineRequests<T> (fn: () => T): { result: T; log: Array<{ id: string; refused: string | null }> } {
  const add = SimEngine.prototype.addRequest;
  const log: Array<{ id: string; refused: string | null }> = [];
  SimEngine.prototype.addRequest = function (this: SimEngine, r: SimRequest): void {
    try {
      add.call(this, r);
      log.push({ id: r.id, refused: null });
    } catch (err) {
      log.push({ id: r.id, refused: (err as Error).name });
      throw err;
    }
  };
  try {
    return { result: fn(), log };
  } finally {
    SimEngine.prototype.addRequest = add;
  }
}

function assertOutcome (s: ReturnType<typeof runDes>['summary'], label: string): void {
  assert.equal(s.requests.sent, 6, label);
  assert.equal(s.requests.failed, 2, `${label}: over/1 and tight/1 fail`);
  assert.equal(s.failures.context_length_exceeded, 2, `${label}: ${JSON.stringify(s.failures)}`);
  assert.equal(s.requests.completed, 4, label);
  assert.equal(s.requests.incomplete, 0, label);
}

test('a migration\'s export leg refused at once (prompt past max_model_len) and its import refused late (max_tokens past it): the run goes on', () => {
  const { result, log } = recordEngineRequests(() => runDes({ workload: workload(), policy: movingPolicy(), engines: 2, profile: PROFILE, seed: 1, kvConnector: 'nixl' }));
  assertOutcome(result.summary, 'migration');
  const refused = (id: string) => log.filter((x) => x.id === id).map((x) => x.refused);
  // over/1: its export refused at once, then the request itself on its source (the failed move puts it back).
  assert.deepEqual(refused('over/1#export'), ['ContextLengthError']);
  assert.deepEqual(refused('over/1'), ['ContextLengthError']);
  // tight/1: the export (one token) fits and is held; the import (200 tokens) is refused once it is sent.
  assert.deepEqual(refused('tight/1#export'), [null]);
  assert.deepEqual(refused('tight/1'), ['ContextLengthError']);
  assert.deepEqual(refused('fine/1#export'), [null]);
  assert.deepEqual(refused('fine/1'), [null]);
  // The refused export is counted as a failed NIXL move (the session stayed on its source).
  const m = result.summary.migrations;
  assert.equal(m.failedByMode.nixl, 1, JSON.stringify(m));
  // Each held export's wait in the source's queue is measured (the engine's first step less its arrival).
  assert.ok(m.byMode.nixl > 0, JSON.stringify(m.byMode));
  assert.equal(m.nixlExportWait.count, m.byMode.nixl);
  assert.ok(m.nixlExportWait.max <= m.nixlTransferTime.max);
});

test('pd-static\'s prefill leg refused at once and its decode import refused late: the run goes on', () => {
  const { result, log } = recordEngineRequests(() => runDes({ workload: workload(), policy: 'pd-static', engines: 2, profile: PROFILE, seed: 1, kvConnector: 'nixl' }));
  assertOutcome(result.summary, 'pd-static');
  const refused = (id: string) => log.filter((x) => x.id === id).map((x) => x.refused);
  assert.deepEqual(refused('over/1#export'), ['ContextLengthError']);
  assert.deepEqual(refused('over/1'), ['ContextLengthError']);
  assert.deepEqual(refused('tight/1#export'), [null]);
  assert.deepEqual(refused('tight/1'), ['ContextLengthError']);
  for (const id of ['over/0', 'tight/0', 'fine/0', 'fine/1']) assert.deepEqual(refused(`${id}#export`), [null], id);
});

test('ear-proactive\'s pre-warm of an idle session whose last prompt cannot fit fails at once: the run goes on', () => {
  // tHot 1 token: every host with any pending prefill is hot, so idle sessions are pre-warmed elsewhere while
  // the engines work; the last prompt of `over` is past max_model_len, so its pre-warm export is refused.
  const { result, log } = recordEngineRequests(() => runDes({
    workload: workload(), policy: 'ear-proactive', policyConfig: { tHot: 1, minGain: 1, tCool: 1 }, engines: 2, profile: PROFILE, seed: 1, kvConnector: 'nixl'
  }));
  assertOutcome(result.summary, 'ear-proactive');
  const warms = log.filter((x) => x.id.startsWith('proactive-'));
  assert.ok(warms.some((x) => x.id.endsWith('#export') && x.refused === 'ContextLengthError'), `a pre-warm export was refused at once: ${JSON.stringify(warms)}`);
  assert.ok(!warms.some((x) => x.id.endsWith('#warm')), 'no target was warmed for it');
});
