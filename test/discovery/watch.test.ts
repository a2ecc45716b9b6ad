// Pod discovery against the stub API server: list then watch (events split across chunks), bookmarks, 410 Gone
// and the relist's diff, an API-server restart, an InferencePool as the source, the maxPods bound, and backoff.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startPodDiscovery, type PodDiscovery } from '../../src/discovery/k8s-pods.js';
import { DISCOVERY_DEFAULTS, type BackendConfig, type DiscoveryConfig } from '../../src/config/index.js';
import { INFERENCE_POOLS, inferencePool, KubeApiStub, PODS, pod, status } from '../fixtures/k8s-api-server.js';
import { until } from '../fixtures/wait.js';

const dir = mkdtempSync(join(tmpdir(), 'ear-k8s-watch-'));
after(() => rmSync(dir, { recursive: true, force: true }));

const quiet = { info () {}, warn () {} };
const FAST = { coalesceMs: 20, backoffMinMs: 50, backoffMaxMs: 400, initialSyncTimeoutMs: 5000 };

/**
 * Tries that back off as FAST says: the k-th pause is at least 0.75 × min(50 ms × 2^k, 400 ms) (±25 % jitter), so
 * the gaps between tries grow; a busy loop would make them a few milliseconds.
 */
function assertBackoff (what: string, times: number[]): void {
  for (let k = 1; k < times.length; k++) {
    const floor = 0.75 * Math.min(FAST.backoffMaxMs, FAST.backoffMinMs * 2 ** (k - 1));
    assert.ok(times[k] - times[k - 1] >= floor, `${what}: try ${k + 1} came ${(times[k] - times[k - 1]).toFixed(1)} ms after the one before, under the ${floor} ms backoff`);
  }
}

/** What discovery handed on, and a way to wait for a list that passes a check. */
class Lists {
  readonly all: BackendConfig[][] = [];
  push = (b: BackendConfig[]): void => { this.all.push(b); };
  get last (): BackendConfig[] {
    return this.all.at(-1) ?? [];
  }

  ids (): string[] {
    return this.last.map((b) => b.id);
  }

  async until (check: (b: BackendConfig[]) => boolean, what: string, timeoutMs?: number): Promise<BackendConfig[]> {
    await until(() => check(this.last), { what: () => `discovery to hand on ${what}; last: ${JSON.stringify(this.ids())}`, timeoutMs });
    return this.last;
  }
}

async function setup (cfg: Partial<DiscoveryConfig> = {}, stubOpts = {}): Promise<{ stub: KubeApiStub; lists: Lists; d: PodDiscovery; cfg: DiscoveryConfig }> {
  const stub = await new KubeApiStub(stubOpts).start();
  const full: DiscoveryConfig = { ...DISCOVERY_DEFAULTS, kubeconfig: stub.kubeconfig(mkdtempSync(join(dir, 'kc-')), 'llm'), ...cfg };
  return { stub, lists: new Lists(), d: null as unknown as PodDiscovery, cfg: full };
}

const ids = (...n: string[]): string[] => n;

test('list then watch: pods join when Running and Ready, leave when terminating or deleted (events split across chunks)', async () => {
  const s = await setup({}, { splitEvents: true });
  s.stub.apply(PODS, pod('vllm-a', '10.0.0.1', { app: 'vllm' }, { namespace: 'llm' }));
  s.stub.apply(PODS, pod('vllm-b', '10.0.0.2', { app: 'vllm' }, { namespace: 'llm', ready: false }));
  s.stub.apply(PODS, pod('other', '10.0.0.3', { app: 'web' }, { namespace: 'llm' }));
  s.stub.apply(PODS, pod('vllm-elsewhere', '10.0.0.4', { app: 'vllm' }, { namespace: 'default' }));
  const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, FAST);
  try {
    assert.equal(d.namespace, 'llm', 'the kubeconfig context\'s namespace');
    assert.deepEqual(s.lists.ids(), ids('vllm-a'), 'the first list, before start resolves');
    assert.equal(s.lists.last[0].url, 'http://10.0.0.1:8000');
    assert.equal(d.stats.skipped['not-ready'], 1);
    s.stub.apply(PODS, pod('vllm-b', '10.0.0.2', { app: 'vllm' }, { namespace: 'llm' }));
    await s.lists.until((b) => b.length === 2, 'vllm-b once Ready (MODIFIED)');
    s.stub.apply(PODS, pod('vllm-c', '10.0.0.5', { app: 'vllm', 'llm-d.ai/role': 'decode' }, { namespace: 'llm' }));
    const three = await s.lists.until((b) => b.length === 3, 'vllm-c (ADDED)');
    assert.equal(three.find((b) => b.id === 'vllm-c')?.role, 'decode');
    s.stub.apply(PODS, pod('vllm-a', '10.0.0.1', { app: 'vllm' }, { namespace: 'llm', deleting: true }));
    await s.lists.until((b) => !b.some((x) => x.id === 'vllm-a'), 'vllm-a gone once terminating');
    s.stub.remove(PODS, 'llm', 'vllm-b');
    await s.lists.until((b) => b.length === 1, 'vllm-b gone (DELETED)');
    // A pod relabelled out of the selector is DELETED for the watch.
    s.stub.apply(PODS, pod('vllm-c', '10.0.0.5', { app: 'retired' }, { namespace: 'llm' }));
    await s.lists.until((b) => b.length === 0, 'vllm-c gone once it no longer matches');
    const watches = s.stub.requests.filter((r) => r.query.watch !== undefined);
    assert.equal(watches.length, 1, 'one watch carried every event');
    assert.equal(watches[0].query.allowWatchBookmarks, 'true');
    assert.equal(watches[0].query.labelSelector, 'app=vllm');
  } finally {
    await d.close();
    await s.stub.close();
  }
});

