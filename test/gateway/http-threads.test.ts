// N data-plane threads (httpThreads 2; docs/architecture.md#n-data-plane-threads), end to end: `ear serve
// --http-threads 2` in front of `ear sim` processes, every request on a fresh connection so the kernel spreads them
// over both threads' listeners (ear_http_thread_requests_total says which took how many). The main thread makes
// every decision, so what one thread does the process does: a session stays on its engine, a request is counted
// once, a key's limit is one bucket, admission keeps one order, and SIGHUP and SIGTERM reach every thread.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ADMIN, simFleet, stop, type SimFleet } from '../fixtures/processes.js';
import { until } from '../fixtures/wait.js';

interface Answer { status: number; backend: string; body: string }

/** One POST on a connection of its own (no keep-alive pool: each request is a new connection the kernel places). */
function post (gw: string, path: string, body: unknown, headers: Record<string, string> = {}, onHead?: () => void): Promise<Answer> {
  const u = new URL(gw);
  const data = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path, method: 'POST', agent: false,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), connection: 'close', ...headers } }, (res) => {
      onHead?.();
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, backend: String(res.headers['x-ear-backend'] ?? ''), body: text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(data);
  });
}

/** One GET on a connection of its own: its body. */
function get (gw: string, path: string, headers: Record<string, string> = {}): Promise<string> {
  const u = new URL(gw);
  return new Promise((resolve, reject) => {
    http.get({ host: u.hostname, port: u.port, path, agent: false, headers: { connection: 'close', ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => { text += c; });
      res.on('end', () => resolve(text));
      res.on('error', reject);
    }).on('error', reject);
  });
}

function chat (gw: string, session: string, content: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}, onHead?: () => void): Promise<Answer> {
  return post(gw, '/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content }], max_tokens: 4, ...extra }, { 'x-session-id': session, ...headers }, onHead);
}

/** Every series of `name` on the gateway's /metrics, by its label text. */
async function series (gw: string, name: string): Promise<Map<string, number>> {
  const t = await get(gw, '/metrics');
  const out = new Map<string, number>();
  for (const l of t.split('\n')) {
    if (!l.startsWith(`${name}{`) && !l.startsWith(`${name} `)) continue;
    out.set(l.slice(name.length, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1)));
  }
  return out;
}

/** Requests each thread took: [thread 1, thread 2]. */
async function perThread (gw: string): Promise<[number, number]> {
  const s = await series(gw, 'ear_http_thread_requests_total');
  return [s.get('{thread="1"}') ?? 0, s.get('{thread="2"}') ?? 0];
}

const sum = (m: Map<string, number>): number => [...m.values()].reduce((a, b) => a + b, 0);

async function fleet (config: string[], sims: number, opts: Parameters<typeof simFleet>[2] = {}, simFlags: string[] = []): Promise<SimFleet> {
  return await simFleet(['healthIntervalMs: 500', 'metricsIntervalMs: 0', ...config], () => Array.from({ length: sims }, () => simFlags),
    { ...opts, serveArgs: ['--http-threads', '2', ...(opts.serveArgs ?? [])] });
}

test('a session\'s turns over fresh connections land on one engine whichever thread took them; /metrics counts each once', async () => {
  const f = await fleet([], 2);
  try {
    const sessions = Array.from({ length: 6 }, (_, i) => `s-${i}`);
    const hosts = new Map<string, Set<string>>();
    let sent = 0;
    for (let t = 0; t < 4; t++) {
      const answers = await Promise.all(sessions.map((s) => chat(f.url, s, `turn ${t} of ${s}`)));
      sent += answers.length;
      answers.forEach((a, i) => {
        assert.equal(a.status, 200, a.body);
        const set = hosts.get(sessions[i]) ?? new Set();
        set.add(a.backend);
        hosts.set(sessions[i], set);
      });
    }
    for (const [s, set] of hosts) assert.equal(set.size, 1, `${s} was served by ${[...set].join(', ')}`);
    const [a, b] = await perThread(f.url);
    assert.ok(a > 0 && b > 0, `both threads took requests (${a}, ${b})`);
    assert.equal(a + b, sent);
    const requests = await series(f.url, 'ear_requests_total');
    assert.equal(sum(requests), sent, [...requests].join('; '));
    const e2e = await series(f.url, 'ear_e2e_request_latency_seconds_count');
    assert.equal(sum(e2e), sent, 'histograms merged over the threads');
  } finally {
    await f.close();
  }
});

