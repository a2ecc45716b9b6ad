// The des driver gives up a run that cannot progress instead of spinning its sampler forever: a latent bug is
// injected by making the engines accept one request and never hold it (as an engine that loses a request would).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runDes } from '../../../src/eval/drivers/des.js';
import { loadWorkload } from '../../../src/eval/workloads/index.js';
import { SimEngine } from '../../../src/sim/engine.js';
import type { SimRequest } from '../../../src/sim/engine-types.js';

const small = () => loadWorkload('agentic', { duration: 60, rate: 0.5, seed: 2 });
const opts = { policy: 'sticky', engines: 2, profile: 'h100-llama-3.1-8b', seed: 1 };

test('a request no engine will ever finish ends the run after stallLimit, failed as stalled and named in a warning', () => {
  const add = SimEngine.prototype.addRequest;
  let lost: string | null = null;
  let issuedCount = 0;
  SimEngine.prototype.addRequest = function (this: SimEngine, r: SimRequest): void {
    if (lost === null && r.kvExport !== true && issuedCount++ === 5) { lost = r.id; return; }
    add.call(this, r);
  };
  const warnings: string[] = [];
  let r: ReturnType<typeof runDes>;
  try {
    r = runDes({ workload: small(), ...opts, stallLimit: 600, onWarning: (m) => warnings.push(m) });
  } finally {
    SimEngine.prototype.addRequest = add;
  }
  assert.ok(lost !== null, 'a request was lost');
  const s = r.summary;
  assert.ok(r.stall !== null, 'the run was given up as stalled');
  assert.deepEqual(r.stall.requests.map((x) => x.id), [lost]);
  assert.match(r.stall.requests[0].where, /^engine \d/);
  assert.ok(r.stall.idleSeconds >= 600 && r.stall.idleSeconds < 601, `idle ${r.stall.idleSeconds}`);
  assert.equal(s.failures.stalled, 1);
  assert.equal(s.requests.incomplete, 0);
  assert.equal(s.requests.failed, 1);
  assert.ok(s.requests.completed > 0 && s.requests.completed + 1 === s.requests.sent, 'the rest of the run went on (the lost session stopped there)');
  assert.equal(warnings.length, 1);
  assert.ok(warnings[0].includes(lost!) && warnings[0].includes('stalled'), warnings[0]);
  // The run ends there: nothing is processed after the stall.
  assert.ok(r.virtualSeconds <= r.stall.at + 1e-9, `${r.virtualSeconds} vs ${r.stall.at}`);
});

test('a healthy run is not taken for a stall, even with a short stallLimit while engines work', () => {
  const warnings: string[] = [];
  const r = runDes({ workload: small(), ...opts, stallLimit: 5, onWarning: (m) => warnings.push(m) });
  assert.equal(r.stall, null);
  assert.deepEqual(warnings, []);
  assert.equal(r.summary.requests.completed, r.summary.requests.sent);
});