test('bookmarks move the resourceVersion on: a watch resumed after a compaction needs no relist', async () => {
  for (const withBookmark of [true, false]) {
    const s = await setup();
    s.stub.apply(PODS, pod('vllm-a', '10.0.0.1', { app: 'vllm' }, { namespace: 'llm' }));
    const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, FAST);
    try {
      // The bookmark goes to open watches only.
      await until(() => s.stub.watches === 1, 'the watch to open');
      // Changes elsewhere move the server's version, none of them for this watch.
      for (let i = 0; i < 20; i++) s.stub.apply(PODS, pod(`web-${i}`, '10.0.1.1', { app: 'web' }, { namespace: 'llm' }));
      const rv = s.stub.resourceVersion;
      if (withBookmark) s.stub.bookmark();
      // A moment for the bookmark to reach the reflector before the watch is cut: nothing it exposes says one
      // arrived (ReflectorStats counts no bookmarks), and without it the other branch has nothing to wait for.
      await sleep(100);
      s.stub.compact();
      s.stub.dropWatches();
      s.stub.apply(PODS, pod('vllm-b', '10.0.0.2', { app: 'vllm' }, { namespace: 'llm' }));
      await s.lists.until((b) => b.length === 2, 'vllm-b after the resume');
      const watches = s.stub.requests.filter((r) => r.query.watch !== undefined);
      if (withBookmark) {
        assert.equal(d.stats.relists, 0, 'resumed from the bookmark');
        assert.equal(watches[1].query.resourceVersion, rv, 'the second watch starts at the bookmarked version');
      } else {
        assert.equal(d.stats.relists, 1, 'without the bookmark the old version expired: a relist');
      }
      assert.equal(d.stats.watchRestarts >= 1, true);
    } finally {
      await d.close();
      await s.stub.close();
    }
  }
});

test('410 Gone while away: the relist replaces the pods, so those deleted meanwhile leave and new ones join', async () => {
  const s = await setup();
  for (const n of ['p1', 'p2', 'p3']) s.stub.apply(PODS, pod(n, `10.0.0.${n.slice(1)}`, { app: 'vllm' }, { namespace: 'llm' }));
  const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, FAST);
  try {
    assert.deepEqual(s.lists.ids(), ['p1', 'p2', 'p3']);
    const port = s.stub.port;
    await s.stub.close();
    s.stub.remove(PODS, 'llm', 'p2');
    s.stub.apply(PODS, pod('p4', '10.0.0.4', { app: 'vllm' }, { namespace: 'llm' }));
    s.stub.apply(PODS, pod('p3', '10.0.0.3', { app: 'vllm' }, { namespace: 'llm', ready: false }));
    s.stub.compact();
    await s.stub.start(port);
    await s.lists.until((b) => b.map((x) => x.id).join() === 'p1,p4', 'p1 and p4 after the relist');
    assert.equal(d.stats.relists, 1);
    const watchRvs = s.stub.requests.filter((r) => r.query.watch !== undefined).map((r) => r.query.resourceVersion);
    assert.equal(watchRvs.length >= 2, true);
    // The stream after the relist goes on.
    s.stub.apply(PODS, pod('p5', '10.0.0.5', { app: 'vllm' }, { namespace: 'llm' }));
    await s.lists.until((b) => b.length === 3, 'p5 after the relist');
  } finally {
    await d.close();
    await s.stub.close();
  }
});