test('a key\'s request limit is exact across threads', async () => {
  const f = await fleet(['apiKeys: [k1]', 'rateLimits:', '  default: {requestsPerSecond: 0.001, burst: 5}'], 1);
  try {
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => chat(f.url, `r-${i}`, 'hello', {}, { authorization: 'Bearer k1' })));
    const ok = answers.filter((a) => a.status === 200).length;
    const limited = answers.filter((a) => a.status === 429).length;
    assert.equal(ok, 5, answers.map((a) => `${a.status} ${a.body.slice(0, 80)}`).join('\n'));
    assert.equal(limited, 11);
    const [a, b] = await perThread(f.url);
    assert.ok(a > 0 && b > 0, `both threads took requests (${a}, ${b})`);
    assert.equal(a + b, 16);
    const requests = await series(f.url, 'ear_requests_total');
    assert.equal(requests.get('{route="/v1/chat/completions",status="429",backend=""}'), 11);
    assert.equal(sum(requests), 16);
  } finally {
    await f.close();
  }
});

test('ATLAS order holds for requests that waited through different threads', async () => {
  // One engine that holds one request at a time: the rest wait in the main thread's one queue. A session with
  // service behind it ranks after a new one (schedulerQuantumMs 1: any service is past level 0); no promotion.
  const f = await fleet(['scheduler: atlas', 'schedulerQuantumMs: 1', 'schedulerBeta: 1000000'], 1,
    { backendOptions: () => 'max-concurrent=1' }, ['--stop-probability', '0']);
  try {
    const pairs = 12;
    for (let i = 0; i < pairs; i++) assert.equal((await chat(f.url, `old-${i}`, 'warm up', { max_tokens: 8 })).status, 200);
    const order: string[] = [];
    const blocker = chat(f.url, 'blocker', 'hold the engine', { max_tokens: 400 });
    await until(async () => sum(await series(f.url, 'ear_backend_in_flight')) === 1, 'the blocker runs');
    const before = await perThread(f.url);
    const waiting: Array<Promise<void>> = [];
    let sent = 0;
    // Pairs sent (old, then new) until both threads took some of them, at least 3 pairs.
    for (let i = 0; i < pairs; i++) {
      for (const name of [`old-${i}`, `new-${i}`]) {
        waiting.push(chat(f.url, name, `next turn of ${name}`, { max_tokens: 2 }).then((a) => {
          assert.equal(a.status, 200, `${name}: ${a.body}`);
          order.push(name);
        }));
        sent++;
        await until(async () => sum(await series(f.url, 'ear_admission_queue_depth')) === sent, `${sent} waiting`);
      }
      const now = await perThread(f.url);
      if (i >= 2 && now[0] > before[0] && now[1] > before[1]) break;
    }
    const after = await perThread(f.url);
    assert.ok(after[0] > before[0] && after[1] > before[1], `waiting requests came through both threads (${before} → ${after})`);
    assert.equal((await blocker).status, 200);
    await Promise.all(waiting);
    const news = order.filter((n) => n.startsWith('new-'));
    assert.deepEqual(order.slice(0, news.length), news, `every new session before every old one: ${order.join(' ')}`);
    assert.deepEqual(news, [...news].sort((x, y) => Number(x.slice(4)) - Number(y.slice(4))), 'new sessions in arrival order (one level)');
  } finally {
    await f.close();
  }
});

