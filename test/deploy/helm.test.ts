// The Helm chart (deploy/helm/ear) renders, in each mode, to objects that validate against Kubernetes' schemas
// (and the ServiceMonitor / InferencePool CRDs), that reference each other correctly (ports, selectors, the
// endpoint picker), and that carry the EAR config EAR itself accepts; bad values fail the render.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import YAML from 'yaml';
import { CHART, lint, render, validate, validateAll, type K8sObject } from './manifests.js';
import { buildConfig, ConfigError } from '../../src/config/index.js';
import { policyNames } from '../../src/core/policies/index.js';
import { SCHEDULERS } from '../../src/core/admission.js';

function one (objects: K8sObject[], kind: string, name?: string): K8sObject {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  assert.equal(found.length, 1, `exactly one ${kind}${name === undefined ? '' : '/' + name}: ${found.map((o) => o.metadata.name).join(', ')}`);
  return found[0];
}

function earContainer (objects: K8sObject[]): any {
  const d = objects.find((o) => o.kind === 'Deployment' && o.spec.template.spec.containers[0].name === 'ear');
  assert.ok(d, 'the EAR Deployment');
  return d.spec.template.spec.containers[0];
}

function earConfig (objects: K8sObject[]): Record<string, any> {
  const cm = one(objects, 'ConfigMap');
  return YAML.parse(cm.data!['config.yaml']);
}

/**
 * Parses the rendered config with EAR's own config parser. Sections another part of issue #14 adds
 * (`discovery`, `ha`) are dropped first if this build's parser does not know them yet; every other field must be one
 * EAR accepts.
 */
function parsedByEar (cfg: Record<string, unknown>): void {
  const rest = { ...cfg };
  for (const k of ['discovery', 'ha']) {
    try {
      buildConfig({ [k]: cfg[k] });
    } catch (err) {
      if (err instanceof ConfigError && err.message.startsWith(`config ${k}: unknown field`)) delete rest[k];
      else throw err;
    }
  }
  buildConfig(rest);
}

/** Services whose selector picks the EAR pods, and the container port each service port targets. */
function checkServicesReachPods (objects: K8sObject[]): void {
  for (const s of objects.filter((o) => o.kind === 'Service')) {
    const pods = objects.filter((o) => o.kind === 'Deployment' && Object.entries(s.spec.selector).every(([k, v]) => o.spec.template.metadata.labels[k] === v));
    assert.equal(pods.length, 1, `Service/${s.metadata.name} selects one Deployment's pods`);
    const ports = pods[0].spec.template.spec.containers.flatMap((c: any) => c.ports ?? []);
    for (const p of s.spec.ports) {
      assert.ok(ports.some((cp: any) => cp.name === p.targetPort || cp.containerPort === p.targetPort), `Service/${s.metadata.name} port ${p.name} → ${p.targetPort} is a container port`);
    }
  }
}

async function assertValid (objects: K8sObject[]): Promise<void> {
  assert.ok(objects.length > 0);
  assert.deepEqual(await validateAll(objects), []);
  checkServicesReachPods(objects);
}

