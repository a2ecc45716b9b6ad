// deploy/grafana/ear-dashboard.json and deploy/prometheus/ear-alerts.yaml query only metrics that exist: EAR's,
// as a real `ear serve` (in front of `ear sim` engines, with the features that create each family: KV events,
// ear-proactive migration, rate limits, the shared session store's series) exports them, and vLLM's, as the sim
// exports them plus test/deploy/vllm-metric-names.txt. Every expression parses as PromQL; the rule file has the
// structure Prometheus and the PrometheusRule CRD take. docs/metrics.md lists the same families.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import YAML from 'yaml';
import { Registry } from 'prom-client';
import { simFleet, kvEventsFlags, turn, text, type SimFleet } from '../fixtures/processes.js';
import { registerSessionStoreMetrics, type SessionStoreSource } from '../../src/telemetry/metrics.js';
import { ROOT } from './manifests.js';
import { dashboardExprs, exportedLabels, exportedNames, exprProblems, parseExpr } from './promql-names.js';
import { until } from '../fixtures/wait.js';

const DASHBOARD = join(ROOT, 'deploy', 'grafana', 'ear-dashboard.json');
const ALERTS = join(ROOT, 'deploy', 'prometheus', 'ear-alerts.yaml');

let fleet: SimFleet | undefined;
let dir = '';
const known = new Set<string>();
const earNames = new Set<string>();
/** Label names per series name, from the scrapes' sample lines. */
const labels = new Map<string, Set<string>>();
/** EAR's metric families (`# TYPE` names) in the live gateway's scrape. */
const earFamilies = new Set<string>();

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'ear-dash-'));
  const ports = [0, 1].map((i) => ({ pub: `ipc://${join(dir, `pub-${i}`)}`, replay: `ipc://${join(dir, `replay-${i}`)}` }));
  fleet = await simFleet(['policy: ear-proactive', 'healthIntervalMs: 60000', 'rateLimits: { perIp: { requestsPerSecond: 1000, burst: 1000 } }'],
    () => ports.map((p) => ['--time-scale', '0', ...kvEventsFlags(p.pub, p.replay)]),
    { backendOptions: (i) => `kv-events=${ports[i].pub},replay=${ports[i].replay}` });
  await turn(fleet.url, 'dash-1', [{ role: 'user', content: text('dashboard', 400) }]);
  // Some series get their first sample from the gateway's background loops (engine scrapes, the kv-events thread's
  // reports), which a loaded machine runs late: scrape until the series have not changed for a second.
  let gateway = '';
  let series = -1;
  let changedAt = performance.now();
  await until(async () => {
    gateway = await (await fetch(`${fleet!.url}/metrics`)).text();
    const n = gateway.split('\n').filter((l) => l !== '' && !l.startsWith('#')).length;
    if (n !== series) { series = n; changedAt = performance.now(); }
    return performance.now() - changedAt >= 1000;
  }, { what: 'the gateway\'s scrape to settle', intervalMs: 250, timeoutMs: 60_000 });
  for (const n of exportedNames(gateway)) earNames.add(n);
  for (const m of gateway.matchAll(/^# TYPE (ear_\S+)/gm)) earFamilies.add(m[1]);
  exportedLabels(gateway, labels);
  // The shared session store's series exist only with a redis:// store: their names from the registering code.
  const registry = new Registry();
  registerSessionStoreMetrics(registry, {} as SessionStoreSource);
  for (const m of registry.getMetricsAsArray()) earNames.add((m as unknown as { name: string }).name);
  const engine = await (await fetch(`${fleet.sims[0].url}/metrics`)).text();
  exportedLabels(engine, labels);
  const vendored = readFileSync(join(ROOT, 'test', 'deploy', 'vllm-metric-names.txt'), 'utf8').split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  for (const n of [...earNames, ...exportedNames(engine), ...vendored]) known.add(n);
});

after(async () => {
  await fleet?.close();
  if (dir !== '') rmSync(dir, { recursive: true, force: true });
});

