// The stub API server itself (test/fixtures/k8s-api-server.ts), as other suites rely on it: selectors on lists,
// single-object CRUD with optimistic concurrency on a resource registered later (a Lease), and a raw watch's
// chunked JSON lines from a resourceVersion, with 410 for one older than the history.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'undici';
import { KubeApiStub, PODS, pod, type ResourceType } from '../fixtures/k8s-api-server.js';

const LEASES: ResourceType = { group: 'coordination.k8s.io', version: 'v1', plural: 'leases', kind: 'Lease' };
const stub = new KubeApiStub({ historyLimit: 5 });
stub.serve(LEASES);
await stub.start();
after(() => stub.close());
const auth = { authorization: 'Bearer stub-token' };

async function call (method: string, path: string, body?: unknown): Promise<{ status: number; doc: Record<string, unknown> }> {
  const r = await request(`${stub.url}${path}`, { method: method as 'GET', headers: { ...auth, 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: r.statusCode, doc: await r.body.json() as Record<string, unknown> };
}

test('lists filter by label selector (equality and set-based) and need the token', async () => {
  stub.apply(PODS, pod('a', '10.0.0.1', { app: 'vllm', tier: 'gold' }));
  stub.apply(PODS, pod('b', '10.0.0.2', { app: 'vllm', tier: 'silver' }));
  stub.apply(PODS, pod('c', '10.0.0.3', { app: 'web' }));
  const names = async (sel: string): Promise<string[]> => ((await call('GET', `/api/v1/namespaces/default/pods?labelSelector=${encodeURIComponent(sel)}`)).doc.items as Array<{ metadata: { name: string } }>).map((p) => p.metadata.name);
  assert.deepEqual(await names('app=vllm'), ['a', 'b']);
  assert.deepEqual(await names('app in (vllm,web),tier notin (silver)'), ['a', 'c']);
  assert.deepEqual(await names('!tier'), ['c']);
  assert.deepEqual(await names('app!=vllm'), ['c']);
  assert.equal((await call('GET', '/api/v1/namespaces/default/pods?labelSelector=app%20in%20vllm')).status, 400);
  assert.equal((await request(`${stub.url}/api/v1/namespaces/default/pods`)).statusCode, 401);
});

test('a Lease: create, read, update with the current resourceVersion, 409 on a stale one', async () => {
  const lease = { metadata: { name: 'ear-leader' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 15 } };
  const created = await call('POST', '/apis/coordination.k8s.io/v1/namespaces/default/leases', lease);
  assert.equal(created.status, 201);
  assert.equal((await call('POST', '/apis/coordination.k8s.io/v1/namespaces/default/leases', lease)).status, 409);
  const rv = (created.doc.metadata as { resourceVersion: string }).resourceVersion;
  const path = '/apis/coordination.k8s.io/v1/namespaces/default/leases/ear-leader';
  assert.equal((await call('GET', path)).doc.kind, 'Lease');
  const upd = await call('PUT', path, { metadata: { name: 'ear-leader', resourceVersion: rv }, spec: { holderIdentity: 'b' } });
  assert.equal(upd.status, 200);
  const stale = await call('PUT', path, { metadata: { name: 'ear-leader', resourceVersion: rv }, spec: { holderIdentity: 'c' } });
  assert.equal(stale.status, 409);
  assert.equal(stale.doc.reason, 'Conflict');
  assert.equal(((await call('GET', path)).doc.spec as { holderIdentity: string }).holderIdentity, 'b');
  assert.equal((await call('DELETE', path)).status, 200);
  assert.equal((await call('GET', path)).status, 404);
});

test('a watch streams JSON lines from a resourceVersion; one older than the history gets 410 Expired', async () => {
  const from = stub.resourceVersion;
  stub.apply(PODS, pod('d', '10.0.0.4', { app: 'vllm' }));
  stub.remove(PODS, 'default', 'd');
  const r = await request(`${stub.url}/api/v1/namespaces/default/pods?watch=1&resourceVersion=${from}&labelSelector=app%3Dvllm&timeoutSeconds=1`, { headers: auth });
  const lines = (await r.body.text()).trim().split('\n').map((l) => JSON.parse(l) as { type: string; object: { metadata: { name: string } } });
  assert.deepEqual(lines.map((e) => `${e.type} ${e.object.metadata.name}`), ['ADDED d', 'DELETED d']);
  for (let i = 0; i < 6; i++) stub.apply(PODS, pod(`e${i}`, '10.0.0.5', { app: 'x' }));
  const old = await request(`${stub.url}/api/v1/namespaces/default/pods?watch=true&resourceVersion=${from}`, { headers: auth });
  const ev = JSON.parse((await old.body.text()).trim()) as { type: string; object: { code: number; reason: string } };
  assert.deepEqual([ev.type, ev.object.code, ev.object.reason], ['ERROR', 410, 'Expired']);
});
