// The API server as discovery reaches it: @kubernetes/client-node's KubeConfig (file, in-cluster service account,
// or the default KUBECONFIG / ~/.kube/config; TLS and credentials) and a JSON GET with a deadline and a size
// bound, for lists (the library's Watch carries the watches, reflector.ts).
import { readFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';

const SA_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

/** A kubeconfig: `path` when given, else in-cluster when KUBERNETES_SERVICE_HOST is set, else the default lookup. */
export function loadKubeConfig (path: string): KubeConfig {
  const kc = new KubeConfig();
  if (path !== '') kc.loadFromFile(path);
  else if (process.env.KUBERNETES_SERVICE_HOST !== undefined) kc.loadFromCluster();
  else kc.loadFromDefault();
  if (kc.getCurrentCluster() === null) throw new Error(`no current cluster in the kubeconfig${path === '' ? '' : ` ${path}`}`);
  return kc;
}

/** The configured namespace, else POD_NAMESPACE, else the service account's, else the kubeconfig context's, else "default". */
export function resolveNamespace (configured: string, kc: KubeConfig): string {
  if (configured !== '') return configured;
  if (process.env.POD_NAMESPACE) return process.env.POD_NAMESPACE;
  try {
    const ns = readFileSync(SA_NAMESPACE_FILE, 'utf8').trim();
    if (ns !== '') return ns;
  } catch {
    // not in a pod
  }
  return kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
}

/** An answer other than 200: the HTTP status and, from a Status body, its reason and message. */
export class KubeApiError extends Error {
  readonly code = 'EAR_ERR_KUBE_API';
  constructor (readonly status: number, readonly reason: string, message: string) {
    super(message);
    this.name = 'KubeApiError';
  }
}

/** Largest answer read (a page of 500 pods is a few MB). */
const MAX_BODY_BYTES = 64 << 20;

/** GET `path?query` as JSON, within `timeoutMs` (headers and body); aborted by `signal`. */
export async function getJson (kc: KubeConfig, path: string, query: Record<string, string | undefined>, timeoutMs: number, signal?: AbortSignal): Promise<unknown> {
  const cluster = kc.getCurrentCluster();
  if (cluster === null) throw new Error('no current cluster');
  const url = new URL(cluster.server.replace(/\/+$/, '') + path);
  for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, v);
  const opts: https.RequestOptions = {};
  await kc.applyToHTTPSOptions(opts);
  const agent = opts.agent as http.Agent | undefined;
  try {
    return await new Promise<unknown>((resolve, reject) => {
      const mod = url.protocol === 'https:' ? https : http;
      const req = mod.request(url, { ...opts, method: 'GET', headers: { ...opts.headers, accept: 'application/json' }, signal }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_BODY_BYTES) req.destroy(new Error(`${url.pathname}: answer over ${MAX_BODY_BYTES} bytes`));
          else chunks.push(c);
        });
        res.on('error', reject);
        res.on('end', () => {
          clearTimeout(deadline);
          const text = Buffer.concat(chunks).toString('utf8');
          let doc: unknown;
          try {
            doc = JSON.parse(text);
          } catch {
            doc = null;
          }
          if (res.statusCode !== 200) {
            const st = (doc ?? {}) as { reason?: string; message?: string };
            reject(new KubeApiError(res.statusCode ?? 0, st.reason ?? '', `GET ${url.pathname}: ${res.statusCode} ${st.message ?? text.slice(0, 200)}`));
          } else if (doc === null) reject(new Error(`GET ${url.pathname}: the answer is not JSON`));
          else resolve(doc);
        });
      });
      const deadline = setTimeout(() => req.destroy(new Error(`GET ${url.pathname}: no answer within ${timeoutMs} ms`)), timeoutMs);
      req.on('error', (err) => {
        clearTimeout(deadline);
        reject(err);
      });
      req.end();
    });
  } finally {
    agent?.destroy();
  }
}