test('an API-server restart: the watch resumes from its version (no relist) and misses nothing', async () => {
  const s = await setup();
  s.stub.apply(PODS, pod('p1', '10.0.0.1', { app: 'vllm' }, { namespace: 'llm' }));
  const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, FAST);
  try {
    const restarted = s.stub.restart(300);
    await sleep(50);
    // While it is down.
    s.stub.apply(PODS, pod('p2', '10.0.0.2', { app: 'vllm' }, { namespace: 'llm' }));
    await restarted;
    await s.lists.until((b) => b.length === 2, 'p2, changed while the server was down');
    s.stub.remove(PODS, 'llm', 'p1');
    await s.lists.until((b) => b.length === 1 && b[0].id === 'p2', 'p1 deleted after the restart');
    assert.equal(d.stats.relists, 0);
    assert.equal(d.stats.watchRestarts >= 1, true);
    assert.equal(d.stats.errors >= 1, true, 'the refused connections were counted');
  } finally {
    await d.close();
    await s.stub.close();
  }
});

test('an InferencePool is the source: its selector picks the pods, targetPorts[0] the port, and changes re-apply', async () => {
  const s = await setup({ inferencePool: 'pool-a', labelSelector: DISCOVERY_DEFAULTS.labelSelector });
  s.stub.apply(INFERENCE_POOLS, inferencePool('pool-a', { app: 'vllm' }, 8200, 'llm'));
  s.stub.apply(INFERENCE_POOLS, inferencePool('pool-b', { app: 'web' }, 80, 'llm'));
  s.stub.apply(PODS, pod('v1', '10.0.0.1', { app: 'vllm' }, { namespace: 'llm' }));
  s.stub.apply(PODS, pod('s1', '10.0.0.2', { app: 'sglang' }, { namespace: 'llm' }));
  const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, FAST);
  try {
    assert.deepEqual(s.lists.last.map((b) => b.url), ['http://10.0.0.1:8200']);
    s.stub.apply(INFERENCE_POOLS, inferencePool('pool-a', { app: 'vllm' }, 9000, 'llm'));
    await s.lists.until((b) => b[0]?.url === 'http://10.0.0.1:9000', 'the new target port');
    s.stub.apply(INFERENCE_POOLS, inferencePool('pool-a', { app: 'sglang' }, 9000, 'llm'));
    await s.lists.until((b) => b.length === 1 && b[0].id === 's1', 'the pods of the new selector');
    // Every list handed on had a pod: the switch never went through an empty list.
    assert.equal(s.lists.all.every((b) => b.length > 0), true);
    // Another pool's changes are not this one's.
    s.stub.apply(INFERENCE_POOLS, inferencePool('pool-b', { app: 'vllm' }, 1, 'llm'));
    // Proves a change does not arrive, so there is no event to wait for: a short while for one that would.
    await sleep(100);
    assert.deepEqual(s.lists.ids(), ['s1']);
    const poolWatch = s.stub.requests.find((r) => r.path.endsWith('/inferencepools') && r.query.watch !== undefined);
    assert.equal(poolWatch?.query.fieldSelector, 'metadata.name=pool-a');
  } finally {
    await d.close();
    await s.stub.close();
  }
});

test('at most maxPods pods are backends: the ones chosen stay, an extra joins when one leaves', async () => {
  const s = await setup({ maxPods: 2 });
  for (const n of ['p1', 'p2', 'p3']) s.stub.apply(PODS, pod(n, `10.0.0.${n.slice(1)}`, { app: 'vllm' }, { namespace: 'llm' }));
  const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, FAST);
  try {
    assert.deepEqual(s.lists.ids(), ['p1', 'p2']);
    assert.equal(d.stats.skipped['over-max-pods'], 1);
    s.stub.apply(PODS, pod('p0', '10.0.0.9', { app: 'vllm' }, { namespace: 'llm' }));
    await until(() => d.stats.skipped['over-max-pods'] === 2, 'the newcomer to be seen and left out');
    assert.deepEqual(s.lists.ids(), ['p1', 'p2'], 'a newcomer does not push a chosen pod out');
    s.stub.remove(PODS, 'llm', 'p1');
    await s.lists.until((b) => b.length === 2 && !b.some((x) => x.id === 'p1'), 'a waiting pod in p1\'s place');
    assert.equal(d.stats.skipped['over-max-pods'], 1);
  } finally {
    await d.close();
    await s.stub.close();
  }
});

test('a failing API server is retried with backoff, not in a busy loop, and start does not wait for ever', async () => {
  const s = await setup();
  s.stub.route('GET', /^\/api\/v1\/namespaces\/llm\/pods$/, (req, res) => {
    res.writeHead(500, { 'content-type': 'application/json' });
    res.end(JSON.stringify(status(500, 'InternalError', 'etcdserver: request timed out')));
  });
  const t0 = Date.now();
  const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, { ...FAST, initialSyncTimeoutMs: 300 });
  try {
    // It returned although no list ever succeeds: after its initialSyncTimeoutMs, not before.
    assert.ok(Date.now() - t0 >= 300 - 5, 'start waited its initialSyncTimeoutMs for the first list');
    assert.deepEqual(s.lists.all, [], 'nothing handed on without a list');
    const lists = (): number[] => s.stub.requests.filter((r) => r.path === '/api/v1/namespaces/llm/pods').map((r) => r.at);
    await until(() => lists().length >= 5, 'five list attempts');
    assertBackoff('lists', lists().slice(0, 5));
    await until(() => d.stats.errors === lists().length, { what: () => `every failed list counted: ${d.stats.errors} errors, ${lists().length} lists` });
  } finally {
    await d.close();
    await s.stub.close();
  }
});

