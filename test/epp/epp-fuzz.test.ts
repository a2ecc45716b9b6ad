// The gateway fuzzer's bodies through the other door (issue 28): `ear epp` in front of an `ear sim`, fed by
// Envoy's side of ext_proc (envoy-side.ts) with the fuzzer's Messages, count_tokens, Responses and chat cases
// (bench/fuzz-cases.ts: huge and negative numbers, deep nesting, wrong types, compressed bodies), all with one API
// key that has a tokens-per-minute limit. Each is answered below 500; after the run the process is alive,
// nothing is in flight, and the key is not left charged (a probe's remaining tokens are the limit less its own
// charge, once the bucket had time to refill what the finished requests used).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { stop, type Proc } from '../fixtures/processes.js';
import { chat, epp, metricSum, sims, type Epp } from './epp-process.js';
import { FUZZ_KEY, fuzzCaseOf, type FuzzCase } from '../../bench/fuzz-cases.js';
import { FUZZ_TOKENS_PER_MINUTE } from '../../bench/fuzz.js';
import { until } from '../fixtures/wait.js';

const CASES = 400;
const SEED = 28;
/** A probe's own charge at most: its prompt and max_tokens (8). */
const PROBE_CHARGE = 1000;

let engines: Proc[] = [];
let e: Epp;
let dir = '';

before(async () => {
  engines = await sims(1, ['--time-scale', '0']);
  dir = mkdtempSync(join(tmpdir(), 'ear-epp-fuzz-'));
  const cfg = join(dir, 'ear.yaml');
  writeFileSync(cfg, [`apiKeys: [${FUZZ_KEY}]`, 'rateLimits:', '  keys:', `    ${FUZZ_KEY}: {tokensPerMinute: ${FUZZ_TOKENS_PER_MINUTE}}`, ''].join('\n'));
  e = await epp([`${engines[0].url},id=sim-0`], ['--config', cfg]);
});

after(async () => {
  await e?.close();
  await Promise.all(engines.map((s) => stop(s)));
  rmSync(dir, { recursive: true, force: true });
});

/** A case as Envoy hands it over: HTTP/2 headers carry no CR, LF or NUL, nor upper case names. */
function sendable (c: FuzzCase): boolean {
  return c.raw === null && c.method === 'POST' && c.headers.every(([k, v]) => /^[a-z0-9-]+$/.test(k) && !/[\r\n\0]/.test(v));
}

test(`${CASES} fuzz cases through ear epp: none answered 5xx or left hanging; the process lives, nothing in flight, the key not left charged`, async () => {
  const arb = fuzzCaseOf(['messages-body', 'count-tokens-body', 'responses-body', 'chat-body', 'valid']);
  const cases = fc.sample(arb, { seed: SEED, numRuns: CASES * 2 }).filter(sendable).slice(0, CASES);
  const bad: string[] = [];
  const statuses: Record<string, number> = {};
  let next = 0;
  await Promise.all(Array.from({ length: 8 }, async () => {
    for (let i = next++; i < cases.length; i = next++) {
      const c = cases[i];
      const headers = Object.fromEntries([...c.headers.map(([k, v]): [string, string] => [k, Buffer.from(v, 'latin1').toString('utf8')]), ['authorization', `Bearer ${FUZZ_KEY}`]]);
      try {
        const x = await e.envoy.exchange({ path: c.target, headers, body: Buffer.from(c.body, 'latin1') });
        const status = x.immediate?.status ?? x.status;
        statuses[status] = (statuses[status] ?? 0) + 1;
        if (status >= 500 || status === 429) bad.push(`${status} for ${c.family}/${c.kind} on ${c.target}: ${(x.immediate?.body ?? x.responseBody).slice(0, 200)}`);
      } catch (err) {
        bad.push(`no answer for ${c.family}/${c.kind} on ${c.target}: ${(err as Error).message}`);
      }
      assert.equal(e.proc.child.exitCode, null, `ear epp exited after ${c.family}/${c.kind}: ${e.proc.out().slice(-2000)}`);
    }
  }));
  console.log(`ear epp: ${cases.length} cases, answers by status ${JSON.stringify(statuses)}`);
  assert.equal(e.proc.child.signalCode, null);
  let inFlight = -1;
  await until(async () => (inFlight = await metricSum(e.http, 'ear_backend_in_flight')) === 0, { what: () => `nothing in flight (${inFlight})`, timeoutMs: 15_000 });
  // The bucket refills FUZZ_TOKENS_PER_MINUTE: whatever finished requests used is back within a second or two.
  let remaining = 0;
  await until(async () => {
    const probe = await e.envoy.exchange({ body: chat('probe'), headers: { authorization: `Bearer ${FUZZ_KEY}` } });
    remaining = Number((probe.immediate?.headers ?? probe.responseHeaders)['x-ratelimit-remaining-tokens']);
    return remaining >= FUZZ_TOKENS_PER_MINUTE - PROBE_CHARGE;
  }, { what: () => `the key's bucket full again but for a probe's charge: ${remaining} of ${FUZZ_TOKENS_PER_MINUTE}`, timeoutMs: 10_000 });
  assert.deepEqual(bad, []);
});