test('the live gateway exports the families the dashboard and alerts are about', () => {
  for (const n of ['ear_requests_total', 'ear_backend_up', 'ear_admission_queue_depth', 'ear_kv_gaps_total', 'ear_kv_resyncs_total',
    'ear_kv_transfers_total', 'ear_proactive_migrations_total', 'ear_rate_limited_total', 'ear_session_store_up',
    'llm_d_epp_ready_endpoints', 'llm_d_epp_flow_control_queue_size', 'inference_pool_ready_pods', 'llm_d_epp_scheduler_e2e_duration_seconds_bucket']) {
    assert.ok(earNames.has(n), `${n} exported`);
  }
  assert.ok(known.has('vllm:num_requests_running') && known.has('vllm:time_to_first_token_seconds_bucket'), 'the sim\'s vLLM names');
  assert.equal(known.has('vllm:no_such_metric'), false);
});

test('docs/metrics.md lists every family the live gateway exports, and names no metric EAR does not have', () => {
  const page = readFileSync(join(ROOT, 'docs', 'metrics.md'), 'utf8');
  const listed = new Set([...page.matchAll(/^\| `(ear_[a-z0-9_]+)`/gm)].map((m) => m[1]));
  assert.deepEqual([...earFamilies].filter((n) => !listed.has(n)).sort(), [], 'exported but not in docs/metrics.md');
  // Families of features this fleet does not run (discovery, ha, ear epp) are checked against the code that registers them.
  const source = readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))
    .map((f) => readFileSync(join(ROOT, 'src', f), 'utf8')).join('\n');
  assert.deepEqual([...listed].filter((n) => !earFamilies.has(n) && !source.includes(`'${n}'`)).sort(), [], 'in docs/metrics.md but registered nowhere');
});

