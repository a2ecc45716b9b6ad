// Pod → backend: which pods serve (Running, Ready, not terminating, with an IP), and the backend each becomes
// (URL, role and KV-event endpoints from its labels); the InferencePool as a source; discovery's config checks.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { podVerdict, type PodBackendOptions } from '../../src/discovery/pod-backend.js';
import { poolSource } from '../../src/discovery/inference-pool.js';
import { buildConfig, checkLabelSelector, ConfigError, DISCOVERY_DEFAULTS } from '../../src/config/index.js';
import { inferencePool, pod } from '../fixtures/k8s-api-server.js';

const OPTS: PodBackendOptions = { ...DISCOVERY_DEFAULTS, port: 8000 };
const KV = 'model.aibrix.ai/kv-events-enabled';

test('a Running, Ready pod with an IP is a backend on the configured port, role both by default', () => {
  const v = podVerdict(pod('vllm-0', '10.0.0.7', { app: 'vllm' }), OPTS);
  assert.deepEqual(v.backend, {
    id: 'vllm-0', url: 'http://10.0.0.7:8000', kvEvents: null, replay: null, kvTopic: '', role: 'both',
    kvCapacityBlocks: null, maxConcurrent: null, apiKey: null, priority: null
  });
});

test('the engine-priority label says a pod engine orders by priority, and in which polarity; a typo skips the pod', () => {
  const label = DISCOVERY_DEFAULTS.priorityLabel;
  assert.equal(label, 'ear.dev/engine-priority');
  for (const kind of ['vllm', 'sglang', 'sglang-low-first'] as const) {
    assert.equal(podVerdict(pod('a', '10.0.0.1', { [label]: kind }), OPTS).backend?.priority, kind);
  }
  assert.equal(podVerdict(pod('a', '10.0.0.1', { [label]: 'off' }), OPTS).backend?.priority, null);
  assert.equal(podVerdict(pod('a', '10.0.0.1', { [label]: 'vLLM' }), OPTS).skip, 'bad-priority');
  const own = podVerdict(pod('a', '10.0.0.1', { 'my/prio': 'vllm' }), { ...OPTS, priorityLabel: 'my/prio' });
  assert.equal(own.backend?.priority, 'vllm');
  assert.throws(() => buildConfig({ discovery: { kind: 'k8s', priorityLabel: 'bad label' } }), /priorityLabel/);
});

test('pods that do not serve say why: not ready, not running, no IP, terminating, a bad role or name', () => {
  assert.equal(podVerdict(pod('a', '10.0.0.1', {}, { ready: false }), OPTS).skip, 'not-ready');
  assert.equal(podVerdict(pod('a', '10.0.0.1', {}, { phase: 'Pending' }), OPTS).skip, 'not-running');
  assert.equal(podVerdict(pod('a', '10.0.0.1', {}, { phase: 'Succeeded' }), OPTS).skip, 'not-running');
  assert.equal(podVerdict(pod('a', null, {}), OPTS).skip, 'no-ip');
  assert.equal(podVerdict(pod('a', '10.0.0.1', {}, { deleting: true }), OPTS).skip, 'terminating');
  assert.equal(podVerdict(pod('a', '10.0.0.1', { 'llm-d.ai/role': 'encode' }), OPTS).skip, 'bad-role');
  assert.equal(podVerdict(pod('x'.repeat(64), '10.0.0.1', {}), OPTS).skip, 'bad-name');
  // No conditions at all (a pod just scheduled) is not ready.
  const bare = pod('a', '10.0.0.1', {});
  (bare.status as { conditions?: unknown }).conditions = undefined;
  assert.equal(podVerdict(bare, OPTS).skip, 'not-ready');
});

test('roles come from the role label (llm-d values), under a configurable key', () => {
  for (const [value, role] of [['prefill', 'prefill'], ['decode', 'decode'], ['both', 'both']]) {
    assert.equal(podVerdict(pod('a', '10.0.0.1', { 'llm-d.ai/role': value }), OPTS).backend?.role, role);
  }
  const custom = { ...OPTS, roleLabel: 'example.com/phase' };
  assert.equal(podVerdict(pod('a', '10.0.0.1', { 'example.com/phase': 'decode', 'llm-d.ai/role': 'prefill' }), custom).backend?.role, 'decode');
});

test('a pod that opts in to KV events is followed at POD_IP:5557, replay 5558, topic kv@<pod>@<model>', () => {
  const b = podVerdict(pod('vllm-1', '10.0.0.8', { [KV]: 'true', 'llm-d.ai/model': 'qwen3-8b' }), OPTS).backend!;
  assert.equal(b.kvEvents, 'tcp://10.0.0.8:5557');
  assert.equal(b.replay, 'tcp://10.0.0.8:5558');
  assert.equal(b.kvTopic, 'kv@vllm-1@qwen3-8b');
  // Without a model label the topic is the pod's prefix (every model it serves); "false" does not opt in.
  assert.equal(podVerdict(pod('vllm-1', '10.0.0.8', { [KV]: 'true' }), OPTS).backend!.kvTopic, 'kv@vllm-1@');
  assert.equal(podVerdict(pod('vllm-1', '10.0.0.8', { [KV]: 'false' }), OPTS).backend!.kvEvents, null);
  // Configured ports and label key.
  const b2 = podVerdict(pod('p', '10.0.0.9', { 'x.io/kv': 'true' }), { ...OPTS, kvEventsLabel: 'x.io/kv', kvEventsPort: 6000, kvReplayPort: 6001 }).backend!;
  assert.deepEqual([b2.kvEvents, b2.replay], ['tcp://10.0.0.9:6000', 'tcp://10.0.0.9:6001']);
});