test('SIGHUP\'s backend list reaches every thread', async () => {
  const f = await fleet([], 2, { backends: 'config' });
  try {
    const specs = f.sims.map((s, i) => `${s.url},id=sim-${i}`);
    const admin = async (): Promise<string[]> => {
      const r = await get(f.url, '/admin/backends', { authorization: `Bearer ${ADMIN}` });
      return (JSON.parse(r) as { backends: Array<{ id: string; draining: boolean }> }).backends.filter((b) => !b.draining).map((b) => b.id);
    };
    for (const only of [1, 0]) {
      f.writeConfig([specs[only]]);
      f.gateway.child.kill('SIGHUP');
      await until(async () => (await admin()).join() === `sim-${only}`, `only sim-${only} serves`);
      const before = await perThread(f.url);
      for (let n = 0; n < 40; n++) {
        const a = await chat(f.url, `h-${only}-${n}`, 'after the reload');
        assert.equal(a.status, 200, a.body);
        assert.equal(a.backend, `sim-${only}`);
        const now = await perThread(f.url);
        if (n >= 3 && now[0] > before[0] && now[1] > before[1]) break;
      }
      const after = await perThread(f.url);
      assert.ok(after[0] > before[0] && after[1] > before[1], `both threads served after the reload (${before} → ${after})`);
    }
  } finally {
    await f.close();
  }
});

test('SIGTERM drains every thread: the streams in flight on both end whole, then the process exits 0', async () => {
  const f = await fleet([], 2, {}, ['--stop-probability', '0']);
  try {
    const before = await perThread(f.url);
    const streams: Array<Promise<Answer>> = [];
    let heads = 0;
    for (let n = 0; n < 40; n++) {
      streams.push(chat(f.url, `d-${n}`, 'a long answer', { max_tokens: 300, stream: true }, {}, () => { heads++; }));
      await until(() => heads === streams.length, 'the stream started');
      const now = await perThread(f.url);
      if (n >= 1 && now[0] > before[0] && now[1] > before[1]) break;
    }
    const after = await perThread(f.url);
    assert.ok(after[0] > before[0] && after[1] > before[1], `streams in flight on both threads (${before} → ${after})`);
    const code = stop(f.gateway);
    for (const a of await Promise.all(streams)) {
      assert.equal(a.status, 200);
      assert.match(a.body, /"finish_reason":"length"/);
      assert.match(a.body, /data: \[DONE\]\n\n$/);
    }
    assert.equal(await code, 0, f.gateway.out());
  } finally {
    await f.close();
  }
});

test('an exception thrown in a data-plane thread is logged with its thread, and every thread serves on', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'ear-thread-fault-'));
  const trigger = new URL('../fixtures/thread-fault-trigger.js', import.meta.url).href;
  const f = await fleet([], 1, { gatewayEnv: { NODE_OPTIONS: `--import ${trigger}`, EAR_TEST_THREAD_FAULT: join(dir, 'fault') } });
  try {
    for (const k of [1, 2]) {
      writeFileSync(join(dir, `fault.${k}`), '');
      await until(() => f.gateway.out().includes(`injected exception in data-plane thread ${k}`), `thread ${k}'s fault logged`);
    }
    const lines = f.gateway.out().split('\n').filter((l) => l.includes('injected exception'));
    for (const k of [1, 2]) assert.ok(lines.some((l) => l.includes(`"thread":${k}`) && l.includes('"where":"uncaught-exception"')), lines.join('\n'));
    assert.equal(f.gateway.child.exitCode, null, 'the process did not exit');
    const before = await perThread(f.url);
    for (let n = 0; n < 40; n++) {
      assert.equal((await chat(f.url, `f-${n}`, 'still there?')).status, 200);
      const now = await perThread(f.url);
      if (now[0] > before[0] && now[1] > before[1]) break;
    }
    const after = await perThread(f.url);
    assert.ok(after[0] > before[0] && after[1] > before[1], `both threads serve after their faults (${before} → ${after})`);
    assert.equal(sum(await series(f.url, 'ear_faults_total')), 2, 'counted once each, summed over the threads');
    assert.doesNotMatch(f.gateway.out(), /data-plane thread died/);
  } finally {
    await f.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
