// The HTTP side of explicit contexts: POST /v1/context, GET and DELETE /v1/context/:id (uWS handlers). The
// registry is contexts.ts, the prefill context-prefill.ts. server.ts mounts these with one call.
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import type { Backend } from '../fleet/backends.js';
import { prefill, parseContextRequest } from './context-prefill.js';
import { EarError } from '../errors/errors.js';
import { requestId } from '../request/request-id.js';
import { limitHeadersOn, readBody, ResponseState } from './uws-io.js';
import { headTooLarge } from './head-size.js';
import { admitClient, credentialOf, traceOf, type HeaderOf } from '../request/accept.js';
import type { ProcessCore } from './core.js';

export const CONTEXT_PATH = '/v1/context';

const JSON_TYPE: [string, string] = ['content-type', 'application/json'];

/** Mounts the context routes on the uWS door of `core` (the prefill runs through the core's pipeline). */
export function mountContexts (app: TemplatedApp, core: ProcessCore, addressOf: (res: HttpResponse, req: HttpRequest) => () => string, headLimit = core.config.maxHeaderBytes): void {
  const { contexts, config, metrics, gate } = core;
  const admit = (header: HeaderOf, rs: ResponseState, address: () => string): ReturnType<typeof admitClient> =>
    admitClient(gate, CONTEXT_PATH, credentialOf(header), address, limitHeadersOn(rs, core.clock));

  app.post(CONTEXT_PATH, (res: HttpResponse, req: HttpRequest) => {
    const t0 = core.now();
    const header: HeaderOf = (h) => req.getHeader(h);
    const tooLarge = headTooLarge(req, headLimit);
    const { traceparent, tracestate } = traceOf(header);
    const declaredLength = req.getHeader('content-length');
    const rid = requestId(req.getHeader('x-request-id'));
    const rs = new ResponseState(res);
    const ridHeader: [string, string] = ['x-request-id', rid];
    let prefilled = false;
    // Refusals before the prefill are counted here; the prefill's own outcome is counted by the pipeline (at done).
    const fail = (err: unknown, headers: ReadonlyArray<[string, string]> = [ridHeader], close = false): void => {
      if (rs.aborted) {
        if (!prefilled) metrics.clientAborts.inc();
        return;
      }
      if (!rs.live) return;
      rs.fail(err, headers, close);
      if (!prefilled && rs.status > 0) core.refused(CONTEXT_PATH, rs.status);
    };
    if (tooLarge !== null) return fail(tooLarge);
    if (core.draining) return fail(new EarError('EAR_ERR_DRAINING', 'the gateway is shutting down'));
    let client;
    try {
      client = admit(header, rs, addressOf(res, req));
    } catch (err) {
      return fail(err);
    }
    const { user, limits } = client;
    readBody(rs, config, (body) => {
      const work = (async () => {
        const creq = parseContextRequest(body, config.contextTtlSeconds);
        if (!contexts.reserve()) {
          throw new EarError('EAR_ERR_CONTEXTS_FULL', `${contexts.maxContexts} contexts are live: delete one or wait for one to expire`);
        }
        let registered = false;
        try {
          const id = contexts.newId();
          prefilled = true;
          const r = await prefill(core.pipeline, id, creq, { requestId: rid, keyUser: user, limits, startedAt: t0, traceparent, tracestate }, rs, core.clock);
          if (r.kind === 'engine') {
            contexts.rejected.inc({ reason: 'engine' });
            rs.send(r.status, r.body, [['content-type', r.contentType], ['x-ear-backend', r.backend.id], ridHeader]);
            return;
          }
          const e = r.entry;
          registered = true;
          await contexts.register(e, r.backend, creq.ttlSeconds);
          rs.send(200, JSON.stringify({
            id: e.id, object: 'context', model: e.model, backend: e.backendId, prompt_tokens: e.promptTokens, cached_tokens: e.cachedTokens,
            created_at: Math.floor(e.createdAt / 1000), expires_at: Math.floor(e.expiresAt / 1000)
          }), [JSON_TYPE, ['x-session-id', e.id], ['x-ear-backend', e.backendId], ridHeader]);
        } finally {
          if (!registered) contexts.unreserve();
        }
      })();
      core.track(work.catch((err) => fail(err)));
    }, declaredLength, fail);
  });

  const byId = (handler: (rs: ResponseState, id: string) => Promise<void>) => (res: HttpResponse, req: HttpRequest) => {
    const tooLarge = headTooLarge(req, headLimit);
    const header: HeaderOf = (h) => req.getHeader(h);
    const rid = requestId(req.getHeader('x-request-id'));
    const param = req.getParameter(0) ?? '';
    const rs = new ResponseState(res);
    const ridHeader: [string, string] = ['x-request-id', rid];
    if (tooLarge !== null) return rs.fail(tooLarge, [ridHeader]);
    try {
      admit(header, rs, addressOf(res, req));
    } catch (err) {
      return rs.fail(err, [ridHeader]);
    }
    const id = decodedParam(param);
    if (id === null) return rs.fail(new EarError('EAR_ERR_BAD_REQUEST', 'the context id is not valid percent-encoded UTF-8'), [ridHeader]);
    handler(rs, id).catch((err) => rs.fail(err, [ridHeader]));
  };

  const notFound = (id: string): EarError => new EarError('EAR_ERR_CONTEXT_NOT_FOUND', `no context "${id}" (never created, deleted, or expired)`);

  app.get(`${CONTEXT_PATH}/:id`, byId(async (rs, id) => {
    const e = contexts.local(id);
    const now = core.clock();
    if (e !== undefined) {
      const b = liveBackend(core.backends, e.backendId);
      const session = core.state.session(id);
      // The session's host now (a migration policy may have moved it); the context's engine if unknown.
      const host = typeof session?.host === 'string' ? session.host : e.backendId;
      rs.send(200, JSON.stringify({
        id, object: 'context', model: e.model, backend: host, prompt_tokens: e.promptTokens, cached_tokens: e.cachedTokens,
        created_at: Math.floor(e.createdAt / 1000), expires_at: Math.floor(e.expiresAt / 1000),
        ttl_seconds_remaining: Math.max(0, Math.ceil((e.expiresAt - now) / 1000)),
        kv: contexts.kvLocation(e, liveBackend(core.backends, host) ?? b)
      }), [JSON_TYPE]);
      return;
    }
    const s = await contexts.shared(id);
    if (s === null) throw notFound(id);
    // Another replica's context: the store knows where and how long, not its blocks.
    rs.send(200, JSON.stringify({
      id, object: 'context', model: s.model, backend: s.backendId, prompt_tokens: s.promptTokens, cached_tokens: null,
      created_at: Math.floor(s.createdAt / 1000), expires_at: Math.floor(s.expiresAt / 1000),
      ttl_seconds_remaining: Math.max(0, Math.ceil((s.expiresAt - now) / 1000)),
      kv: { tier: 'unknown', blocks_gpu: 0, blocks_offloaded: 0, blocks_total: 0 }
    }), [JSON_TYPE]);
  }));

  app.del(`${CONTEXT_PATH}/:id`, byId(async (rs, id) => {
    if (!await contexts.delete(id)) throw notFound(id);
    rs.send(200, JSON.stringify({ id, object: 'context.deleted', deleted: true }), [JSON_TYPE]);
  }));
}

/** A path parameter percent-decoded; null if it is not valid (decodeURIComponent throws, in a uWS handler). */
export function decodedParam (param: string): string | null {
  try {
    return decodeURIComponent(param);
  } catch {
    return null;
  }
}

function liveBackend (backends: readonly Backend[], id: string): Backend | null {
  for (const b of backends) if (b.id === id && !b.gone) return b;
  return null;
}