test('a watch that goes silent (a half-open connection) is given up after its timeout and replaced', async () => {
  const s = await setup();
  let hung = 0;
  // The first watch gets its headers and then nothing, and is never ended by the server: as a dead peer.
  s.stub.route('GET', /^\/api\/v1\/namespaces\/llm\/pods$/, (req, res, m, q) => {
    if (q.get('watch') === null || hung++ > 0) return false;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
  });
  s.stub.apply(PODS, pod('p1', '10.0.0.1', { app: 'vllm' }, { namespace: 'llm' }));
  const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, { ...FAST, watchTimeoutSeconds: 1 });
  try {
    assert.deepEqual(s.lists.ids(), ['p1']);
    s.stub.apply(PODS, pod('p2', '10.0.0.2', { app: 'vllm' }, { namespace: 'llm' }));
    await s.lists.until((b) => b.length === 2, 'p2, once the silent watch was replaced', 8000);
    assert.equal(d.stats.watchRestarts >= 1, true);
    assert.equal(d.stats.relists, 0, 'resumed from its version: the history still had it');
  } finally {
    await d.close();
    await s.stub.close();
  }
});

test('lists come in pages (limit/continue); a continue token that expired starts the list over', async () => {
  const { Reflector } = await import('../../src/discovery/reflector.js');
  const { kubeTarget } = await import('../../src/kube/kube-target.js');
  const s = await setup();
  for (let i = 0; i < 5; i++) s.stub.apply(PODS, pod(`p${i}`, `10.0.0.${i + 1}`, { app: 'vllm' }, { namespace: 'llm' }));
  // The first second page is refused as the API server refuses a continue token older than its history.
  let refused = 0;
  s.stub.route('GET', /^\/api\/v1\/namespaces\/llm\/pods$/, (req, res, m, q) => {
    if (q.get('continue') === null || refused++ > 0) return false;
    res.writeHead(410, { 'content-type': 'application/json' });
    res.end(JSON.stringify(status(410, 'Expired', 'The provided continue parameter is too old to display a consistent list result.')));
  });
  const r = new Reflector({ kc: (await kubeTarget({ kubeconfig: s.cfg.kubeconfig, namespace: null }, {})).kubeConfig, path: '/api/v1/namespaces/llm/pods', labelSelector: 'app=vllm', pageSize: 2, onChange () {}, log: quiet }).start();
  try {
    await r.synced;
    assert.deepEqual([...r.objects.keys()].sort(), ['p0', 'p1', 'p2', 'p3', 'p4']);
    const lists = s.stub.requests.filter((q) => q.query.watch === undefined);
    assert.deepEqual(lists.map((q) => q.query.continue === undefined ? 'first' : 'next'), ['first', 'next', 'first', 'next', 'next']);
    assert.equal(lists.every((q) => q.query.limit === '2'), true);
    assert.equal(r.resourceVersion, s.stub.resourceVersion);
  } finally {
    await r.stop();
    await s.stub.close();
  }
});

test('a server that answers every watch with an ERROR event is retried with backoff, and a 410 one relists', async () => {
  const s = await setup();
  s.stub.apply(PODS, pod('p1', '10.0.0.1', { app: 'vllm' }, { namespace: 'llm' }));
  let code = 500;
  s.stub.route('GET', /^\/api\/v1\/namespaces\/llm\/pods$/, (req, res, m, q) => {
    if (q.get('watch') === null) return false;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(`${JSON.stringify({ type: 'ERROR', object: status(code, code === 410 ? 'Expired' : 'InternalError', 'no') })}\n`);
  });
  const d = await startPodDiscovery(s.cfg, s.lists.push, quiet, FAST);
  try {
    const watches = (): number[] => s.stub.requests.filter((r) => r.query.watch !== undefined).map((r) => r.at);
    await until(() => watches().length >= 5, 'five watch attempts');
    assertBackoff('watches', watches().slice(0, 5));
    assert.equal(d.stats.relists, 0);
    code = 410;
    await until(() => d.stats.relists > 0, 'a 410 ERROR event to relist');
  } finally {
    await d.close();
    await s.stub.close();
  }
});
