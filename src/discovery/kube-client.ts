// A JSON GET to the API server with a deadline and a size bound, for lists, over @kubernetes/client-node's
// KubeConfig (TLS and credentials; which server: src/kube/kube-target.ts). The library's Watch carries the
// watches (reflector.ts).
import http from 'node:http';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { EarError } from '../errors/errors.js';

/** An answer other than 200: the API server's HTTP status and, from a Status body, its reason and message. */
export class KubeApiError extends EarError {
  readonly apiStatus: number;
  constructor (apiStatus: number, readonly reason: string, message: string) {
    super('EAR_ERR_KUBE_API', message);
    this.apiStatus = apiStatus;
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
