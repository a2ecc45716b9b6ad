// Two `ear epp` replicas over one redis-server (--session-store): a session's turns keep their engine whichever
// replica the proxy asks, as two `ear serve` replicas do. Engine /metrics polling is off (metricsIntervalMs 0), so
// the load a replica places new sessions by is its own in-flight count: a scrape that caught an engine busy kept it
// looking busy until the next scrape, and on a loaded machine every new session went to the other engine once.
import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stop, text, type Proc } from '../fixtures/processes.js';
import { RedisServer, redisServerMissing } from '../store/redis-server.js';
import { chat, epp, sims, type Epp } from './epp-process.js';

describe('ear epp replicas sharing sessions through redis', { skip: redisServerMissing }, () => {
  let redis: RedisServer;
  let engines: Proc[] = [];
  let a: Epp;
  let b: Epp;

  let dir: string;

  before(async () => {
    redis = await RedisServer.start();
    engines = await sims(2);
    dir = mkdtempSync(join(tmpdir(), 'ear-epp-replicas-'));
    const cfg = join(dir, 'ear.yaml');
    // A generous store timeout too: two cores shared with other suites.
    writeFileSync(cfg, 'metricsIntervalMs: 0\nsessionStoreTimeoutMs: 2000\n');
    const backends = engines.map((s, i) => `${s.url},id=sim-${i}`);
    const args = ['--config', cfg, '--session-store', redis.url, '--policy', 'sticky'];
    [a, b] = await Promise.all([epp(backends, args), epp(backends, args)]);
  });

  after(async () => {
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
    await Promise.all([a?.close(), b?.close()]);
    await Promise.all(engines.map((s) => stop(s)));
    await redis?.kill();
  });

  test('turn 1 through one replica, turn 2 through the other: the same engine', async () => {
    // Replica B's placement rotation one step ahead of A's, so that without shared bindings the replicas would
    // place a new session differently (sticky places new sessions in turn among idle engines).
    assert.equal((await b.envoy.exchange({ body: chat('offset') })).status, 200);
    const served = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const session = `shared-${i}`;
      const messages = [{ role: 'user', content: text(`replica ${i}`, 1500) }];
      const one = await a.envoy.exchange({ body: Buffer.from(JSON.stringify({ model: 'm', messages, max_tokens: 4 })), headers: { 'x-session-id': session } });
      assert.equal(one.status, 200);
      served.add(one.served!);
      const two = await b.envoy.exchange({ body: Buffer.from(JSON.stringify({ model: 'm', messages: [...messages, { role: 'assistant', content: 'ok' }, { role: 'user', content: 'next' }], max_tokens: 4 })), headers: { 'x-session-id': session } });
      assert.equal(two.endpointHeader!.split(',')[0], one.served, `session ${session}: replica B names replica A's engine first`);
    }
    assert.equal(served.size, 2, 'new sessions were spread over both engines (else the check above proves little)');
  });
});