test('every query of the Grafana dashboard parses and names a metric EAR or vLLM exports', () => {
  const dash = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
  assert.equal(typeof dash.uid, 'string');
  assert.equal(typeof dash.title, 'string');
  assert.ok(Number.isInteger(dash.schemaVersion));
  const ids = new Set<number>();
  const walk = (panels: any[]): void => {
    for (const p of panels ?? []) {
      assert.ok(!ids.has(p.id), `panel id ${p.id} unique`);
      ids.add(p.id);
      assert.ok(p.gridPos && p.gridPos.w > 0 && p.gridPos.x + p.gridPos.w <= 24, `panel "${p.title}" fits the 24-column grid`);
      if (p.type !== 'row') assert.ok((p.targets ?? []).length > 0, `panel "${p.title}" has queries`);
      walk(p.panels);
    }
  };
  walk(dash.panels);
  const exprs = dashboardExprs(dash);
  assert.ok(exprs.length >= 40, `${exprs.length} expressions`);
  const problems = exprs.flatMap(({ where, expr }) => exprProblems(where, expr, known, labels));
  assert.deepEqual(problems, []);
  // Most selectors had their label matchers checked (the rest name families with no sample in this scrape).
  const selectors = exprs.flatMap(({ expr }) => parseExpr(expr).selectors);
  const checked = selectors.filter((s) => labels.has(s.name)).length;
  const unchecked = [...new Set(selectors.filter((s) => !labels.has(s.name)).map((s) => s.name))].sort();
  assert.ok(checked / selectors.length > 0.6, `${checked} of ${selectors.length} selectors label-checked; no sample: ${unchecked.join(', ')}`);
  const names = new Set(exprs.flatMap(({ expr }) => parseExpr(expr).names));
  assert.ok([...names].some((n) => n.startsWith('vllm:')), 'vLLM panels');
  assert.ok([...names].some((n) => n.startsWith('llm_d_epp_')), 'llm-d names');
  // Template variables the queries use are defined.
  const vars = new Set<string>(dash.templating.list.map((v: any) => v.name));
  for (const { where, expr } of exprs) for (const m of expr.matchAll(/\$(?!__)\{?([a-zA-Z_]\w*)/g)) assert.ok(vars.has(m[1]), `${where}: $${m[1]} is a dashboard variable`);
});

test('a dashboard with a bogus metric or broken PromQL fails the check', () => {
  const dash = JSON.parse(readFileSync(DASHBOARD, 'utf8'));
  const target = dash.panels.find((p: any) => p.type !== 'row').targets[0];
  target.expr = target.expr.replace(/ear_requests_total/, 'ear_requets_total');
  assert.match(dashboardExprs(dash).flatMap(({ where, expr }) => exprProblems(where, expr, known)).join('\n'), /ear_requets_total is exported by neither EAR nor vLLM/);
  target.expr = 'sum(rate(ear_requests_total[5m]) by';
  assert.match(dashboardExprs(dash).flatMap(({ where, expr }) => exprProblems(where, expr, known)).join('\n'), /syntax error/);
  target.expr = 'sum(rate(ear_requests_total{stauts="200"}[5m]))';
  assert.match(dashboardExprs(dash).flatMap(({ where, expr }) => exprProblems(where, expr, known, labels)).join('\n'), /ear_requests_total has no label stauts/);
  dash.templating.list.push({ name: 'x', type: 'query', query: 'label_values(vllm:not_a_metric, pod)' });
  assert.match(dashboardExprs(dash).flatMap(({ where, expr }) => exprProblems(where, expr, known)).join('\n'), /variable x: vllm:not_a_metric/);
  assert.match(exprProblems('q', '{__name__="ear_requests_total"}', known).join('\n'), /__name__ matcher/);
});

/** Problems with a Prometheus rule file: structure, and each rule's PromQL. */
function ruleFileProblems (doc: any): string[] {
  const problems: string[] = [];
  if (!Array.isArray(doc?.groups) || doc.groups.length === 0) return ['groups: a non-empty list is required'];
  const groups = new Set<string>();
  const alerts = new Set<string>();
  for (const g of doc.groups) {
    if (typeof g.name !== 'string' || groups.has(g.name)) problems.push(`group ${g.name}: a unique name is required`);
    groups.add(g.name);
    for (const k of Object.keys(g)) if (!['name', 'interval', 'rules', 'limit'].includes(k)) problems.push(`group ${g.name}: unknown field ${k}`);
    for (const r of g.rules ?? []) {
      const id = `${g.name}/${r.alert ?? r.record}`;
      for (const k of Object.keys(r)) if (!['alert', 'record', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations'].includes(k)) problems.push(`${id}: unknown field ${k}`);
      if (typeof r.alert !== 'string' || !/^[A-Z][A-Za-z0-9]+$/.test(r.alert)) problems.push(`${id}: alert must be a CamelCase name`);
      else if (alerts.has(r.alert)) problems.push(`${id}: alert name repeated`);
      alerts.add(r.alert);
      if (r.for !== undefined && !/^([0-9]+(ms|s|m|h|d|w|y))+$/.test(String(r.for))) problems.push(`${id}: for must be a duration`);
      if (!['critical', 'warning', 'info'].includes(r.labels?.severity)) problems.push(`${id}: labels.severity must be critical, warning or info`);
      if (typeof r.annotations?.summary !== 'string' || typeof r.annotations?.description !== 'string') problems.push(`${id}: annotations.summary and description are required`);
      if (typeof r.expr !== 'string') problems.push(`${id}: expr is required`);
      else problems.push(...exprProblems(id, r.expr, known, labels));
    }
  }
  return problems;
}

test('the alert rules parse, have the structure Prometheus takes, and name metrics EAR exports', async () => {
  const doc = YAML.parse(readFileSync(ALERTS, 'utf8'));
  assert.deepEqual(ruleFileProblems(doc), []);
  const names = new Set<string>(doc.groups.flatMap((g: any) => g.rules.map((r: any) => r.alert)));
  for (const a of ['EARNoReadyBackends', 'EARAdmissionQueueFull', 'EARAdmissionQueueSaturated', 'EARKvEventGaps', 'EARKvEventResyncs', 'EARMigrationThrash']) assert.ok(names.has(a), a);
  // The same groups as a PrometheusRule validate against the Prometheus Operator's CRD schema.
  const { PrometheusRule } = await import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule');
  new PrometheusRule({ metadata: { name: 'ear' }, spec: doc }).validate();
});

test('a rule file with a bogus metric, a bad duration or no severity fails the check', () => {
  const doc = YAML.parse(readFileSync(ALERTS, 'utf8'));
  doc.groups[0].rules[0].expr = 'ear_backend_upp == 0';
  doc.groups[0].rules[1].for = 'five minutes';
  delete doc.groups[1].rules[0].labels.severity;
  const problems = ruleFileProblems(doc).join('\n');
  assert.match(problems, /ear_backend_upp is exported by neither EAR nor vLLM/);
  assert.match(problems, /for must be a duration/);
  assert.match(problems, /severity/);
});
