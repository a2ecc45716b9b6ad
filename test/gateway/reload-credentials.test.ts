// SIGHUP reloads the client credentials and limits, not only the backends: a rotated API key, a new rate limit and
// a new admin token apply without a restart (src/cli/gateway-process.ts: with discovery, only these are reloaded).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fakeEngine } from '../fixtures/fake-engine.js';
import { SERVE_LISTENING, start, stop } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

async function chat (url: string, key: string): Promise<number> {
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
    body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
  });
  await res.arrayBuffer();
  return res.status;
}

const admin = async (url: string, token: string): Promise<number> => {
  const res = await fetch(`${url}/admin/backends`, { headers: { authorization: `Bearer ${token}` } });
  await res.arrayBuffer();
  return res.status;
};

test('SIGHUP: a rotated API key, a new rate limit and a new admin token apply without a restart', async () => {
  const engine = await fakeEngine('m');
  const dir = mkdtempSync(join(tmpdir(), 'ear-reload-keys-'));
  const cfg = join(dir, 'ear.yaml');
  const write = (lines: string[]): void => writeFileSync(cfg, `${[`backends:\n  - url: ${engine.url}\n    id: engine`, ...lines].join('\n')}\n`);
  write(['apiKeys: [key-old, key-kept]', 'adminToken: admin-old']);
  const gw = await start(['serve', '--config', cfg, '--host', '127.0.0.1', '--port', '0', '--route-threads', '1'], SERVE_LISTENING);
  try {
    assert.equal(await chat(gw.url, 'key-old'), 200);
    assert.equal(await chat(gw.url, 'key-new'), 401);
    assert.equal(await admin(gw.url, 'admin-old'), 200);

    // Rotate: key-old out, key-new in, key-kept limited to a burst of 2 at a trickle; a new admin token.
    write(['apiKeys: [key-new, key-kept]', 'adminToken: admin-new', 'rateLimits:', '  keys:', '    key-kept: {requestsPerSecond: 0.01, burst: 2}']);
    gw.child.kill('SIGHUP');
    await until(async () => await chat(gw.url, 'key-new') === 200, 'key-new admitted');
    assert.equal(await chat(gw.url, 'key-old'), 401, 'a removed key is refused');
    assert.equal(await admin(gw.url, 'admin-old'), 401);
    assert.equal(await admin(gw.url, 'admin-new'), 200);
    // key-kept's bucket started full before the limit existed: at most its burst of 2 more, then 429.
    const statuses: number[] = [];
    for (let i = 0; i < 4; i++) statuses.push(await chat(gw.url, 'key-kept'));
    assert.ok(statuses.includes(429), statuses.join(','));
    assert.ok(statuses.filter((s) => s === 200).length <= 2, statuses.join(','));

    // An invalid file is refused whole: what was loaded stays.
    writeFileSync(cfg, 'apiKeys: 12\n');
    gw.child.kill('SIGHUP');
    await until(async () => gw.out().includes('reload refused'), 'the refusal logged');
    assert.equal(await chat(gw.url, 'key-new'), 200);
    assert.equal(await chat(gw.url, 'key-old'), 401);
  } finally {
    await stop(gw);
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
