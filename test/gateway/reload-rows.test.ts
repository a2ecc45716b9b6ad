// A fleet that rolls more backends through the gateway than the pod table has rows keeps working: `ear serve
// --config FILE` takes 300 SIGHUP reloads, each replacing the backend list with a backend of a new id (the
// pod table holds 256), and then serves, its /metrics free of the departed backends' series (the data-plane threads'
// included). Real processes: the gateway and an `ear sim` engine.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { until } from '../fixtures/wait.js';

const ear = fileURLToPath(new URL('../../src/cli/ear.js', import.meta.url));
const TOKEN = 'reload-test-token';

function start (args: string[], pattern: RegExp): Promise<{ child: ChildProcess; url: string; out: () => string }> {
  const child = spawn(process.execPath, [ear, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, EAR_LOG_LEVEL: 'info' } });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => { out += d.toString(); });
  child.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no address within 20 s: ${out}`)), 20_000);
    const check = (): void => {
      const m = pattern.exec(out);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ child, url: m[1], out: () => out });
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => { clearTimeout(timer); reject(new Error(`exited (${code}) before listening: ${out}`)); });
  });
}

async function stop (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}


test('300 SIGHUP reloads, each to a backend of a new id, recycle pod rows; the gateway then serves', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-reload-'));
  const sim = await start(['sim', '--host', '127.0.0.1', '--port', '0', '--time-scale', '0', '--served-model-name', 'm'], /"url":"(http:\/\/127\.0\.0\.1:\d+)"/);
  let gw: Awaited<ReturnType<typeof start>> | null = null;
  try {
    const file = join(dir, 'ear.yaml');
    const write = (i: number): void => writeFileSync(file, `adminToken: ${TOKEN}\nhealthIntervalMs: 60000\nbackends:\n  - id: b${i}\n    url: ${sim.url}\n`);
    write(0);
    // Two data-plane threads: a departed backend's series must leave their registries too (the scrape sums them).
    gw = await start(['serve', '--config', file, '--host', '127.0.0.1', '--port', '0', '--route-threads', '1', '--http-threads', '2'], /listening on (http:\/\/\S+)"/);
    const url = gw.url;
    const g = gw;
    const backends = async (): Promise<string[]> => {
      const r = await fetch(`${url}/admin/backends`, { headers: { authorization: `Bearer ${TOKEN}` } }).catch((err: Error) => {
        throw new Error(`${err.message} (gateway exit code ${g.child.exitCode}, signal ${g.child.signalCode}):\n${g.out()}`);
      });
      const doc = await r.json() as { backends: Array<{ id: string; health: string }> };
      return doc.backends.map((b) => `${b.id}:${b.health}`);
    };
    const complete = async (): Promise<Response> => fetch(`${url}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-session-id': 'roll' },
      body: JSON.stringify({ model: 'm', prompt: 'the same session across every reload', max_tokens: 2 })
    });
    for (let i = 1; i <= 300; i++) {
      write(i);
      gw.child.kill('SIGHUP');
      // The reload is done when the new backend is healthy and the old one has gone (its row released).
      let seen: string[] = [];
      await until(async () => { seen = await backends(); return seen.length === 1 && seen[0] === `b${i}:healthy`; },
        { what: () => `reload ${i}: b${i} healthy and alone; seen ${JSON.stringify(seen)}`, intervalMs: 5 });
      if (i % 50 === 0) {
        const r = await complete();
        assert.equal(r.status, 200, await r.clone().text());
        assert.equal(r.headers.get('x-ear-backend'), `b${i}`);
        await r.arrayBuffer();
      }
    }
    const r = await complete();
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('x-ear-backend'), 'b300');
    await r.arrayBuffer();
    // The per-backend series of the 300 that left are gone: /metrics does not grow with the fleet's history.
    // They go once a departed backend's row is purged (the kv-events thread, one row after another: ~25 ms
    // each here, the first touch of the index ~1 s), so the last few may still be on their way.
    let ids: string[] = [];
    await until(async () => {
      const metrics = await (await fetch(`${url}/metrics`)).text();
      ids = [...new Set([...metrics.matchAll(/backend="(b\d+)"/g)].map((m) => m[1]))];
      return ids.length === 1;
    }, { what: () => `the departed backends' series to go; left ${ids.join(', ')}`, timeoutMs: 30_000, intervalMs: 100 });
    assert.deepEqual(ids, ['b300']);
    assert.doesNotMatch(gw.out(), /reload failed|reload refused/);
  } finally {
    if (gw) await stop(gw.child);
    await stop(sim.child);
    rmSync(dir, { recursive: true, force: true });
  }
});