test('standalone (default values): HTTP gateway on :8080 with /health and /ready probes, RBAC for discovery, no CRDs', async () => {
  const r = render({});
  assert.ok(r.ok, r.stderr);
  await assertValid(r.objects);
  assert.deepEqual(r.objects.map((o) => o.kind).sort(), ['ConfigMap', 'Deployment', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
  const c = earContainer(r.objects);
  assert.deepEqual(c.args, ['serve', '--config=/etc/ear/config.yaml', '--port=8080']);
  assert.deepEqual(c.ports, [{ name: 'http', containerPort: 8080, protocol: 'TCP' }]);
  assert.deepEqual(c.livenessProbe.httpGet, { path: '/health', port: 'http' });
  assert.deepEqual(c.readinessProbe.httpGet, { path: '/ready', port: 'http' });
  const ns = c.env.find((e: any) => e.name === 'POD_NAMESPACE');
  assert.deepEqual(ns.valueFrom, { fieldRef: { fieldPath: 'metadata.namespace' } });
  assert.equal(c.env.some((e: any) => e.name.startsWith('OTEL_')), false, 'tracing off by default');
  const role = one(r.objects, 'Role');
  assert.deepEqual(role.rules, [
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['inference.networking.k8s.io'], resources: ['inferencepools'], verbs: ['get', 'list', 'watch'] }
  ]);
  const binding = one(r.objects, 'RoleBinding');
  assert.equal(binding.roleRef.name, role.metadata.name);
  assert.equal(binding.subjects[0].name, one(r.objects, 'ServiceAccount').metadata.name);
  assert.equal(one(r.objects, 'Deployment').spec.template.spec.serviceAccountName, one(r.objects, 'ServiceAccount').metadata.name);
  const cfg = earConfig(r.objects);
  assert.deepEqual(cfg.discovery, { kind: 'k8s', labelSelector: 'app=vllm', port: 8000, roleLabel: 'llm-d.ai/role', modelLabel: 'llm-d.ai/model', kvEventsLabel: 'model.aibrix.ai/kv-events-enabled', kvEventsPort: 5557, kvReplayPort: 5558 });
  assert.deepEqual(cfg.ha, { mode: 'active-active', leaseName: 'ear-leader', leaseDurationSeconds: 15 });
  assert.equal(cfg.policy, 'ear');
  assert.equal(cfg.scheduler, 'atlas');
  // Not `ear serve`'s own auto: with no CPU limit that would be a thread per core of the node.
  assert.equal(cfg.httpThreads, 2);
  assert.equal(earConfig(render({ httpThreads: 'auto', resources: { limits: { cpu: '4', memory: '4Gi' } } }).objects).httpThreads, 'auto');
  parsedByEar(cfg);
  for (const o of r.objects) assert.equal(o.metadata.namespace, 'llm', `${o.kind} in the release namespace`);
});

test('epp with inferencePool.create: an InferencePool whose endpointPickerRef is EAR\'s gRPC service; grpc probes on :9003', async () => {
  const r = render({ mode: 'epp', failureMode: 'FailClose', inferencePool: { create: true }, modelServers: { matchLabels: { app: 'vllm-llama', 'llm-d.ai/inferenceServing': 'true' } }, targetPorts: [{ number: 8000 }, { number: 8001 }] }, 'router');
  assert.ok(r.ok, r.stderr);
  await assertValid(r.objects);
  const pool = one(r.objects, 'InferencePool');
  assert.equal(pool.apiVersion, 'inference.networking.k8s.io/v1');
  assert.deepEqual(pool.spec.selector, { matchLabels: { app: 'vllm-llama', 'llm-d.ai/inferenceServing': 'true' } });
  assert.deepEqual(pool.spec.targetPorts, [{ number: 8000 }, { number: 8001 }]);
  const ref = pool.spec.endpointPickerRef;
  assert.equal(ref.failureMode, 'FailClose');
  assert.equal(ref.kind, 'Service');
  const svc = one(r.objects, 'Service', ref.name);
  assert.ok(svc.spec.ports.some((p: any) => p.port === ref.port.number && p.port === 9002), 'the picker service exposes the referenced port');
  const c = earContainer(r.objects);
  assert.equal(c.args[0], 'epp');
  assert.ok(c.args.includes('--grpc-port=9002') && c.args.includes('--grpc-health-port=9003') && c.args.includes('--port=9090'), c.args.join(' '));
  assert.deepEqual(c.ports.map((p: any) => [p.name, p.containerPort]), [['grpc', 9002], ['grpc-health', 9003], ['metrics', 9090]]);
  assert.deepEqual(c.livenessProbe.grpc, { port: 9003, service: 'liveness' });
  assert.deepEqual(c.readinessProbe.grpc, { port: 9003, service: 'readiness' });
  const cfg = earConfig(r.objects);
  assert.equal(cfg.discovery.inferencePool, pool.metadata.name);
  assert.equal(cfg.discovery.labelSelector, 'app=vllm-llama,llm-d.ai/inferenceServing=true');
  assert.equal(cfg.httpThreads, undefined, 'ear epp keeps one thread');
  parsedByEar(cfg);
});

test('active-passive with 3 replicas: a Lease rule, the lease named in EAR\'s ha config, redis for sessions', async () => {
  const r = render({ replicas: 3, ha: { mode: 'active-passive', leaseDurationSeconds: 10 }, redis: { url: 'redis://redis.cache:6379/2' } });
  assert.ok(r.ok, r.stderr);
  await assertValid(r.objects);
  assert.equal(one(r.objects, 'Deployment').spec.replicas, 3);
  const pdb = one(r.objects, 'PodDisruptionBudget');
  assert.deepEqual(pdb.spec.selector.matchLabels, one(r.objects, 'Deployment').spec.selector.matchLabels);
  const leases = one(r.objects, 'Role').rules.find((x: any) => x.apiGroups.includes('coordination.k8s.io'));
  assert.deepEqual(leases, { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update'] });
  const cfg = earConfig(r.objects);
  assert.deepEqual(cfg.ha, { mode: 'active-passive', leaseName: 'ear-leader', leaseDurationSeconds: 10 });
  assert.equal(cfg.sessionStore, 'redis://redis.cache:6379/2');
  parsedByEar(cfg);
});

test('monitoring and tracing on, in both modes: a ServiceMonitor on the metrics port, OTEL_* variables', async () => {
  for (const mode of ['standalone', 'epp']) {
    const r = render({ mode, monitoring: { interval: '30s', prometheus: { enabled: true, extraLabels: { release: 'kube-prometheus' } } }, tracing: { enabled: true, otelExporterEndpoint: 'http://otel-collector.observability:4317', sampling: { sampler: 'parentbased_traceidratio', samplerArg: 0.25 } } });
    assert.ok(r.ok, r.stderr);
    await assertValid(r.objects);
    const sm = one(r.objects, 'ServiceMonitor');
    assert.equal(sm.metadata.labels!.release, 'kube-prometheus');
    const svc = r.objects.find((o) => o.kind === 'Service' && Object.entries(sm.spec.selector.matchLabels).every(([k, v]) => o.metadata.labels?.[k] === v));
    assert.ok(svc, 'the ServiceMonitor selects the EAR service');
    const port = svc.spec.ports.find((p: any) => p.name === sm.spec.endpoints[0].port);
    assert.ok(port, `service port named ${sm.spec.endpoints[0].port}`);
    assert.equal(port.port, mode === 'epp' ? 9090 : 8080);
    assert.equal(sm.spec.endpoints[0].path, '/metrics');
    assert.equal(sm.spec.endpoints[0].interval, '30s');
    const env = Object.fromEntries(earContainer(r.objects).env.filter((e: any) => e.value !== undefined).map((e: any) => [e.name, e.value]));
    assert.equal(env.OTEL_TRACES_EXPORTER, 'otlp');
    assert.equal(env.OTEL_EXPORTER_OTLP_ENDPOINT, 'http://otel-collector.observability:4317');
    assert.equal(env.OTEL_TRACES_SAMPLER, 'parentbased_traceidratio');
    assert.equal(env.OTEL_TRACES_SAMPLER_ARG, '0.25');
    assert.equal(env.OTEL_SERVICE_NAME, 'ear');
  }
});

test('redis.deploy: its own Deployment and Service, selectors that do not take EAR\'s pods; config passthrough', async () => {
  const r = render({ redis: { deploy: { enabled: true } }, replicas: 2, config: { maxQueued: 100, routeThreads: 4, policyConfig: { alpha: 1 } }, policy: 'ear-proactive', scheduler: 'vtc' });
  assert.ok(r.ok, r.stderr);
  await assertValid(r.objects);
  assert.equal(r.objects.filter((o) => o.kind === 'Deployment').length, 2);
  const redisSvc = one(r.objects, 'Service', 'ear-redis');
  const cfg = earConfig(r.objects);
  assert.equal(cfg.sessionStore, `redis://${redisSvc.metadata.name}:6379`);
  assert.equal(cfg.maxQueued, 100);
  assert.equal(cfg.routeThreads, 4);
  assert.equal(cfg.policy, 'ear-proactive');
  assert.equal(cfg.scheduler, 'vtc');
  parsedByEar(cfg);
});

test('bad values fail the render, naming the value', () => {
  const cases: Array<[Record<string, unknown>, RegExp]> = [
    [{ mode: 'gateway' }, /mode must be one of/],
    [{ replicas: 0 }, /replicas: Must be greater than or equal to 1/],
    [{ failureMode: 'FailSafe' }, /failureMode must be one of/],
    [{ policy: 'fastest' }, /policy must be one of/],
    [{ scheduler: 'lifo' }, /scheduler must be one of/],
    [{ httpThreads: 0 }, /httpThreads/],
    [{ httpThreads: 'all' }, /httpThreads/],
    [{ targetPorts: [] }, /targetPorts: Array must have at least 1 items/],
    [{ targetPorts: [{ number: 70000 }] }, /targetPorts\.0\.number: Must be less than or equal to 65535/],
    [{ targetPorts: [{ port: 8000 }] }, /targetPorts\.0/],
    [{ ha: { mode: 'leader' } }, /ha\.mode must be one of/],
    // null deletes a default key in Helm's merge: this leaves matchLabels empty.
    [{ modelServers: { matchLabels: { app: null } } }, /matchLabels: Must have at least 1 properties/],
    [{ modelServers: { matchLabels: { app: 'not a label value' } } }, /matchLabels/],
    [{ tracing: { enabled: true, otelExporterEndpoint: 'collector:4317' } }, /otelExporterEndpoint/],
    [{ redis: { url: 'http://redis:6379' } }, /redis\.url/],
    [{ monitoring: { interval: 'often' } }, /monitoring\.interval/],
    [{ replica: 3 }, /Additional property replica is not allowed/],
    [{ inferencePool: { create: true } }, /inferencePool\.create needs mode: epp/],
    [{ redis: { url: 'redis://r:6379', deploy: { enabled: true } } }, /either redis\.url .* or redis\.deploy\.enabled/],
    [{ targetPorts: [{ number: 8000 }, { number: 8000 }] }, /port 8000 is listed twice/],
    [{ ports: { http: 8080, grpc: 9002, grpcHealth: 9002, metrics: 9090 } }, /must differ/],
    [{ config: { discovery: { kind: 'k8s' } } }, /config\.discovery/]
  ];
  for (const [values, message] of cases) {
    const r = render(values);
    assert.equal(r.ok, false, `${JSON.stringify(values)} rendered`);
    assert.match(r.stderr, message, JSON.stringify(values));
  }
});

test('the validator fails objects that break the schemas (so a passing render means something)', async () => {
  const base = render({ mode: 'epp', inferencePool: { create: true }, monitoring: { prometheus: { enabled: true } } });
  assert.ok(base.ok, base.stderr);
  const broken: Array<[string, (o: K8sObject[]) => K8sObject, RegExp]> = [
    ['containerPort as a string', (os) => { const d = structuredClone(os.find((o) => o.kind === 'Deployment')!); d.spec.template.spec.containers[0].ports[0].containerPort = '9002'; return d; }, /containerPort must be integer/],
    ['a misplaced container field', (os) => { const d = structuredClone(os.find((o) => o.kind === 'Deployment')!); d.spec.template.spec.containers[0].readinessProbe.grpc.path = '/ready'; return d; }, /readinessProbe\.grpc\.path: unknown field/],
    ['a Deployment without a selector', (os) => { const d = structuredClone(os.find((o) => o.kind === 'Deployment')!); delete d.spec.selector; return d; }, /selector/],
    ['a Service port out of range', (os) => { const s = structuredClone(os.find((o) => o.kind === 'Service')!); s.spec.ports[0].port = 70000; return s; }, /port must be <= 65535/],
    ['a Role rule with a typo', (os) => { const r = structuredClone(os.find((o) => o.kind === 'Role')!); r.rules[0].verb = ['get']; return r; }, /rules\[0\]\.verb: unknown field/],
    ['an InferencePool failureMode outside the API', (os) => { const p = structuredClone(os.find((o) => o.kind === 'InferencePool')!); p.spec.endpointPickerRef.failureMode = 'Sometimes'; return p; }, /failureMode/],
    ['an InferencePool Service ref without a port', (os) => { const p = structuredClone(os.find((o) => o.kind === 'InferencePool')!); delete p.spec.endpointPickerRef.port; return p; }, /port/],
    ['an InferencePool with no target ports', (os) => { const p = structuredClone(os.find((o) => o.kind === 'InferencePool')!); p.spec.targetPorts = []; return p; }, /targetPorts/],
    ['a ServiceMonitor interval that is no duration', (os) => { const s = structuredClone(os.find((o) => o.kind === 'ServiceMonitor')!); s.spec.endpoints[0].interval = 'often'; return s; }, /interval must match pattern/],
    ['a kind with no schema', (os) => ({ ...structuredClone(os[0]), apiVersion: 'example.com/v1', kind: 'Widget' }), /no schema for example\.com\/v1 Widget/],
    ['an uppercase name', (os) => { const s = structuredClone(os.find((o) => o.kind === 'Service')!); s.metadata.name = 'EAR'; return s; }, /DNS/]
  ];
  for (const [what, mutate, message] of broken) {
    const problems = await validate(mutate(base.objects));
    assert.ok(problems.length > 0, `${what}: accepted`);
    assert.match(problems.join('\n'), message, what);
  }
  // Cross-object: two Deployments whose selectors take each other's pods.
  const d = base.objects.find((o) => o.kind === 'Deployment')!;
  const twin = structuredClone(d);
  twin.metadata.name = 'twin';
  assert.match((await validateAll([d, twin])).join('\n'), /selector also matches Deployment\/twin/);
});

test('values.schema.json names the policies and schedulers EAR registers; values.yaml passes it; helm lint --strict', () => {
  const schema = JSON.parse(readFileSync(join(CHART, 'values.schema.json'), 'utf8'));
  assert.deepEqual([...schema.properties.policy.enum].sort(), policyNames().sort());
  assert.deepEqual([...schema.properties.scheduler.enum].sort(), [...SCHEDULERS].sort());
  // Lint renders NOTES.txt too (helm template does not): every value set of this file.
  for (const values of [{}, { mode: 'epp', inferencePool: { create: true } }, { replicas: 3, ha: { mode: 'active-passive' } },
    { monitoring: { prometheus: { enabled: true } }, tracing: { enabled: true } }, { replicas: 2, redis: { deploy: { enabled: true } } }]) {
    const l = lint(values);
    assert.ok(l.ok, l.out);
    assert.match(l.out, /1 chart\(s\) linted, 0 chart\(s\) failed/);
  }
});