test('an IPv6 pod IP goes in brackets', () => {
  const b = podVerdict(pod('v6', 'fd00::7', { [KV]: 'true' }), OPTS).backend!;
  assert.equal(b.url, 'http://[fd00::7]:8000');
  assert.equal(b.kvEvents, 'tcp://[fd00::7]:5557');
});

test('an InferencePool gives a selector from matchLabels and the port from targetPorts[0]', () => {
  assert.deepEqual(poolSource(inferencePool('pool', { app: 'vllm', 'llm-d.ai/model': 'm' }, 8200)), { labelSelector: 'app=vllm,llm-d.ai/model=m', port: 8200 });
  assert.match((poolSource({ metadata: { name: 'p' }, spec: { selector: { matchLabels: {} }, targetPorts: [{ number: 1 }] } }) as { error: string }).error, /matchLabels/);
  assert.match((poolSource({ metadata: { name: 'p' }, spec: { selector: { matchLabels: { a: 'b' } }, targetPorts: [] } }) as { error: string }).error, /targetPorts/);
});

test('discovery config: defaults, flags over the file, and errors that name the field and the rule', () => {
  const c = buildConfig({ discovery: { kind: 'k8s', namespace: 'llm', port: 8001 } }, { discovery: { kind: 'k8s', labelSelector: 'app in (vllm, sglang),tier!=canary' } });
  assert.deepEqual(c.discovery, { ...DISCOVERY_DEFAULTS, namespace: 'llm', port: 8001, labelSelector: 'app in (vllm, sglang),tier!=canary' });
  assert.equal(buildConfig({}).discovery, null);
  // With a pool, its selector picks the pods; a labelSelector beside it (as the Helm chart writes) is not an error.
  assert.equal(buildConfig({ discovery: { kind: 'k8s', inferencePool: 'pool', labelSelector: 'app=x' } }).discovery?.inferencePool, 'pool');
  // Flags with nothing set leave the static list alone.
  assert.equal(buildConfig({}, { discovery: { kind: undefined, namespace: undefined } }).discovery, null);
  const bad: Array<[Record<string, unknown>, RegExp]> = [
    [{ kind: 'consul' }, /discovery\.kind: must be k8s/],
    [{ kind: 'k8s', namespace: 'Bad_NS' }, /discovery\.namespace: "Bad_NS" is not a namespace name/],
    [{ kind: 'k8s', labelSelector: 'app=' + 'x'.repeat(70) }, /discovery\.labelSelector/],
    [{ kind: 'k8s', labelSelector: 'app in vllm' }, /is not a label selector requirement/],
    [{ kind: 'k8s', inferencePool: 'pool', labelSelector: 'app in x' }, /discovery\.labelSelector/],
    [{ kind: 'k8s', roleLabel: 'bad key/with space' }, /discovery\.roleLabel: .* is not a Kubernetes label key/],
    [{ kind: 'k8s', port: 0 }, /discovery\.port: must be an integer in \[1, 65535\]/],
    [{ kind: 'k8s', kvEventsPort: 7000, kvReplayPort: 7000 }, /discovery\.kvReplayPort: must differ/],
    [{ kind: 'k8s', maxPods: 0 }, /discovery\.maxPods: must be an integer in \[1, 16384\]/],
    [{ kind: 'k8s', maxPods: 1000 }, /discovery\.maxPods: must be at most maxPods \(256, the pod rows\), got 1000/],
    [{ kind: 'k8s', labelselector: 'a=b' }, /discovery\.labelselector: unknown field/]
  ];
  for (const [d, re] of bad) assert.throws(() => buildConfig({ discovery: d }), (err: unknown) => err instanceof ConfigError && re.test(err.message), JSON.stringify(d));
  assert.throws(() => buildConfig({ discovery: { kind: 'k8s' }, backends: [{ url: 'http://a:1' }] }), /backends: must be empty with discovery/);
});

test('label selectors: the forms the API server takes pass, malformed ones fail', () => {
  for (const s of ['', 'app=vllm', 'app==vllm', 'app!=vllm', 'app', '!canary', 'app in (a,b)', 'app notin (a)', 'llm-d.ai/role=decode,app=vllm', 'tier in (a, b),!x']) {
    assert.equal(checkLabelSelector('s', s), s.trim());
  }
  for (const s of ['app=vllm,', 'app in (a', '=x', 'a=b=c', 'a b']) assert.throws(() => checkLabelSelector('s', s), ConfigError, s);
});
