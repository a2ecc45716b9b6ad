// The gateway fuzzer (bench/fuzz.ts) in CI: 2000 generated requests with a fixed seed against `ear serve` in
// front of two `ear sim` processes, and the bugs it found, each kept as a plain regression case.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { formatReport, fuzzFleet, runFuzz } from '../../bench/fuzz.js';
import { rawExchange } from '../../bench/raw-http.js';
import type { SimFleet } from '../fixtures/processes.js';
import { ADMIN } from '../fixtures/processes.js';
import { FUZZ_KEY } from '../../bench/fuzz-cases.js';

const KEY = { authorization: `Bearer ${FUZZ_KEY}` };

let fleet: SimFleet;
let port: number;

before(async () => {
  fleet = await fuzzFleet();
  port = Number(new URL(fleet.url).port);
});
after(async () => { await fleet?.close(); });

const alive = (): boolean => fleet.gateway.child.exitCode === null && fleet.gateway.child.signalCode === null;

async function get (path: string, headers: string[] = []): Promise<{ status: number; body: string }> {
  const r = await rawExchange(port, Buffer.from([`GET ${path} HTTP/1.1`, 'host: x', ...headers, '', ''].join('\r\n'), 'latin1'), 15_000);
  return { status: r.status, body: r.body.toString('utf8') };
}

test('a malformed percent-escape in a path id is a 400, and the gateway lives on (found by the fuzzer: it crashed)', async () => {
  for (const id of ['%E0%A4%A', '%', '%zz']) {
    const ctx = await get(`/v1/context/${id}`, [`authorization: Bearer ${FUZZ_KEY}`]);
    assert.equal(ctx.status, 400, ctx.body);
    assert.equal(JSON.parse(ctx.body).error.code, 'EAR_ERR_BAD_REQUEST');
    const admin = await get(`/admin/sessions/${id}`, [`authorization: Bearer ${ADMIN}`]);
    assert.equal(admin.status, 400, admin.body);
    assert.ok(alive(), 'the gateway is still running');
  }
  assert.equal((await get('/health')).status, 200);
});

test('a deeply nested value in a field the engine checks is a 400, not the engine\'s 500 passed on (found by the fuzzer)', async () => {
  const body = `{"model":"m","prompt":[1],"max_tokens":1,"seed":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
  const res = await fetch(`${fleet.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...KEY }, body });
  const text = await res.text();
  assert.equal(res.status, 400, text);
});

test('a body nested deeper than JSON.stringify can write back is a 400 where the gateway rewrites it, not a 500 (found by the fuzzer)', async () => {
  const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
  // /v1/context drops its own fields and writes the body back for the prefill: that write overflowed (500).
  const ctx = await fetch(`${fleet.url}/v1/context`, { method: 'POST', headers: { 'content-type': 'application/json', ...KEY }, body: `{"model":"m","prompt":"x","user":${deep}}` });
  const text = await ctx.text();
  assert.equal(ctx.status, 400, text);
  assert.equal(JSON.parse(text).error.code, 'EAR_ERR_BAD_REQUEST');
  // A completion whose nested field is the client's kv_transfer_params: past the depth bound at the door (issue 28).
  const done = await fetch(`${fleet.url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...KEY }, body: `{"model":"m","prompt":"x","max_tokens":1,"kv_transfer_params":${deep}}` });
  assert.equal(done.status, 400, await done.text());
});

test('2000 fuzz cases (seed 13): no crash, hang, 5xx for a client mistake, malformed answer or leak', async () => {
  // RSS: bodies nested tens of thousands deep grow the gateway's heaps to a plateau (~600-750 MiB) that 2000 cases
  // may not reach by the end of warm-up; the 100k run (bench/RESULTS.md) shows it flat after. The bound here
  // still catches a leak of a request's body or state per request. How far below the plateau warm-up ends
  // depends on the machine: under `taskset -c 0` (one core for the whole suite) it ended at 276.5 MiB and the run
  // grew 292.9 MiB to 569.4, inside the plateau; hence 384 MiB, not 256.
  const report = await runFuzz({ cases: 2000, seed: 13, concurrency: 16, rssGrowthBytes: 384 * 2 ** 20 }, fleet);
  const text = formatReport(report);
  console.log(text);
  assert.equal(report.cases >= 2000, true, text);
  // Every family ran, and the valid requests were served.
  for (const [family, outcomes] of Object.entries(report.counts)) assert.ok(Object.values(outcomes).reduce((a, b) => a + b, 0) > 50, `${family} ran: ${text}`);
  assert.ok((report.counts.valid['200'] ?? 0) > 100, text);
  assert.ok(report.passed, text);
});
